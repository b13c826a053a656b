// Implements: tests of Google Benchmark JSON read as results (reports/gbench.h): medians of repetitions win
// over single measurements, units convert to ms, bad entries are errors naming the file, and
// compare_results then gates a slowdown.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "reports/gbench.h"

namespace aobench {
namespace {

nlohmann::json gbench(double median_us, double single_ms) {
  return {{"context", {{"host_name", "h"}, {"num_cpus", 2}}},
          {"benchmarks",
           {{{"name", "BM_Tok/repeats:3"},
             {"run_name", "BM_Tok"},
             {"run_type", "iteration"},
             {"repetitions", 3},
             {"real_time", 999.0},
             {"time_unit", "us"}},
            {{"name", "BM_Tok_median"},
             {"run_name", "BM_Tok"},
             {"run_type", "aggregate"},
             {"aggregate_name", "median"},
             {"repetitions", 3},
             {"real_time", median_us},
             {"cpu_time", median_us / 2},
             {"time_unit", "us"}},
            {{"name", "BM_Tok_mean"},
             {"run_name", "BM_Tok"},
             {"run_type", "aggregate"},
             {"aggregate_name", "mean"},
             {"repetitions", 3},
             {"real_time", 1.0},
             {"time_unit", "us"}},
            {{"name", "BM_Step/gpt"}, {"run_type", "iteration"}, {"real_time", single_ms}, {"time_unit", "ms"}}}}};
}

TEST(GbenchResults, MedianOfRepetitionsAndUnits) {
  ASSERT_TRUE(is_gbench_json(gbench(500, 20)));
  const Results r = results_from_gbench(gbench(500, 20), "b.json");
  const RunResults& run = r.runs.at("gbench");
  ASSERT_EQ(run.metrics.size(), 3u);  // BM_Tok time_ms, cpu_ms (its entries have cpu_time), BM_Step time_ms
  EXPECT_DOUBLE_EQ(run.metrics.at("BM_Tok/cpu_ms").value, 0.25);
  EXPECT_DOUBLE_EQ(run.metrics.at("BM_Tok/time_ms").value, 0.5);  // the median, not the first repetition
  EXPECT_EQ(run.metrics.at("BM_Tok/time_ms").n, 3);
  EXPECT_DOUBLE_EQ(run.metrics.at("BM_Step:gpt/time_ms").value, 20.0);
  EXPECT_FALSE(run.metrics.at("BM_Step:gpt/time_ms").higher_is_better);
}

TEST(GbenchResults, SlowdownPastThresholdIsWorse) {
  const Results base = results_from_gbench(gbench(500, 20), "base.json");
  const Results slow = results_from_gbench(gbench(800, 21), "new.json");
  const auto rows = compare_results(base, slow, 0.25, {"*_ms"}).rows;
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& row : rows)
    EXPECT_EQ(row.worse, row.metric != "BM_Step:gpt/time_ms") << row.metric;  // +60 % vs +5 %
}

TEST(GbenchResults, BadEntriesAreErrorsNamingTheFile) {
  nlohmann::json j = gbench(500, 20);
  j["benchmarks"][3].erase("time_unit");
  try {
    results_from_gbench(j, "b.json");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("b.json"), std::string::npos);
  }
  j = gbench(500, 20);
  j["benchmarks"][3]["time_unit"] = "fortnights";
  EXPECT_THROW(results_from_gbench(j, "b.json"), DataError);
  j = gbench(500, 20);
  j["benchmarks"][3]["error_occurred"] = true;  // skipped: left out, the others stay
  EXPECT_EQ(results_from_gbench(j, "b.json").runs.at("gbench").metrics.count("BM_Step:gpt/time_ms"), 0u);
  j["benchmarks"] = nlohmann::json::array();
  EXPECT_THROW(results_from_gbench(j, "b.json"), DataError);
  EXPECT_FALSE(is_gbench_json(nlohmann::json{{"schema", "aobench.results/1"}, {"runs", nlohmann::json::object()}}));
}

}  // namespace
}  // namespace aobench
