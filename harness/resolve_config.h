// Implements: config resolution, the step that needs the plugins: configs/base.json → the plugin flavour's
// model defaults → experiment file → --set a.b=c (the strict merge and typed getters are in core/config.h).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"

namespace aobench {

// Full resolution. `experiment` may be empty. Returns the resolved config with model.plugin and
// model.flavour set. Uses the plugin registry to fetch flavour defaults.
json resolve_config(const json& experiment, const Overrides& overrides,
                    const std::string& experiment_origin = "config");

// Every job of an experiment file (its tier and base applied: harness/experiment/tiers.h) resolved as
// `aobench run` trains it, in file order: "common" merged with the job's "config", train.out_dir set to
// <out_dir>/<name>, the experiment's description, then resolve_config with `overrides`. ConfigError naming
// `origin` and the job for a name that is not a plain directory name or a key that does not exist.
std::vector<std::pair<std::string, json>> resolve_experiment_jobs(const json& experiment, const Overrides& overrides,
                                                                  const std::string& origin);

// The "eval" section of an experiment (an object; absent = {}): "datasets" {name: path} and "modes" [eval
// patches], each mode's optional "jobs" / "datasets" filters naming jobs and datasets of the file (a typo
// would silently evaluate nothing). Throws ConfigError naming the entry.
void check_eval_section(const json& eval, const std::vector<std::string>& job_names, const std::string& origin);

// The resolved config printed once at the start of a training run: only the keys that differ from the
// defaults it was resolved from (configs/base.json and the model flavour's section), one line per section,
// and where the full config is (`full_path`, config.resolved.json). Values longer than 60 characters are cut.
std::string config_summary(const json& config, const std::string& full_path);

}  // namespace aobench
