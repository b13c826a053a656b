// Implements: what the training loop prints and records: every train.log_interval steps (and the last) a
// log line and a metrics.jsonl row (loss, lr, grad norm, summed tok/s, MFU, peak memory, the plugin's
// diagnostics); in between, on a terminal, one self-overwriting progress line with an ETA; validation losses
// with their standard error; notes (skipped batches, time limit) that first clear the progress line. Only
// the main rank prints or writes.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include <torch/torch.h>

namespace aobench {

class RunDir;

// printf-style text of one number ("%.4f", "%g"): the loss, lr and norm columns of training output.
std::string format_number(const char* printf_format, double v);

class TrainLogger {
 public:
  // `peak_flops` 0 = unknown (MFU n/a); `world` ranks share the throughput; the clock starts now.
  TrainLogger(const RunDir& run, bool main_rank, torch::Device device, int64_t max_iters, int64_t log_interval,
              double flops_per_token, double peak_flops, int world, int64_t start_step, int64_t tokens_seen,
              double time_offset);

  double elapsed_s() const;                                         // since construction (this segment)
  double run_time_s() const { return time_offset_ + elapsed_s(); }  // resumed segments included

  // True when step() writes a log line for `step` (main rank, every log_interval and the last): when the
  // caller should gather the `diagnostics` it passes.
  bool logs_step(int64_t step) const { return main_rank_ && (step % log_interval_ == 0 || step == max_iters_); }
  // After optimizer step `step` (1-based count of steps done), `tokens_seen` over all ranks. `extra` (the
  // loss's metrics) are written as "train/<name>", `diagnostics` (ModelPlugin::diagnostics) as "diag/<name>"
  // and summarised on the line as min…max per group "<group>/<member>".
  void step(int64_t step, double loss, double lr, double grad_norm, int64_t tokens_seen, int64_t nan_skips,
            const std::map<std::string, double>& extra, const std::map<std::string, double>& diagnostics = {});
  // A finite validation loss: "step N | val loss X ± SE<label>" and a metrics row {"loss/val", "loss/val_se"}
  // (SE, the standard error over the evaluation batches, is left out when NaN); a NaN loss is ignored.
  void val(int64_t step, double loss, double standard_error, const std::string& label);
  // A line of its own (main rank), clearing the progress line first.
  void note(const std::string& line);
  // Clears the progress line, if one is shown.
  void clear();

 private:
  using Clock = std::chrono::steady_clock;
  const RunDir& run_;
  const bool main_rank_, tty_;
  const torch::Device device_;
  const int64_t max_iters_, log_interval_;
  const double flops_per_token_, peak_flops_;
  const int world_;
  const int64_t start_step_;
  const double time_offset_;
  const Clock::time_point t_start_;
  Clock::time_point t_log_;
  int64_t tokens_at_log_;
  bool progress_shown_ = false;
  std::string erase() const { return tty_ && progress_shown_ ? "\r\033[K" : ""; }
};

}  // namespace aobench
