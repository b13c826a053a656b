// Implements: Google Benchmark JSON (--benchmark_format=json / --benchmark_out) read as a results file, so
// `aobench compare` gates micro-benchmarks like quality metrics. One run "gbench"; per benchmark (the name
// without its "_median"/"_mean" aggregate suffix, '/' turned into ':') the metric "<name>/time_ms": the
// median over repetitions when the file has aggregates (--benchmark_repetitions), else the single
// measurement; the real (wall) time as reported (manual time where the benchmark sets it), and beside it
// "<name>/cpu_ms", the benchmark thread's CPU time. Lower is better; n = repetitions. Entries that skipped
// with an error are left out.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "reports/results.h"

namespace aobench {

// Does this JSON look like Google Benchmark output ("context" and "benchmarks")?
bool is_gbench_json(const nlohmann::json& j);
// DataError naming `origin` for a benchmark entry without a name, time or unit.
Results results_from_gbench(const nlohmann::json& j, const std::string& origin);
// `aobench compare`'s reader: Google Benchmark JSON when the file is one, else Results::load (its errors).
Results load_results_or_gbench(const std::string& path);

}  // namespace aobench
