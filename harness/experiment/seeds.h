// Implements: seeds — every job of an experiment run N times, each its own run folder.
//   "seeds": N   (top level or in a tier patch; `aobench run FILE --set seeds=N` overrides it; default 1)
// Seed 0 is the job as written: <out_dir>/<job> with its config unchanged, so raising N keeps finished runs
// and their numbers. Seed k ≥ 1 is <out_dir>/<job>_seed<k> with train.seed = S + k (S: the job's
// train.seed), i.e. another initialisation and other order draws, and data.seed pinned to seed 0's data
// seed, so the replicates see the tokens of the comparison in the same order. train.order.seed (an order
// ablation's fixed order), eval.* and sample.* stay: they define the comparison, not the replicate.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace aobench {

// Removes every "KEY=V" from `sets` and returns the Vs in order (none: empty). The base of the two below.
std::vector<std::string> take_settings(std::vector<std::string>& sets, const std::string& key);

// Removes every "KEY=N" from `sets` and returns N (0 when none); ConfigError naming the value ("… is not a number of
// WHAT", `hint`) for anything but an integer in [1, max], or two different values. Shared by seeds and
// runs_per_device (harness/experiment/lanes.h).
int take_count_setting(std::vector<std::string>& sets, const std::string& key, int max, const std::string& what,
                       const std::string& hint);

// Removes every "KEY=V" from `sets` and returns V ("" when none); ConfigError for an empty V ("--set KEY= needs
// a WHAT", `hint`) or two different ones. Shared by tier (tiers.h) and gpu_sharing (gpu_sharing.h).
std::string take_text_setting(std::vector<std::string>& sets, const std::string& key, const std::string& what,
                              const std::string& hint);

// `from_set` when > 0, else the experiment's KEY (default 1); ConfigError naming `origin`, the key and the
// value when it is no integer in [1, max].
int experiment_count(const nlohmann::json& experiment, const std::string& key, int from_set, int max,
                     const std::string& origin, const std::string& hint);

// Removes every "seeds=N" from `sets` (the --set list of `aobench run`) and returns N (0 when none).
// ConfigError naming the value for anything but an integer in [1, kMaxSeeds], or two different values.
int take_seeds_setting(std::vector<std::string>& sets);

// The number of seeds: `from_set` when > 0, else the experiment's "seeds" (default 1). ConfigError naming
// `origin` and the value when "seeds" is no integer in [1, kMaxSeeds].
int experiment_seeds(const nlohmann::json& experiment, int from_set, const std::string& origin);

// A bound on seeds against a typo that would create thousands of run folders.
inline constexpr int kMaxSeeds = 1000;

// The run folder name of seed k of `job`: `job` for k = 0, `job_seed<k>` after.
std::string seed_run_name(const std::string& job, int k);

// One run of an experiment: a job at one seed, trained in <out_dir>/<name>.
struct SeedRun {
  std::string name;  // the run folder: seed_run_name(job, seed)
  std::string job;   // the job of the file: what eval and generation filters and the judge name
  int seed = 0;      // k: 0 is the job as written
  nlohmann::json config;
};

// Every run of jobs × seeds (config left null), seed-major: the comparison as written first (each job's
// seed 0), then seed 1 of every job, ... ConfigError naming both jobs when two runs share a folder (jobs
// `a` and `a_seed1` with seeds ≥ 2). Pure.
std::vector<SeedRun> seed_runs(const std::vector<std::string>& job_names, int seeds, const std::string& origin);

// {job: [its run folder names by seed]}: what <out_dir>/experiment.json records as "runs". Pure.
nlohmann::json seed_runs_record(const std::vector<std::string>& job_names, int seeds);

// The resolved jobs of resolve_experiment_jobs (harness/resolve_config.h) expanded to seed runs in the order
// of seed_runs: seed 0 keeps its config; seed k ≥ 1 gets train.seed = S + k, data.seed = (the job's data.seed
// when ≥ 0, else S) and train.out_dir = <out_dir>/<run name>. Pure; the same ConfigErrors as seed_runs.
std::vector<SeedRun> expand_seeds(const std::vector<std::pair<std::string, nlohmann::json>>& jobs, int seeds,
                                  const std::string& out_dir, const std::string& origin);

}  // namespace aobench
