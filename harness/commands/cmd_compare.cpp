// Implements: `aobench compare BASE.json NEW.json [--threshold 0.02] [--metrics P,...] [--allow-missing] [--json]
// [--only-failures]` (DESIGN.md §4): the regression gate of two results files. Every selected metric of BASE
// (default: the quality metrics; timing ones only when --metrics names them) is compared with NEW's; exit 1 when a
// lower-is-better metric grew, or a higher-is-better one shrank, by more than the threshold (relative), or when
// NEW lacks a run or metric of BASE (unless --allow-missing). A gate that cannot compare is an error, never a pass:
// no shared metric, a --metrics pattern that matches nothing, a NaN, a negative timing. Either file may be Google
// Benchmark JSON (reports/gbench.h: run "gbench", "<benchmark>/time_ms", median of the repetitions).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>

#include "core/errors.h"
#include "harness/cli.h"
#include "harness/commands.h"
#include "harness/registry.h"
#include "reports/gbench.h"
#include "reports/results.h"

namespace aobench {
namespace {

const char* kUsage =
    "aobench compare BASE.json NEW.json [--threshold 0.02] [--metrics 'nll*,ppl*'] [--allow-missing] [--json] "
    "[--only-failures]";

std::vector<std::string> metric_keys(const Results& r) {
  std::vector<std::string> keys;
  for (const auto& [run, rr] : r.runs)
    for (const auto& [key, m] : rr.metrics) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

int cmd_compare(const std::vector<std::string>& args) {
  po::options_description desc("compare options");
  desc.add_options()("base", po::value<std::string>()->required(), "baseline results.json")(
      "new", po::value<std::string>()->required(), "new results.json")(
      "threshold", po::value<double>()->default_value(0.02), "relative change tolerated (0.02 = 2%)")(
      "metrics", po::value<std::string>()->default_value(""),
      "comma-separated metric names or globs (ppl, 'nll*', wikitext2/ppl, gen_s, cpu_ms, all); default: every "
      "quality metric, no timing (throughput *tok_s*, durations *_s / *_ms are compared only when named)")(
      "allow-missing", po::bool_switch(), "a run or metric of BASE that NEW lacks is listed, not a failure")(
      "json", po::bool_switch(), "print the comparison as JSON instead of a table (same exit code)")(
      "only-failures", po::bool_switch(), "list only the metrics that fail the gate (and the PASS / FAIL line)");
  po::positional_options_description pos;
  pos.add("base", 1).add("new", 1);
  po::variables_map vm;
  if (!parse_options(kUsage, desc, args, vm, &pos)) return 0;
  const double threshold = vm["threshold"].as<double>();
  if (!(threshold >= 0)) throw ConfigError("--threshold must be ≥ 0", "example: --threshold 0.02");
  const bool allow_missing = vm["allow-missing"].as<bool>();
  const std::string base_path = vm["base"].as<std::string>(), new_path = vm["new"].as<std::string>();
  const Results base = load_results_or_gbench(base_path);  // results.json or Google Benchmark JSON
  const Results current = load_results_or_gbench(new_path);
  std::vector<std::string> patterns;
  std::stringstream list(vm["metrics"].as<std::string>());
  for (std::string p; std::getline(list, p, ',');)
    if (!p.empty()) patterns.push_back(p);
  const auto keys = metric_keys(base);
  for (const auto& p : patterns)
    if (std::none_of(keys.begin(), keys.end(), [&](const std::string& k) { return metric_matches(k, p); }))
      throw ConfigError("--metrics '" + p + "' matches no metric of " + base_path,
                        "metrics there: " + join_names(keys));
  const Comparison c = compare_results(base, current, threshold, patterns);
  if (c.rows.size() == c.missing())
    throw DataError("no " + std::string(patterns.empty() ? "quality " : "selected ") + "metric is in both " +
                        base_path + " and " + new_path + " (same run names and metric keys are compared)",
                    "base has: " + join_names(keys) + "; new has: " + join_names(metric_keys(current)) +
                        (patterns.empty() ? "; timing metrics are compared only when --metrics names them" : ""));
  for (const auto& r : c.rows) {
    if (r.missing) continue;
    for (const auto& [value, path] : {std::pair{r.base, base_path}, std::pair{r.current, new_path}}) {
      if (!std::isfinite(value))
        throw DataError("run " + r.run + ", metric " + r.metric + " is not a number in " + path + " (" +
                            std::to_string(value) + ")",
                        "a NaN or infinite result cannot pass a regression gate; re-run that evaluation");
      if (value < 0 && is_timing_metric(r.metric))
        throw DataError(
            "run " + r.run + ", metric " + r.metric + " is negative in " + path + " (" + std::to_string(value) + ")",
            "a duration or throughput is never negative; the file is damaged or hand-edited");
    }
  }
  if (vm["json"].as<bool>())
    std::cout << compare_to_json(c, threshold, allow_missing).dump(1) << "\n";
  else
    std::cout << render_compare(c, threshold, allow_missing, vm["only-failures"].as<bool>());
  return c.passed(allow_missing) ? 0 : 1;
}

}  // namespace

AOBENCH_COMMAND("compare", kUsage, "regression check of two results.json files (exit 1 past a threshold)", cmd_compare);

}  // namespace aobench
