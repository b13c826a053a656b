// Implements: `aobench run --jobs` (harness/experiment/runner.cpp): an unknown job name is refused with the job list;
// a job locked by another process is refused at once while a run of another job goes on; a later run without
// --jobs trains only what is missing, and its report holds every job; --force with --jobs leaves the data.
// Retraining the genppl judge alone is refused once other jobs were judged by it. --prepare-only writes the configs
// that train elsewhere, and a later run finishes them. Uses finding1_loss.json at
// tier debug (two jobs, gpt and ao_gpt, 20 CPU steps each on the fortunes corpus).
#include <filesystem>

#include <gtest/gtest.h>

#include "core/config.h"
#include "harness/run_dir.h"
#include "reports/results.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

using nlohmann::json;

namespace fs = std::filesystem;

// finding1_loss.json at its debug tier, run in a test's own folder (its runs/ land there).
const std::string kRun =
    "run " + std::string(AOBENCH_SOURCE_DIR) + "/configs/experiments/finding1_loss.json" + " --set tier=debug";

TEST(RunJobs, SubsetsOfAnExperimentRunSeparatelyAndTheReportJoinsThem) {
  AOBENCH_REQUIRE_FORTUNES();
  testing::TempDir tmp;
  const std::string run = kRun;
  const fs::path out_dir = tmp.path / "runs/finding1_loss_debug";
  std::string out;

  EXPECT_NE(testing::run_aobench_in(tmp.path.string(), run + " --jobs gpt,nosuch", &out), 0);
  EXPECT_NE(out.find("--jobs names 'nosuch', which is no job"), std::string::npos) << out;
  EXPECT_NE(out.find("jobs: gpt, ao_gpt"), std::string::npos) << out;

  // Another process works on gpt: a run of gpt is refused, a run of ao_gpt is not held up.
  fs::create_directories(out_dir);
  {
    const DirLock gpt_busy((out_dir / ".job_gpt.lock").string(), "the test", /*wait=*/false);
    EXPECT_NE(testing::run_aobench_in(tmp.path.string(), run + " --jobs gpt", &out), 0);
    EXPECT_NE(out.find(".job_gpt.lock' is held by"), std::string::npos) << out;
    ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), run + " --jobs ao_gpt", &out), 0) << out;
    EXPECT_NE(out.find("1 trainings, 1 evals"), std::string::npos) << out;
    EXPECT_TRUE(fs::exists(out_dir / "ao_gpt/DONE.json"));
    EXPECT_FALSE(fs::exists(out_dir / "gpt/DONE.json"));
  }

  // Without --jobs: only gpt is left to train; the report then compares both.
  ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), run, &out), 0) << out;
  EXPECT_NE(out.find("job ao_gpt: training finished earlier, skipped"), std::string::npos) << out;
  EXPECT_NE(out.find("1 trainings, 1 evals"), std::string::npos) << out;
  const Results r = Results::load((out_dir / "report/results.json").string());
  EXPECT_EQ(r.runs.count("gpt"), 1u);
  EXPECT_EQ(r.runs.count("ao_gpt"), 1u);
  const std::string summary = testing::read_text((out_dir / "report/summary.md").string());
  const size_t verdict = summary.find("| 1 | Finding 1 | **");
  ASSERT_NE(verdict, std::string::npos) << summary;
  EXPECT_NE(summary.compare(verdict, 40, "| 1 | Finding 1 | **not enough data"), 0) << summary;  // both runs judged

  // --force with --jobs redoes those jobs only, not the data other runs may be reading.
  ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), run + " --jobs gpt --force", &out), 0) << out;
  EXPECT_NE(out.find("run: dataset fortunes already prepared"), std::string::npos) << out;
  EXPECT_NE(out.find("1 trainings, 1 evals"), std::string::npos) << out;
  EXPECT_EQ(out.find("job ao_gpt"), std::string::npos) << out;
}

// --prepare-only (a cluster's route): the data and one training config per run, nothing trained; each config
// trained by `aobench train --config` (as torchrun would, elsewhere); then `aobench run` finds the runs at their
// last step, trains nothing, evaluates and reports.
TEST(RunJobs, PrepareOnlyWritesTheConfigsThatTrainOutsideAndRunFinishesThem) {
  AOBENCH_REQUIRE_FORTUNES();
  testing::TempDir tmp;
  const std::string run = kRun;
  const fs::path out_dir = tmp.path / "runs/finding1_loss_debug";
  std::string out;
  EXPECT_NE(testing::run_aobench_in(tmp.path.string(), run + " --prepare-only --plan", &out), 0);
  ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), run + " --prepare-only", &out), 0) << out;
  EXPECT_TRUE(fs::exists(out_dir / "data/fortunes_train.bin"));
  for (const char* job : {"gpt", "ao_gpt"}) {
    const fs::path config = out_dir / "configs" / (std::string(job) + ".json");
    ASSERT_TRUE(fs::exists(config)) << out;
    EXPECT_FALSE(fs::exists(out_dir / job)) << "nothing trains with --prepare-only";
    EXPECT_EQ(load_json_file(config.string())["train"]["out_dir"],
              (fs::path("runs/finding1_loss_debug") / job).string());
    ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), "train --config " + config.string(), &out), 0) << out;
  }
  ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), run, &out), 0) << out;
  EXPECT_NE(out.find("nothing to train"), std::string::npos) << out;
  EXPECT_NE(out.find("2 evals"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(out_dir / "report/results.json"));
}

// Retraining the genppl judge alone would leave other jobs' generation perplexities scored by the old judge.
TEST(RunJobs, ForceOnTheJudgeAloneIsRefusedOnceOthersWereJudged) {
  AOBENCH_REQUIRE_FORTUNES();
  testing::TempDir tmp;
  json exp = load_json_file(std::string(AOBENCH_SOURCE_DIR) + "/configs/experiments/finding1_loss.json");
  exp["tier"] = "debug";
  exp["generation"] = json::parse(R"({"judge": "gpt", "sample": {"num_samples": 2, "batch_size": 2, "length": 16},
                                      "settings": [{"steps": 4}]})");
  const std::string file = tmp.file("exp.json");
  testing::write_text(file, exp.dump(1));
  std::string out;
  ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), "run " + file, &out), 0) << out;
  EXPECT_NE(out.find("gen_p1_t1_s4"), std::string::npos) << out;

  EXPECT_NE(testing::run_aobench_in(tmp.path.string(), "run " + file + " --jobs gpt --force", &out), 0);
  EXPECT_NE(out.find("retrains gpt, the generation judge, but job ao_gpt has generation perplexities"),
            std::string::npos)
      << out;
  // With every judged job named, or without --jobs, it goes ahead.
  EXPECT_EQ(testing::run_aobench_in(tmp.path.string(), "run " + file + " --jobs gpt,ao_gpt --force", &out), 0) << out;
}

}  // namespace
}  // namespace aobench
