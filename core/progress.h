// Implements: progress of long commands (prepare, eval, run, sample): done/total, percentage, rate and
// ETA, written to stderr so stdout stays a clean table / JSON. On a terminal one live line is redrawn in
// place ("\r", at most 10 times a second); in a log (stderr not a terminal) a plain line is written every
// $AOBENCH_PROGRESS_INTERVAL seconds (default 30) with the elapsed time, so a long step is never silent.
// finish() writes one summary line in both cases. advance() may be called from several threads.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <mutex>
#include <string>

namespace aobench {

// "1h02m", "3m05s", "42s", "0.8s".
std::string format_duration(double seconds);
// "17", "12.3k", "4.56M", "1.20G": counts and rates in a progress line.
std::string format_count(double n);

class Progress {
 public:
  struct Options {
    bool live = false;              // redraw one line with '\r' (a terminal) instead of periodic lines
    double interval_s = 30;         // periodic lines: seconds between two lines
    std::ostream* out = nullptr;    // nullptr = std::cerr
    std::function<double()> clock;  // seconds since an arbitrary epoch; empty = steady_clock (tests fake it)
  };
  // Live when stderr is a terminal, else periodic lines every $AOBENCH_PROGRESS_INTERVAL seconds (30).
  static Options for_stderr();

  // label: what is being done ("eval wikitext2 l2r"); total: units expected (0 = unknown, no % / ETA);
  // unit: plural noun for the rate ("windows", "rows").
  Progress(std::string label, int64_t total, std::string unit, Options options = for_stderr());
  ~Progress();  // clears a live line that finish() did not replace
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void advance(int64_t n = 1);  // n more units done (thread-safe)
  // n units counted as done without work (a re-run skipping finished jobs): they do not enter the rate,
  // so the ETA comes from the work actually done in this process.
  void skip(int64_t n);
  // "40/229 windows (17%), 3.2 windows/s, ETA 59s"; the rate and ETA once something was done.
  std::string status() const;
  double elapsed() const;  // seconds since construction
  // The summary line "<label>: 229 windows in 12.4s (18.5 windows/s)[; extra]", replacing a live line.
  // Later calls do nothing.
  void finish(const std::string& extra = "");

 private:
  double now() const;
  void maybe_print();

  std::string label_, unit_;
  int64_t total_;
  Options opt_;
  double start_, last_print_;
  std::atomic<int64_t> done_{0}, skipped_{0};
  std::mutex print_mutex_;
  bool finished_ = false, line_shown_ = false;
};

}  // namespace aobench
