// Implements: the generation half of the benchmark (spec-ao-gpt §4, spec-sedd-radd §5): the
// sample.* / speed.* / genppl.* knobs parsed once into typed structs, prompt files, the JSONL records of
// `aobench sample`, generative perplexity of samples under a GPT-2-family judge (`aobench genppl`) and the
// wall-clock timing of full generations (`aobench speed`).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/config_types.h"
#include "core/plugin_api.h"
#include "metrics/stats.h"

namespace aobench {

class Tokenizer;

// The sample section (core/config_types.h SampleConfig) and the sample() calls it asks for.
struct SampleOptions : SampleConfig {
  SampleOptions() = default;
  explicit SampleOptions(const SampleConfig& sample) : SampleConfig(sample) {}
  // The request of one sample() call: `rows` rows, seed `seed`.
  SampleRequest request(int64_t rows, uint64_t seed, torch::Device device) const;
};

// Completes `sections` of a saved config (a run's config.resolved.json) from configs/base.json: keys a run saved
// before they existed read as their defaults; the saved values stay.
void complete_from_base(nlohmann::json& saved, const std::vector<std::string>& sections);

// A run's saved config with the sample / speed / genppl sections completed from configs/base.json (runs
// saved before a key existed), then `overrides` applied; each must lie within `allowed` (sections such as
// "sample", or paths such as "train.device"), else a ConfigError naming its origin.
nlohmann::json generation_config(nlohmann::json saved, const Overrides& overrides,
                                 const std::vector<std::string>& allowed, const std::string& command);

// The name a run directory goes by in results files: its last path component ("runs/x/gpt/" → "gpt").
std::string run_name(const std::string& run_dir);

// One prompt line: `length` ids, −1 = free position (to generate).
struct Prompt {
  std::vector<int64_t> ids;
  int64_t line = 0;  // 1-based line in the prompt file
};

// DataError naming `path` when it is a FIFO, device or directory (checked before opening: a FIFO would
// block); `aobench sample` calls it before loading the model, read_prompt_file() again.
void check_prompt_file(const std::string& path);

// Reads a JSONL prompt file: {"ids": [...]} with −1 or null for free positions (ids shorter than `length`
// leave the rest free) or {"text": "..."} (a prefix, encoded with `tokenizer`). Blank lines are skipped.
// DataError naming the file and line for bad JSON, neither/both keys, ids outside [0, vocab) or a prompt
// longer than `length`; an empty file is an error too.
std::vector<Prompt> read_prompt_file(const std::string& path, const Tokenizer& tokenizer, int64_t vocab,
                                     int64_t length);

// sample.length / speed.length (`key`) for a model reading `block_size` tokens: 0 means the block size; a longer
// value is a ConfigError naming the key (`hint_tail` appended to its hint).
int64_t generation_length(int64_t length, int64_t block_size, const std::string& key,
                          const std::string& hint_tail = "");

// The positions a prompt fixed as a mask over a sample of `length` tokens (positions outside it are ignored).
std::vector<bool> given_mask(size_t length, const std::vector<int64_t>& given);

// A sample as text with its prompt marked: the decoded runs of given (prompt) and generated positions, in order.
struct TextSegment {
  bool given = false;
  std::string text;
};
std::vector<TextSegment> sample_segments(const std::vector<int64_t>& ids, const std::vector<int64_t>& given,
                                         const Tokenizer& tokenizer);
// For a terminal: given text inside «…», control characters other than newline and tab as \xNN (a sample
// cannot move the cursor or change the terminal), invalid UTF-8 as U+FFFD.
std::string printable_sample(const std::vector<TextSegment>& segments);

// A prompt the model's capabilities cover (PluginInfo::capabilities): a given position after a free one is
// infilling (needs `infill`), given positions at all need `prefix_prompt` or `infill`; otherwise a
// ConfigError naming the line.
void check_prompt_capabilities(const Prompt& prompt, const PluginInfo& info, const std::string& origin);

// (rows, length) int64 request prompt: the prompt's ids repeated on every row.
torch::Tensor prompt_rows(const Prompt& prompt, int64_t rows);

// Generative perplexity of one sample under a judge: Σ −log p of tokens 1…L−1 given their prefix (the
// first token unscored, spec §4.6), the scored count, and the sample's unigram entropy.
struct SampleScore {
  double nll_sum = 0;
  int64_t tokens = 0;
  double entropy = 0;
  double ppl() const;  // exp(nll_sum / tokens)
};

// Scores each sample (ids in [0, judge vocab), length ≤ judge block_size) with the judge's exact L2R
// log_prob in float32, `batch_size` samples of equal length per call. Samples are fed as they are: no BOS,
// no window, EOS scored like any token. `given[i]` (when not empty) lists the positions of sample i a prompt fixed:
// they are context, neither scored nor counted in the entropy.
std::vector<SampleScore> score_samples(ModelPlugin& judge, const std::vector<std::vector<int64_t>>& samples,
                                       int64_t batch_size, torch::Device device,
                                       const std::vector<std::vector<int64_t>>& given = {});

// Entropy (nats) of the empirical unigram distribution of one sample; 0 for an empty sample.
double unigram_entropy(const std::vector<int64_t>& ids);

struct GenPplSummary {
  MeanStderr ppl;         // mean ± stderr of the per-sample perplexities (the paper's number)
  double corpus_nll = 0;  // total nats / total scored tokens
  double corpus_ppl = 0;  // exp(corpus_nll)
  MeanStderr entropy;     // mean ± stderr of the per-sample unigram entropies
  int64_t tokens = 0;     // scored tokens
};
GenPplSummary summarize_scores(const std::vector<SampleScore>& scores);

// "0.95", "1", "0.7": the shortest round-trip form (%.6g), so names stay stable and readable.
std::string short_number(double v);
// Results-file names of a protocol: "gen_p0.95_t0.9_s256" (genppl metrics) and "speed_s256" (speed),
// so reports sort them (top-p, temperature) then steps and `aobench compare` matches them by name.
std::string genppl_dataset(int64_t steps, double top_p, double temperature);
// Samples completing prompts: "gen_prompted_p<top_p>_t<T>_s<steps>" (only their generated tokens scored).
std::string genppl_prompted_dataset(int64_t steps, double top_p, double temperature);
std::string speed_dataset(int64_t steps);

// Wall-clock seconds of `repeats` complete sample(request) calls after `warmup` untimed ones; the device
// is synchronised around each call and CUDA devices are timed with CUDA events.
struct GenerationTiming {
  std::vector<double> seconds;
  double mean = 0, sd = 0;  // sd with n − 1 (0 for one repeat)
  int64_t network_calls = 0;
};
GenerationTiming time_generation(ModelPlugin& model, const SampleRequest& request, int64_t warmup, int64_t repeats);

// The hardware floor of one generation: the time no implementation can beat on a device of `bandwidth` bytes/s
// and `peak_flops` FLOP/s, summed over its network calls, each bounded by the larger of its bytes / bandwidth and
// its FLOPs / peak. A call reads every matmul weight once (embedding lookups excluded) and, for a decoder with a
// KV cache (autoregressive, any-order), the keys and values of the tokens already placed; it computes the forward
// of the tokens it places (2 FLOPs per weight, 4 · layers · width per token of context for attention). An encoder
// (masked diffusion) runs every call over all `length` positions, without a cache. The sampler's schedule spreads
// the `length` tokens evenly over the calls.
struct GenerationShape {
  bool kv_cache = true;  // decoders; false for encoders
  int64_t batch = 1, length = 1, calls = 1;
  double matmul_params = 0;  // from flops_per_token: (flops_per_token(T) − 12 · layers · width · T) / 6
  int64_t n_layer = 0, n_embd = 0;
  double weight_bytes = 2;      // per parameter: 2 under bf16, 4 in fp32
  double activation_bytes = 2;  // per cached key or value element
};
struct GenerationFloor {
  double seconds = 0;           // 0 when the bandwidth or the peak is unknown
  double bytes = 0, flops = 0;  // summed over the calls
};
GenerationFloor generation_floor(const GenerationShape& shape, double bandwidth, double peak_flops);

}  // namespace aobench
