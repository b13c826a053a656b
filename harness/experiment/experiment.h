// Implements: the typed experiment of `aobench run` (DESIGN.md §4): an experiment file read and checked once —
// its tier and base applied (tiers.h, generation.h), seeds and lanes counted (seeds.h, lanes.h), paths resolved
// (paths.h), every prepare entry parsed, every job resolved against the plugins and every eval mode checked
// against the runs it covers — so a typo anywhere fails in seconds, before any side effect. run_experiment
// (runner.h) carries it out. The file format is documented in configs/quickstart.json ("comment").
#pragma once
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "datasets/prepare.h"
#include "harness/experiment/gpu_sharing.h"
#include "harness/experiment/seeds.h"

namespace aobench {

// One "prepare" entry: a dataset written before training.
struct PrepareStep {
  std::string name;
  PrepareSpec spec;
  std::string where;  // "<file>: prepare[i]", for errors
};

// One entry of eval.modes: its eval.* keys, and the jobs and datasets it covers.
struct EvalMode {
  nlohmann::json entry;           // as written, filters included: with the datasets, the key DONE.json records
  nlohmann::json patch;           // its eval.* keys (the entry without "jobs" and "datasets")
  std::string where;              // "<file>: eval.modes[i]", for errors
  bool every_job = true;          // no "jobs" filter
  std::vector<std::string> jobs;  // the "jobs" filter
  std::vector<std::pair<std::string, std::string>> datasets;  // (name, path) it evaluates, in name order
  std::string judge_job;  // eval.infill.judge naming a gpt job of this experiment (its seed-0 run judges the
                          // fillings): the mode runs once every training has ended; "" = with the run's training
  bool applies_to(const std::string& job) const;  // a filter naming a job covers its every seed
  std::string done_key() const;                   // {"mode": entry, "datasets": {name: path}}
};

struct Experiment {
  std::string origin;     // the file
  nlohmann::json record;  // <out_dir>/experiment.json, for the report (tiers.h: experiment_record)
  std::string description;
  std::filesystem::path out_dir;
  std::vector<PrepareStep> prepare;
  std::vector<std::string> jobs;  // job names, in file order
  std::vector<SeedRun> runs;      // every run (job × seed) with its resolved config, seed-major (seeds.h)
  int seeds = 1;
  int runs_per_device = 1;                     // lanes.h
  GpuSharing gpu_sharing = GpuSharing::kAuto;  // gpu_sharing.h
  std::vector<EvalMode> modes;
  nlohmann::json generation;  // the checked "generation" section, or null (generation.h)
  std::string judge;          // generation.judge: a job name or a path ("" without one)
};

// The experiment file `origin` with `aobench run`'s --set list: "tier=", "seeds=", "runs_per_device=" and
// "gpu_sharing=" pick those, every other one overrides a key of every job. ConfigError naming the file, the
// entry and the key.
Experiment load_experiment(const std::string& origin, std::vector<std::string> sets);

}  // namespace aobench
