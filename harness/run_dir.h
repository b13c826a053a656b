// Implements: the run directory of a training run (DESIGN.md §4): config.resolved.json, metrics.jsonl
// (one JSON object per line, hierarchical names "loss/train", "loss/val"), checkpoints/.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace aobench {

class RunDir {
 public:
  explicit RunDir(std::string path);   // creates <path> and <path>/checkpoints
  const std::string& path() const { return path_; }
  std::string metrics_path() const { return path_ + "/metrics.jsonl"; }

  void write_config(const nlohmann::json& resolved) const;    // config.resolved.json, atomically
  void append_metrics(const nlohmann::json& line) const;      // one line, flushed
  // Keeps only lines whose "step" ≤ step (resume: later lines would duplicate the curve). step < 0 empties.
  void truncate_metrics_after(int64_t step) const;

 private:
  std::string path_;
};

}  // namespace aobench
