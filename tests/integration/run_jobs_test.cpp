// Implements: `aobench run --jobs` (harness/cmd_run.cpp): an unknown job name is refused with the job list;
// a job locked by another process is refused at once while a run of another job goes on; a later run without
// --jobs trains only what is missing, and its report holds every job; --force with --jobs leaves the data.
// Uses finding1_loss.json at tier debug (two jobs, gpt and ao_gpt, 20 CPU steps each on the fortunes corpus).
#include <filesystem>

#include <gtest/gtest.h>

#include "harness/run_dir.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

namespace fs = std::filesystem;

TEST(RunJobs, SubsetsOfAnExperimentRunSeparatelyAndTheReportJoinsThem) {
  AOBENCH_REQUIRE_FORTUNES();
  testing::TempDir tmp;
  const std::string run =
      "run " + std::string(AOBENCH_SOURCE_DIR) + "/configs/experiments/finding1_loss.json" + " --set tier=debug";
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
  const std::string summary = testing::read_text((out_dir / "report/summary.md").string());
  EXPECT_NE(summary.find("| 1 | **yes**"), std::string::npos) << summary;

  // --force with --jobs redoes those jobs only, not the data other runs may be reading.
  ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), run + " --jobs gpt --force", &out), 0) << out;
  EXPECT_NE(out.find("run: dataset fortunes already prepared"), std::string::npos) << out;
  EXPECT_NE(out.find("1 trainings, 1 evals"), std::string::npos) << out;
  EXPECT_EQ(out.find("job ao_gpt"), std::string::npos) << out;
}

}  // namespace
}  // namespace aobench
