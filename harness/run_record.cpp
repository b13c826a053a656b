// Implements: results-file writes of the app layer (see run_record.h).
#include "harness/run_record.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "core/config.h"
#include "core/errors.h"
#include "harness/run_dir.h"
#include "metrics/generation.h"

namespace aobench {
namespace fs = std::filesystem;

void merge_into_results_file(const Results& mine, const std::string& path, const std::string& tag,
                             const std::string& noun, const std::string& who) {
  if (path == "-") {  // C stdio: std::cout may stand for standard error here (CoutToStderr)
    std::fputs((mine.to_json().dump(1) + "\n").c_str(), stdout);
    std::fflush(stdout);
    return;
  }
  DirLock lock(path + ".lock", who, /*wait=*/true);
  Results results;
  if (fs::exists(path)) {
    try {
      results = Results::load(path);
    } catch (const DataError& e) {  // never lose these results to a damaged merge target
      const std::string aside = path + "." + tag + "-" + std::to_string(::getpid()) + ".json";
      mine.save(aside);
      throw DataError(std::string(e.what()) + "; this " + noun + "'s results were written to " + aside + " instead",
                      "repair or remove " + path + ", then copy the numbers over, or re-run the " + tag);
    }
  }
  results.merge(mine);
  results.save(path);
}

void record_training_run(const std::string& run_dir, const nlohmann::json& config, ModelPlugin& model, int64_t step,
                         int64_t tokens, double flops_per_token) {
  RunResults run;
  run.plugin = get_string(config, "model.plugin");
  run.flavour = get_string(config, "model.flavour");
  run.paradigm = to_string(model.info().paradigm);
  for (const auto& p : model.module().parameters()) run.params += p.numel();
  run.steps = step;
  run.tokens = tokens;
  run.train_flops = flops_per_token * static_cast<double>(tokens);
  run.config = config;
  Results mine;  // no context: the evaluation that measures the run records where it ran
  mine.runs[run_name(run_dir)] = run;
  try {
    merge_into_results_file(mine, (fs::path(run_dir) / "results.json").string(), "train", "training record",
                            "aobench train");
  } catch (const DataError& e) {
    std::cerr << "warning: the run's record was not merged into its results.json: " << e.what()
              << (e.hint().empty() ? "" : "\n  hint: " + e.hint()) << "\n";
  }
}

}  // namespace aobench
