// Implements: writes into a run's results.json (reports/results.h) from the app layer: the read-merge-write
// under <file>.lock that every writer shares, and the run's record (plugin, flavour, paradigm, parameters,
// steps, tokens, training FLOPs) that `aobench train` merges in at every checkpoint, so a report of a run
// that was trained but not evaluated yet names its paradigm without loading a plugin.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/plugin_api.h"
#include "reports/results.h"

namespace aobench {

// Merges `mine` into the results file `path` under `path`.lock (waits for other writers), so concurrent
// writers each keep their runs and metrics. A damaged `path` is left as it is: `mine` goes to
// `path`.<tag>-<pid>.json instead and a DataError names both files ("this <noun>'s results were written to
// …"; the hint says to re-run the <tag>). `who` names the lock holder for a writer that has to wait. `path` "-":
// `mine` is printed on standard output as results.json would hold it.
void merge_into_results_file(const Results& mine, const std::string& path, const std::string& tag,
                             const std::string& noun, const std::string& who);

// The run's record as of `step`: plugin and flavour (config model.*), paradigm, parameter count, steps,
// tokens trained on (all ranks), training FLOPs (flops_per_token × tokens, the MFU convention) and the
// resolved config, merged into <run_dir>/results.json. Never throws for a damaged results file: training
// goes on with a warning (the record is written again at the next checkpoint).
void record_training_run(const std::string& run_dir, const nlohmann::json& config, ModelPlugin& model, int64_t step,
                         int64_t tokens, double flops_per_token);

}  // namespace aobench
