// Implements: Google Benchmark JSON → Results (see gbench.h).
#include "reports/gbench.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/config.h"
#include "core/errors.h"

namespace aobench {
using nlohmann::json;

namespace {

double to_ms(double t, const std::string& unit, const std::string& origin) {
  if (unit == "ns") return t * 1e-6;
  if (unit == "us") return t * 1e-3;
  if (unit == "ms") return t;
  if (unit == "s") return t * 1e3;
  throw DataError(origin + ": unknown time_unit '" + unit + "'", "Google Benchmark writes ns, us, ms or s");
}

}  // namespace

bool is_gbench_json(const json& j) {
  return j.is_object() && j.contains("benchmarks") && j["benchmarks"].is_array() && j.contains("context");
}

Results results_from_gbench(const json& j, const std::string& origin) {
  Results r;
  r.context = {{"source", "google benchmark"}};
  for (const char* key : {"host_name", "date", "num_cpus", "library_build_type"})
    if (j["context"].contains(key)) r.context[key] = j["context"][key];
  RunResults& run = r.runs["gbench"];
  run.plugin = "gbench";
  std::map<std::string, MetricValue> single, median;
  for (const auto& b : j["benchmarks"]) {
    if (!b.is_object() || !b.contains("name") || !b["name"].is_string() || !b.contains("real_time") ||
        !b["real_time"].is_number() || !b.contains("time_unit") || !b["time_unit"].is_string())
      throw DataError(origin + ": a benchmark entry lacks name, real_time or time_unit: " + brief(b),
                      "pass the file written by --benchmark_out=F --benchmark_out_format=json");
    if (b.value("error_occurred", false)) continue;  // SkipWithError (e.g. data absent): nothing measured
    const std::string run_type = b.value("run_type", "iteration");
    // "BM_CpuTrainStep/gpt" → "BM_CpuTrainStep:gpt": a results key has one '/', before the metric.
    std::string name = b.value("run_name", b["name"].get<std::string>());
    std::replace(name.begin(), name.end(), '/', ':');
    // time_ms: wall time; cpu_ms: CPU time of the benchmark thread, which a busy machine moves far less
    // (single-threaded runs: OMP_NUM_THREADS=1, as scripts/regress.sh sets).
    for (const auto& [field, metric, what] :
         {std::tuple<const char*, const char*, const char*>{"real_time", "time_ms", "real"},
          {"cpu_time", "cpu_ms", "CPU"}}) {
      if (!b.contains(field)) continue;
      // A damaged time must not make its metric vanish from a gate, nor pass as a speed-up.
      if (!b[field].is_number() || b[field].get<double>() < 0 || !std::isfinite(b[field].get<double>()))
        throw DataError(origin + ": benchmark '" + b["name"].get<std::string>() + "' has " + field + " " +
                            brief(b[field]) + ", not a time ≥ 0",
                        "pass the file written by --benchmark_out=F --benchmark_out_format=json, unedited");
      MetricValue m;
      m.value = to_ms(b[field].get<double>(), b["time_unit"].get<std::string>(), origin);
      m.n = b.value("repetitions", int64_t{1});
      const std::string key = name + "/" + metric;
      if (run_type == "aggregate") {
        if (b.value("aggregate_name", "") != "median") continue;
        m.protocol = "median " + std::string(what) + " time of " + std::to_string(m.n) + " repetitions (ms)";
        median[key] = m;
      } else if (!single.count(key)) {  // the first repetition when no aggregate follows
        m.protocol = std::string(what) + " time of one measurement (ms)";
        single[key] = m;
      }
    }
  }
  run.metrics = single;
  for (const auto& [k, m] : median) run.metrics[k] = m;
  if (run.metrics.empty())
    throw DataError(origin + ": no measured benchmark in the file", "did the filter match nothing, or every one skip?");
  return r;
}

Results load_results_or_gbench(const std::string& path) {
  json j;
  try {
    j = load_json_file(path);
  } catch (const std::exception&) {
    return Results::load(path);  // unreadable or invalid: Results::load names the problem
  }
  return is_gbench_json(j) ? results_from_gbench(j, path) : Results::load(path);
}

}  // namespace aobench
