// Implements: the progress reporter of long commands (see progress.h).
#include "core/progress.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "core/errors.h"

namespace aobench {

std::string format_duration(double seconds) {
  char buf[64];
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 10) {
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
    return buf;
  }
  const int64_t t = static_cast<int64_t>(seconds + 0.5);
  if (t < 60)
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(t));
  else if (t < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(t / 60), static_cast<long long>(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(t / 3600),
                  static_cast<long long>(t % 3600 / 60));
  return buf;
}

// Up to "5.12P" (a plan's FLOPs and tokens).
std::string format_count(double n) {
  char buf[64];
  const double a = std::abs(n);
  if (a >= 1e15)
    std::snprintf(buf, sizeof buf, "%.2fP", n / 1e15);
  else if (a >= 1e12)
    std::snprintf(buf, sizeof buf, "%.2fT", n / 1e12);
  else if (a >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2fG", n / 1e9);
  else if (a >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", n / 1e6);
  else if (a >= 1e4)
    std::snprintf(buf, sizeof buf, "%.1fk", n / 1e3);
  else if (a >= 100 || n == std::floor(n))
    std::snprintf(buf, sizeof buf, "%.0f", n);
  else
    std::snprintf(buf, sizeof buf, "%.3g", n);
  return buf;
}

Progress::Options Progress::for_stderr() {
  Options o;
  o.live = ::isatty(STDERR_FILENO) == 1;
  if (const char* env = std::getenv("AOBENCH_PROGRESS_INTERVAL"); env && *env) {
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    if (end == env || *end != '\0' || !std::isfinite(v) || v < 0)
      throw ConfigError(std::string("AOBENCH_PROGRESS_INTERVAL='") + env + "' is not a number of seconds ≥ 0",
                        "e.g. AOBENCH_PROGRESS_INTERVAL=10 (a progress line every 10 s in logs), or unset it");
    o.interval_s = v;
  }
  return o;
}

Progress::Progress(std::string label, int64_t total, std::string unit, Options options)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), opt_(std::move(options)) {
  if (!opt_.out) opt_.out = &std::cerr;
  start_ = last_print_ = now();
}

Progress::~Progress() {
  std::lock_guard<std::mutex> lock(print_mutex_);
  if (opt_.live && line_shown_ && !finished_) *opt_.out << "\r\033[K" << std::flush;
}

double Progress::now() const {
  if (opt_.clock) return opt_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Progress::elapsed() const { return now() - start_; }

void Progress::advance(int64_t n) {
  done_.fetch_add(n);
  maybe_print();
}

void Progress::skip(int64_t n) {
  skipped_.fetch_add(n);
  done_.fetch_add(n);
}

std::string Progress::status() const {
  const int64_t done = done_.load(), worked = done - skipped_.load();
  const double t = elapsed();
  const double rate = t > 0 && worked > 0 ? double(worked) / t : 0.0;
  std::string s = format_count(double(done));
  if (total_ > 0) s += "/" + format_count(double(total_));
  s += " " + unit_;
  if (total_ > 0) {
    char pct[32];
    std::snprintf(pct, sizeof pct, " (%.0f%%)", 100.0 * double(done) / double(total_));
    s += pct;
  }
  if (rate > 0) s += ", " + format_count(rate) + " " + unit_ + "/s";
  if (total_ > 0 && rate > 0 && done < total_) s += ", ETA " + format_duration(double(total_ - done) / rate);
  return s;
}

void Progress::maybe_print() {
  const double gap = opt_.live ? 0.1 : opt_.interval_s;
  const double t = now();
  std::unique_lock<std::mutex> lock(print_mutex_, std::try_to_lock);  // a busy printer: skip, never wait
  if (!lock.owns_lock() || finished_ || t - last_print_ < gap) return;
  last_print_ = t;
  if (opt_.live) {
    *opt_.out << "\r" << label_ << ": " << status() << ", " << format_duration(t - start_) << " elapsed\033[K"
              << std::flush;
    line_shown_ = true;
  } else {
    *opt_.out << "[" << format_duration(t - start_) << "] " << label_ << ": " << status() << "\n" << std::flush;
  }
}

void Progress::finish(const std::string& extra) {
  std::lock_guard<std::mutex> lock(print_mutex_);
  if (finished_) return;
  finished_ = true;
  const int64_t done = done_.load(), worked = done - skipped_.load();
  const double t = elapsed();
  std::string line = label_ + ": " + format_count(double(done)) + " " + unit_ + " in " + format_duration(t);
  if (t > 0 && worked > 0) line += " (" + format_count(double(worked) / t) + " " + unit_ + "/s)";
  if (!extra.empty()) line += "; " + extra;
  *opt_.out << (opt_.live && line_shown_ ? "\r" : "") << line << (opt_.live ? "\033[K" : "") << "\n" << std::flush;
}

}  // namespace aobench
