// Implements: the training loop's log lines, progress line and metrics rows (see logger.h).
#include "harness/train/logger.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "core/device.h"
#include "core/progress.h"
#include "harness/run_dir.h"

namespace aobench {

std::string format_number(const char* printf_format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, printf_format, v);
  return buf;
}

TrainLogger::TrainLogger(const RunDir& run, bool main_rank, torch::Device device, int64_t max_iters,
                         int64_t log_interval, double flops_per_token, double peak_flops, int world, int64_t start_step,
                         int64_t tokens_seen, double time_offset)
    : run_(run),
      main_rank_(main_rank),
      tty_(main_rank && ::isatty(STDOUT_FILENO)),
      device_(device),
      max_iters_(max_iters),
      log_interval_(log_interval),
      flops_per_token_(flops_per_token),
      peak_flops_(peak_flops),
      world_(world),
      start_step_(start_step),
      time_offset_(time_offset),
      t_start_(Clock::now()),
      t_log_(t_start_),
      tokens_at_log_(tokens_seen) {}

double TrainLogger::elapsed_s() const { return std::chrono::duration<double>(Clock::now() - t_start_).count(); }

namespace {

// " | gate_attn 0.00153…0.0134 gate_mlp 0.00149…0.0102": min…max over each group "<group>/<member>" of the
// diagnostics (a name without '/' is its own group, shown as one value); "" when there are none.
std::string diagnostics_summary(const std::map<std::string, double>& diagnostics) {
  std::map<std::string, std::pair<double, double>> groups;  // group → (min, max)
  for (const auto& [name, v] : diagnostics) {
    const std::string group = name.substr(0, name.rfind('/'));
    auto [it, fresh] = groups.emplace(group, std::make_pair(v, v));
    if (!fresh) it->second = {std::min(it->second.first, v), std::max(it->second.second, v)};
  }
  std::string out;
  for (const auto& [group, range] : groups) {
    out += (out.empty() ? " | " : " ") + group + " " + format_number("%.3g", range.first);
    if (range.second != range.first) out += "…" + format_number("%.3g", range.second);
  }
  return out;
}

}  // namespace

void TrainLogger::step(int64_t step, double loss, double lr, double grad_norm, int64_t tokens_seen, int64_t nan_skips,
                       const std::map<std::string, double>& extra, const std::map<std::string, double>& diagnostics) {
  if (logs_step(step)) {
    // tokens_seen counts all ranks (world × per-rank), so tok_s is the summed throughput.
    const double dt = std::chrono::duration<double>(Clock::now() - t_log_).count();
    const double tok_s = dt > 0 ? double(tokens_seen - tokens_at_log_) / dt : 0.0;
    const double mfu = peak_flops_ > 0 ? flops_per_token_ * tok_s / (peak_flops_ * world_) : std::nan("");
    const double mem = max_memory_gib(device_);
    std::ostringstream line;
    line << "step " << step << "/" << max_iters_ << " | loss " << format_number("%.4f", loss) << " | lr "
         << format_number("%.2e", lr) << " | grad_norm " << format_number("%.2f", grad_norm) << " | "
         << format_count(tok_s) << " tok/s | mfu "
         << (std::isfinite(mfu) ? format_number("%.1f%%", 100 * mfu) : std::string("n/a")) << " | mem "
         << format_number("%.1f GiB", mem);
    if (nan_skips) line << " | skipped " << nan_skips;
    line << diagnostics_summary(diagnostics);
    std::cout << erase() << line.str() << "\n" << std::flush;
    progress_shown_ = false;
    nlohmann::json m = {{"step", step},
                        {"loss/train", loss},
                        {"lr", lr},
                        {"grad_norm", grad_norm},
                        {"throughput/tok_s", tok_s},
                        {"mfu", std::isfinite(mfu) ? nlohmann::json(mfu) : nullptr},
                        {device_.is_cuda() ? "memory/max_allocated_gib" : "memory/max_rss_gib", mem},
                        {"tokens", tokens_seen},
                        {"time_s", run_time_s()},
                        {"nan_skips", nan_skips}};
    for (const auto& [k, v] : extra) m["train/" + k] = v;
    for (const auto& [k, v] : diagnostics) m["diag/" + k] = v;
    run_.append_metrics(m);
    t_log_ = Clock::now();
    tokens_at_log_ = tokens_seen;
  } else if (tty_) {
    const double frac = double(step) / double(max_iters_);
    const double eta = elapsed_s() / double(std::max<int64_t>(1, step - start_step_)) * double(max_iters_ - step);
    std::cout << "\r  step " << step << "/" << max_iters_ << " [" << format_number("%5.1f%%", 100 * frac) << "] loss "
              << format_number("%.4f", loss) << " ETA " << format_duration(eta) << "\033[K" << std::flush;
    progress_shown_ = true;
  }
}

void TrainLogger::val(int64_t step, double loss, double standard_error, const std::string& label) {
  if (!main_rank_ || !std::isfinite(loss)) return;
  const bool has_se = std::isfinite(standard_error);
  note("step " + std::to_string(step) + " | val loss " + format_number("%.4f", loss) +
       (has_se ? " ± " + format_number("%.4f", standard_error) : std::string()) + label);
  nlohmann::json m = {{"step", step}, {"loss/val", loss}};
  if (has_se) m["loss/val_se"] = standard_error;
  run_.append_metrics(m);
}

void TrainLogger::note(const std::string& line) {
  if (main_rank_) std::cout << erase() << line << "\n";
  progress_shown_ = false;
}

void TrainLogger::clear() {
  if (tty_ && progress_shown_) std::cout << "\r\033[K" << std::flush;
  progress_shown_ = false;
}

}  // namespace aobench
