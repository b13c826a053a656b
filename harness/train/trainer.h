// Implements: the training loop (DESIGN.md §3; spec-ao-gpt §2.2–2.3; spec-sedd-radd §2.6): AdamW with
// decay / no-decay groups, warmup + cosine (or constant) LR, gradient clipping and accumulation, bf16
// autocast on GPU, EMA with the (1+n)/(10+n) warm-up, periodic validation, atomic checkpoints and exact
// resume, SIGINT/SIGTERM → checkpoint and clean exit, NaN policy, DDP over c10d when WORLD_SIZE > 1.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace aobench {

struct TrainSummary {
  std::string run_dir;
  int64_t steps = 0;                    // optimizer steps completed (total, including resumed ones)
  double final_train_loss = 0;          // last logged training loss
  double final_val_loss = 0;            // last validation loss (NaN when no validation data)
  bool interrupted = false;             // stopped by a signal after writing a checkpoint
  int signal = 0;                       // SIGINT / SIGTERM when interrupted (exit code 128 + signal)
  int64_t nan_skips = 0;                // batches skipped under train.nan_policy = "skip"
  double best_val_loss = std::nan("");  // lowest validation loss of the run (resumed segments included)
  int64_t best_val_step = -1;           // its step
  int64_t tokens = 0;                   // tokens trained on (all ranks, all segments)
  int64_t params = 0;                   // parameter count of the model
  double wall_s = 0;                    // training wall time, resumed segments included
  int64_t graph_from_step = 0;          // first step of this segment replayed from a CUDA graph (0: none)
};

// "300 steps, 614400 tokens (614.4k) in 41s; val loss best 2.3100 (step 200), final 2.3500; 1.23M
// parameters": the final line of `aobench train` (after "done: ").
std::string summary_line(const TrainSummary& s);

// Trains the model described by a resolved config (config.h resolve_config). Writes
// <train.out_dir>/config.resolved.json, metrics.jsonl, checkpoints/. With `resume`, continues from the
// newest checkpoint of train.out_dir (error if none, if its plugin/flavour differ, or if its config differs
// in a key other than the run-length and bookkeeping ones, unless `allow_config_changes`). A checkpoint
// already at train.max_iters is left untouched. Holds <train.out_dir>/.lock (DirLock) while it runs.
TrainSummary run_training(const nlohmann::json& config, bool resume, bool allow_config_changes = false);

}  // namespace aobench
