// Implements: the typed sections of a resolved config (configs/base.json outside `model`): each section is
// parsed and validated once into a struct (types, ranges, enum values; errors name the key and give a
// hint), and code reads fields, not JSON paths. `model.*` stays JSON: the plugins validate their own keys.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/order.h"

namespace aobench {

// Dotted paths of the leaves a from_json read ("train.order.kind", ...), in reading order; a test checks
// that the parsers together read every leaf of configs/base.json.
using KeysRead = std::vector<std::string>;

// data: the token files, the tokenizer they were made with and the seed of the training batches.
struct DataConfig {
  std::string train;               // token file trained on ("" outside training)
  std::string val;                 // validation token file ("" = no validation)
  std::string tokenizer = "gpt2";  // decodes samples (datasets/tokenizer.h make_tokenizer)
  int64_t seed = -1;               // seeds the training BatchSampler alone; -1 = train.seed (which also seeds
                                   // init and orders), so runs that differ in train.seed can see the same batches
  static DataConfig from_json(const nlohmann::json& resolved, KeysRead* read = nullptr);
};

// train: the run, its optimizer and LR schedule, orders, logging, validation and checkpoint cadence.
struct TrainConfig {
  std::string out_dir = "runs/default";
  std::string device = "auto";  // core/device.h select_device
  std::string dtype = "auto";   // auto = bf16 autocast on CUDA, fp32 elsewhere
  uint64_t seed = 1337;
  int64_t batch_size = 8;                   // sequences per micro-batch (per rank)
  int64_t gradient_accumulation_steps = 1;  // micro-batches per optimizer step, per rank
  // Sequences per optimizer step over all ranks (nanoGPT's convention: its accumulation divided by the world
  // size); 0 = batch_size × gradient_accumulation_steps × ranks. Fixes a recipe's batch on any number of GPUs.
  int64_t global_batch_size = 0;
  int64_t max_iters = 1000;  // optimizer steps
  double max_seconds = 0;    // 0 = no time limit
  double learning_rate = 6e-4, min_lr = 6e-5;
  int64_t warmup_iters = 100, lr_decay_iters = 1000;
  std::string lr_schedule = "cosine";  // cosine (nanoGPT) | constant (warm-up then flat, SEDD/RADD)
  double weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double grad_clip = 1.0;  // 0 = measure the norm only
  double ema = 0.0;        // EMA decay; 0 = off
  OrderSpec order;         // generation orders of decoders
  int64_t log_interval = 10, eval_interval = 100, eval_iters = 10;
  int64_t checkpoint_interval = 500, keep_checkpoints = 2;
  std::string nan_policy = "stop";  // stop | skip
  double ddp_bucket_mb = 50;        // data parallel: gradient all-reduce bucket size (harness/train/grad_buckets.h)
  static TrainConfig from_json(const nlohmann::json& resolved, KeysRead* read = nullptr);
  // The micro-batches each of `world` ranks accumulates per optimizer step; ConfigError when global_batch_size
  // is not a whole number of micro-batches on that many ranks.
  int64_t accumulation_steps(int world) const;
};

// eval: the likelihood protocol of `aobench eval` (metrics/likelihood.h).
// eval.mode=infill: which tokens of a window are hidden (metrics/infill.h).
struct InfillConfig {
  std::vector<std::string> places = {"start", "middle", "end", "spans", "random"};
  std::vector<double> ratios = {0.1, 0.5, 0.9};  // hidden fraction of each window, in (0, 1)
  int64_t spans = 4;                             // place "spans": this many disjoint spans
  // Fillings: each model fills the hidden positions with sample() (metrics/infill.h evaluate_fillings).
  std::vector<std::string> fill;  // "greedy" (the most probable token at each draw) and/or "sampled"; none = off
  int64_t fill_windows = 32;      // windows filled per place and ratio: the first ones of the scored windows
  int64_t fill_steps = 0;         // network calls of an any-order or diffusion filling; 0 = one per hidden token
  double temperature = 1.0;       // sampled fillings
  double top_p = 1.0;
  std::string judge;  // an aobench gpt run or a Hugging Face GPT-2 folder scoring the fillings; "" = no judge
};

struct EvalConfig {
  std::string mode = "l2r";             // l2r | random | ensemble | elbo | infill
  int64_t batch_size = 8;               // windows per model call
  int64_t max_batches = 0;              // 0 = the whole file; else at most this many batches
  int64_t orders = 1;                   // random: K uniform orders per sequence
  std::vector<int64_t> ensemble = {1};  // ensemble: the sizes M (nested members)
  int64_t ensemble_positions = 0;       // ensemble: 0 = every step; else this many sampled steps per sequence
  int64_t mc_steps = 128;               // elbo: Monte-Carlo timesteps per sequence
  bool skip_first = true;               // first_token: "skip" (true) | "score" (false); not for bound
                                        // (elbo) rows, which always score all T tokens of a window
  uint64_t seed = 1234;                 // orders, ensemble members, ELBO noise, hidden positions
  InfillConfig infill;                  // infill: hidden places and ratios (orders / ensemble / mc_steps apply)
  static EvalConfig from_json(const nlohmann::json& resolved, KeysRead* read = nullptr);
};

// sample: the generation protocol of `aobench sample` / `aobench speed`.
struct SampleConfig {
  int64_t num_samples = 8;               // per prompt line, or in all without a prompt file
  int64_t batch_size = 8;                // rows per sample() call
  int64_t length = 0;                    // tokens per sample (≤ the model's block_size); 0 = the block_size
  int64_t steps = 256;                   // sampling steps (AR decoders ignore it)
  double temperature = 1.0;              // > 0
  double top_p = 1.0;                    // (0, 1], HF nucleus (the crossing token kept)
  bool float64 = true;                   // float64 categorical draws
  uint64_t seed = 4234;                  // batch i uses seed + i
  std::string schedule = "linear";       // any-order per-step counts: linear | cosine
  std::string counts = "deterministic";  // any-order: deterministic (reference) | bernoulli (Lemma 1)
  bool ema = true;                       // EMA weights when the checkpoint has them
  static SampleConfig from_json(const nlohmann::json& resolved, KeysRead* read = nullptr);
  nlohmann::json to_json() const;  // the sample.* keys, as recorded with samples
};

// speed: the steps swept by `aobench speed`, the batch shape, timed repetitions and untimed warm-ups.
struct SpeedConfig {
  std::vector<int64_t> steps = {64, 128, 256, 512, 1024};
  int64_t batch_size = 32;
  int64_t length = 0;  // 0 = the model's block_size
  int64_t repeats = 3;
  int64_t warmup = 1;
  static SpeedConfig from_json(const nlohmann::json& resolved, KeysRead* read = nullptr);
};

// genppl: the judge's batch and device for `aobench genppl`.
struct GenpplConfig {
  int64_t batch_size = 16;
  std::string device = "auto";
  static GenpplConfig from_json(const nlohmann::json& resolved, KeysRead* read = nullptr);
};

// perf: the speed switches (core/device.h: kPerfSwitches), each a fast path, on by default; false takes the
// LibTorch reference path. The environment's AOBENCH_<NAME> overrides a key, for debugging. A config without
// the section (a run saved before it existed) reads as every switch on.
struct PerfConfig {
  bool fused_ce = true;         // the fused cross-entropy kernel (plugins/common/cross_entropy.h)
  bool fused_ln = true;         // the fused residual-add + LayerNorm with its backward
  bool fused_norms = true;      // the fused q/k norms
  bool fused_adamw = true;      // one multi-tensor AdamW launch per group (harness/train/optim.h)
  bool fused_linear = true;     // the training Linear's backward (plugins/common/linear.h: linear2d_training)
  bool fused_decode = true;     // the KV-cache decode attention kernel
  bool decode_gemm = true;      // the decode step's Linear kernel (plugins/common/decode_linear.h)
  bool decode_pdl = true;       // a decode step's kernels as programmatic dependents (plugins/common/decode_scope.h)
  bool cuda_graphs = true;      // whole-step CUDA graphs in training and sampling
  bool draw_split = true;       // the split form of the top-p draw
  bool draw_candidates = true;  // the top-p draw's candidate rounds before its radix select
  bool draw_resident = true;    // a split row's draw in one cooperative kernel, not one kernel a phase
  bool fused_sampling = true;   // the fused sampling kernels
  static PerfConfig from_json(const nlohmann::json& resolved, KeysRead* read = nullptr);
  // Sets the process's switches (set_perf_switch) to these values: before a model is built or run.
  void apply() const;
};

// Every section of a resolved config checked at once (data, train, eval, sample, speed, genppl, perf): what `train`
// stores is then what `eval`, `sample` and `speed` accept later. ConfigError naming the first bad key.
void validate_sections(const nlohmann::json& resolved);

}  // namespace aobench
