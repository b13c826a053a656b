// Implements: the generation stages of `aobench run`: an experiment's optional "generation"
// section samples every (filtered) job under each setting as `aobench sample` does, scores the samples as
// `aobench genppl` does against a judge, and times the sampler as `aobench speed` does; and the optional
// "base" key, which takes out_dir / prepare / common / jobs from another experiment file (so a generation
// study reuses the trained models of a likelihood study). Format (configs/experiments/generation_tiny.json):
//   "generation": {"jobs": [names] (optional), "judge": "<job name or path>",
//                  "sample": {sample.* shared by every setting}, "settings": [{sample.* patch}, ...],
//                  "speed": {speed.* keys, "sample": {sample.* for timing}} (optional)}
#pragma once
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace aobench {

// Fills out_dir / prepare / common / jobs / seeds from the file named by exp["base"] (relative paths as
// given) when exp lacks them, so a generation study finds every seed run of the base's jobs; exp without
// "base" is returned unchanged. ConfigError names the file.
nlohmann::json experiment_with_base(nlohmann::json exp, const std::string& origin);

// Checks the "generation" section (called before any training, so typos fail at once).
void check_generation_section(const nlohmann::json& generation, const std::string& origin);

// Runs the stages of one run (`run` in `run_dir`: a seed of `job`, harness/experiment/seeds.h) that DONE.json
// (`done["generation"]`) does not list yet (run_sample, run_genppl, run_speed of harness/tasks.h); `save_done`
// persists `done` after each; every stage runs with the speed switches `perf` (the experiment's perf section). The "jobs" filter names jobs, so it covers every seed of one; a judge named by
// job is that job's seed-0 run, <out_dir>/<job>, for every seed: one judge scores the whole comparison.
void run_generation_stages(const nlohmann::json& generation, const std::string& job, const std::string& run,
                           const std::string& run_dir, const std::string& out_dir, const nlohmann::json& perf,
                           nlohmann::json& done, const std::function<void()>& save_done);

}  // namespace aobench
