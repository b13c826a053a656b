// Implements: held-out likelihood of a ModelPlugin on a packed token file (DESIGN.md §5;
// spec-ao-gpt §3.1–3.3; spec-sedd-radd §3.1): exact L2R, exact any-order with K random orders, context-
// order ensembles of size M, and the diffusion ELBO bound. Per-token NLLs are summed in float64; the
// first-token protocol (skip | score) is applied identically to every exact row so GPT and AO-GPT numbers
// are comparable; bound (ELBO) rows score every token, as a bound on part of a window does not exist.
// Reports nats/token, perplexity, bits per byte, a stderr over sequences and the protocol.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/config_types.h"

namespace aobench {

class ModelPlugin;
class TokenFile;

// The eval section (core/config_types.h EvalConfig) and the autocast decision for the device.
struct EvalOptions : EvalConfig {
  bool autocast_bf16 = false;  // bf16 autocast for the network (CUDA, dtype auto)

  EvalOptions() = default;
  EvalOptions(const EvalConfig& eval, bool autocast_bf16) : EvalConfig(eval), autocast_bf16(autocast_bf16) {}
};

// What the token file stands for: from the prepare sidecar (<file>.json), used for bits per byte.
struct DatasetInfo {
  std::string name;     // "wikitext2"
  int64_t bytes = 0;    // UTF-8 bytes of the text the whole file encodes (0 = unknown)
  std::string packing;  // sidecar "packing" ("reference", "rows", ...); "" = unknown
};
// Reads "<bin_path>.json" (a sharded dataset: its index.json) when present; missing file → bytes 0, packing "".
DatasetInfo read_dataset_info(const std::string& name, const std::string& bin_path);

// One reported likelihood number.
struct LikelihoodResult {
  std::string dataset;
  std::string metric = "nll";  // "nll" (l2r/random), "nll_M<m>" (ensemble), "nelbo" (elbo); infill: the
                               // protocol, "k<K>", "mix<K>", "m<M>", "elbo" or "prefix" (metrics/infill.h)
  std::string mode;
  std::string infill;         // eval.mode=infill: "<place>_r<percent hidden>", e.g. "middle_r50"
  double nll = 0;             // nats per scored token (total nats / tokens)
  double stderr_ = 0;         // standard error over sequences of the per-sequence mean NLL
  double ppl = 0;             // exp(nll)
  double bits_per_byte = 0;   // NaN when the byte count is unknown
  bool bpb_estimate = false;  // bytes pro-rated to the scored tokens (a subset of the file)
  int64_t tokens = 0;         // tokens scored (per order)
  int64_t sequences = 0;      // n for the stderr
  int64_t windows_used = 0, windows_total = 0;
  int64_t orders = 0;         // K (random), 1 otherwise
  int64_t ensemble_size = 0;  // M (ensemble)
  int64_t positions = 0;      // ensemble positions per sequence (0 = all)
  int64_t mc_steps = 0;       // elbo
  bool is_bound = false;
  std::string protocol;  // "l2r exact; first token skipped; 1024-token windows; reference packing"
  double tok_per_s = 0;  // tokens through the network per second
  double wall_s = 0;
  nlohmann::json to_json() const;
};

// Per-row sums of per-token NLLs under the first-token protocol. nll (B, T) float64, scored (B, T) bool
// (generation order). skip_first drops generation index 0 for every row; otherwise, when require_first,
// an unscored index 0 is a ConfigError ("set model.start_token=true or eval.first_token=skip").
// Non-finite unscored entries (NaN from subsampling) are ignored. Returns (nats, tokens) per row.
std::vector<std::pair<double, int64_t>> nll_row_sums(const torch::Tensor& nll, const torch::Tensor& scored,
                                                     bool skip_first, bool require_first);

// Accumulates rows (one sequence × K orders) into the reported numbers.
struct NllTotals {
  double nats = 0;              // float64 sum over all sequences and orders
  int64_t tokens = 0;           // over all sequences and orders
  std::vector<double> seq_nll;  // per sequence: mean over its orders of nats/token
  // rows[k][b]: sums of order k for sequence b (all K entries for one batch of sequences).
  void add_sequences(const std::vector<std::vector<std::pair<double, int64_t>>>& rows_per_order);
};
// nll, ppl, stderr, bits per byte from totals: bytes_per_token = file bytes / file tokens (0 = unknown).
void finish_result(const NllTotals& totals, int64_t orders, int64_t file_tokens, int64_t file_bytes,
                   LikelihoodResult& out);

// The evaluation windows of `file` for a model of context T: their starts (every one) and how many of them
// eval.max_batches keeps (the first ones). DataError when the file holds no whole window.
struct EvalWindows {
  std::vector<int64_t> starts;
  size_t used = 0;
};
EvalWindows eval_windows(const TokenFile& file, int64_t T, const EvalOptions& options);
// (count, T) int64 windows starts[first … first + count) of `file` on `device`.
torch::Tensor load_windows(const TokenFile& file, const std::vector<int64_t>& starts, size_t first, size_t count,
                           int64_t T, torch::Device device);

// Evaluates `model` (already in eval mode on `device`) on `file` in non-overlapping windows of
// model.block_size(). One result for l2r/random/elbo, one per ensemble size for ensemble.
std::vector<LikelihoodResult> evaluate_likelihood(ModelPlugin& model, const TokenFile& file, const DatasetInfo& info,
                                                  const EvalOptions& options, torch::Device device);

// L2R forward throughput (tokens/s) of log_prob on batches of `file`: `warmup` untimed calls, then
// `iters` timed ones with a device sync before each clock read.
double l2r_throughput(ModelPlugin& model, const TokenFile& file, const EvalOptions& options, torch::Device device,
                      int64_t warmup, int64_t iters);

}  // namespace aobench
