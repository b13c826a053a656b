// Implements: the quickstart end to end, shortened (configs/quickstart.json with 20 training steps):
// prepare the fortunes corpus → train the five debug models → evals → samples, generation perplexity and
// speed → report. Checks every report file, that the held-out perplexity is finite and below the uniform 257,
// the generation metrics and verdict lines, and that a re-run skips finished work.
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "reports/results.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

namespace fs = std::filesystem;

TEST(QuickstartTest, ShortenedQuickstartWritesAReportWithFinitePerplexity) {
  AOBENCH_REQUIRE_FORTUNES();
  testing::TempDir tmp;
  const std::string config = std::string(AOBENCH_SOURCE_DIR) + "/configs/quickstart.json";
  const std::string sets =
      " --set train.max_iters=20 --set train.lr_decay_iters=20 --set train.warmup_iters=2"
      " --set train.eval_interval=10 --set train.eval_iters=2 --set train.log_interval=5"
      " --set train.checkpoint_interval=10 --set train.batch_size=8 --set train.device=cpu"
      " --set eval.max_batches=4";
  std::string out;
  ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), "run " + config + sets, &out), 0) << out;

  const fs::path report = tmp.path / "runs/quickstart/report";
  for (const char* f : {"results.json", "summary.md", "results.csv", "results.tex", "index.html"})
    EXPECT_TRUE(fs::exists(report / f)) << f << "\n" << out;
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
    for (const char* f : {"loss_val.png", "loss_val.svg", "loss_train.png", "loss_train.svg"})
      EXPECT_TRUE(fs::exists(report / f)) << f;
  }

  const Results r = Results::load((report / "results.json").string());
  ASSERT_TRUE(r.runs.count("gpt")) << out;
  const RunResults& gpt = r.runs.at("gpt");
  ASSERT_TRUE(gpt.metrics.count("fortunes_val/ppl")) << testing::read_text((report / "results.json").string());
  const MetricValue& ppl = gpt.metrics.at("fortunes_val/ppl");
  EXPECT_TRUE(std::isfinite(ppl.value));
  EXPECT_GT(ppl.value, 1.0);
  EXPECT_LT(ppl.value, 257.0);
  EXPECT_FALSE(ppl.is_bound);
  EXPECT_NE(ppl.protocol.find("first token skipped"), std::string::npos) << ppl.protocol;
  EXPECT_EQ(gpt.steps, 20);
  EXPECT_FALSE(gpt.curves.at("loss/train").empty());
  EXPECT_NE(testing::read_text((report / "summary.md").string()).find("fortunes_val"), std::string::npos);
  // The comparison: every paradigm trained on the same data and evaluated under its protocols.
  for (const char* name : {"sigma_gpt", "ao_gpt", "sedd", "radd"}) {
    ASSERT_TRUE(r.runs.count(name)) << name << "\n" << out;
    EXPECT_EQ(r.runs.at(name).steps, 20) << name;
  }
  for (const char* name : {"sigma_gpt", "ao_gpt"})
    EXPECT_TRUE(r.runs.at(name).metrics.count("fortunes_val/ppl_k1")) << name;
  for (const char* name : {"sedd", "radd"}) {
    ASSERT_TRUE(r.runs.at(name).metrics.count("fortunes_val/ppl_elbo")) << name;
    const MetricValue& bound = r.runs.at(name).metrics.at("fortunes_val/ppl_elbo");
    EXPECT_TRUE(bound.is_bound) << name;
    EXPECT_TRUE(std::isfinite(bound.value) && bound.value > 1.0) << name;
  }

  // Generation: every model sampled at every setting, judged by the gpt job, timed against steps.
  for (const char* name : {"gpt", "sigma_gpt", "ao_gpt", "sedd", "radd"})
    for (const char* key : {"gen_p1_t1_s16/genppl", "gen_p0.95_t0.7_s128/genppl", "gen_p1_t1_s64/entropy",
                            "speed_s16/gen_s", "speed_s128/gen_s"}) {
      ASSERT_TRUE(r.runs.at(name).metrics.count(key)) << name << " " << key;
      const double v = r.runs.at(name).metrics.at(key).value;
      EXPECT_TRUE(std::isfinite(v) && v > 0) << name << " " << key << " = " << v;
    }
  const std::string summary = testing::read_text((report / "summary.md").string());
  for (const char* finding : {"| 1 |", "| zero-shot-l2r |", "| table-2 |", "| 7 |", "| 8.1 |", "| 8.2 |",
                              "| gen-steps |", "| gen-annealing |"})
    EXPECT_NE(summary.find(finding), std::string::npos) << finding << "\n" << summary;
  EXPECT_NE(summary.find("- Tally: paper findings: "), std::string::npos) << summary;
  EXPECT_NE(summary.find("### The unigram plateau"), std::string::npos) << summary;
  // The speed header comes after the evals' tables in the same process: their number format must not leak.
  EXPECT_NE(out.find("top-p 0.95, temperature 0.9, float64 draws"), std::string::npos) << out;

  // The terminal shows where the run is and ends with the report's headline table.
  EXPECT_NE(out.find("run [1/"), std::string::npos) << out;
  EXPECT_NE(out.find(" elapsed]: job gpt: training"), std::string::npos) << out;
  const size_t head = out.find("perplexity (lower is better; ≤ marks an upper bound)");
  ASSERT_NE(head, std::string::npos) << out;
  for (const char* row : {"gpt ", "ao_gpt ", "sigma_gpt ", "sedd ", "radd "})
    EXPECT_NE(out.find(std::string("\n") + row, head), std::string::npos) << row << "\n" << out.substr(head);
  EXPECT_NE(out.find("ELBO upper bound, 8 MC steps", head), std::string::npos) << out.substr(head);
  EXPECT_NE(out.find("run: done in ", head), std::string::npos) << out.substr(head);
  // Then the verdict lines and their tally.
  EXPECT_NE(out.find("\nverdicts (the statistic: report/summary.md):\n  1: ", head), std::string::npos)
      << out.substr(head);
  EXPECT_NE(out.find("\npaper findings: ", head), std::string::npos) << out.substr(head);
  EXPECT_NE(testing::read_text((report / "summary.md").string()).find("## Headline: perplexity"), std::string::npos);

  // A second run finds everything done.
  ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), "run " + config + sets, &out), 0) << out;
  EXPECT_NE(out.find("training finished earlier, skipped"), std::string::npos) << out;
  EXPECT_NE(out.find("done earlier, skipped"), std::string::npos) << out;
  EXPECT_NE(out.find("0 trainings, 0 evals;"), std::string::npos) << out;
}

}  // namespace
}  // namespace aobench
