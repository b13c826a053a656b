// Implements: `aobench compare BASE.json NEW.json [--threshold 0.02]` (DESIGN.md §4): regression check of
// two results files. Prints the relative delta of every shared metric and exits 1 when a lower-is-better
// metric grew, or a higher-is-better one shrank, by more than the threshold (relative).
#include <iostream>

#include "harness/cli.h"
#include "harness/commands.h"
#include "harness/errors.h"
#include "reports/results.h"

namespace aobench {
namespace {

const char* kUsage = "aobench compare BASE.json NEW.json [--threshold 0.02]";

int cmd_compare(const std::vector<std::string>& args) {
  po::options_description desc("compare options");
  desc.add_options()
      ("base", po::value<std::string>()->required(), "baseline results.json")
      ("new", po::value<std::string>()->required(), "new results.json")
      ("threshold", po::value<double>()->default_value(0.02), "relative change tolerated (0.02 = 2%)");
  po::positional_options_description pos;
  pos.add("base", 1).add("new", 1);
  po::variables_map vm;
  if (!parse_options(kUsage, desc, args, vm, &pos)) return 0;
  const double threshold = vm["threshold"].as<double>();
  if (!(threshold >= 0)) throw ConfigError("--threshold must be ≥ 0", "example: --threshold 0.02");
  const Results base = Results::load(vm["base"].as<std::string>());
  const Results current = Results::load(vm["new"].as<std::string>());
  const auto rows = compare_results(base, current, threshold);
  std::cout << render_compare(rows, threshold);
  if (rows.empty())
    std::cerr << "warning: no metric is present in both files (same run names and metric keys are compared)\n";
  for (const auto& r : rows)
    if (r.worse) {
      std::cout << "REGRESSION: at least one metric got worse by more than " << 100 * threshold << "%\n";
      return 1;
    }
  return 0;
}

}  // namespace

AOBENCH_COMMAND("compare", kUsage, "regression check of two results.json files (exit 1 past a threshold)",
                cmd_compare);

}  // namespace aobench
