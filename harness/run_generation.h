// Implements: the generation stages of `aobench run`: an experiment's optional "generation"
// section samples every (filtered) job under each setting with `aobench sample`, scores the samples with
// `aobench genppl` against a judge, and times the sampler with `aobench speed`; and the optional "base"
// key, which takes out_dir / prepare / common / jobs from another experiment file (so a generation study
// reuses the trained models of a likelihood study). Format (configs/experiments/generation_tiny.json):
//   "generation": {"jobs": [names] (optional), "judge": "<job name or path>",
//                  "sample": {sample.* shared by every setting}, "settings": [{sample.* patch}, ...],
//                  "speed": {speed.* keys, "sample": {sample.* for timing}} (optional)}
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace aobench {

// Calls another subcommand of the binary (the runner's call_command): returns its exit code.
using CommandCaller = std::function<int(const std::string&, const std::vector<std::string>&)>;

// Fills out_dir / prepare / common / jobs from the file named by exp["base"] (relative paths as given)
// when exp lacks them; exp without "base" is returned unchanged. ConfigError names the file.
nlohmann::json experiment_with_base(nlohmann::json exp, const std::string& origin);

// Checks the "generation" section (called before any training, so typos fail at once).
void check_generation_section(const nlohmann::json& generation, const std::string& origin);

// Runs the stages of one job that DONE.json (`done["generation"]`) does not list yet; `save_done` persists
// `done` after each. Returns the first non-zero exit code of a called command, else 0.
int run_generation_stages(const nlohmann::json& generation, const std::string& job, const std::string& job_dir,
                          const std::string& out_dir, nlohmann::json& done, const std::function<void()>& save_done,
                          const CommandCaller& call);

}  // namespace aobench
