// Implements: the run directory of a training run (DESIGN.md §4): config.resolved.json, metrics.jsonl
// (one JSON object per line, hierarchical names "loss/train", "loss/val"), checkpoints/.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace aobench {

// One writer at a time: an exclusive flock(2) on `lock_path`, held for the object's lifetime (the kernel
// drops it when the process dies, so a crash leaves no stale lock). The holder writes "pid N (what) on
// HOST since TIME" into the file, so a second writer names it: with `wait` it says whom it waits for and
// blocks until the lock is free, otherwise it fails at once with a ConfigError. The holder removes the file when
// it is done (a waiter that locked the removed file notices and takes the new one), so no lock files stay behind.
// train and run lock <dir>/.lock of their run / experiment directory; eval locks RESULTS.json.lock while
// it merges into a results file; report waits for <dir>/.report.lock before it collects and renders.
class DirLock {
 public:
  DirLock(const std::string& lock_path, const std::string& what, bool wait);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

class RunDir {
 public:
  explicit RunDir(std::string path);  // creates <path> and <path>/checkpoints
  const std::string& path() const { return path_; }
  std::string metrics_path() const { return path_ + "/metrics.jsonl"; }

  void write_config(const nlohmann::json& resolved) const;  // config.resolved.json, atomically
  void append_metrics(const nlohmann::json& line) const;    // one line, flushed
  // Keeps only lines whose "step" ≤ step (resume: later lines would duplicate the curve). step < 0 empties.
  void truncate_metrics_after(int64_t step) const;

 private:
  std::string path_;
};

}  // namespace aobench
