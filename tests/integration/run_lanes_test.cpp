// Implements: lanes of `aobench run` (harness/experiment/lanes.h) end to end on the CPU: with
// runs_per_device=2 the four runs of finding1_loss (debug tier, 2 jobs × 2 seeds) train in child processes two at
// a time, each with its log, and end with the same validation losses, to the last bit, as the same experiment
// trained one run at a time in this process; the parent evaluates, generates and reports as without lanes; a
// re-run trains nothing; a bad value fails before any work, naming it.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/config.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The validation losses of a run's metrics.jsonl, in order.
std::vector<double> val_losses(const fs::path& run_dir) {
  std::vector<double> out;
  std::ifstream in(run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    if (j.contains("loss/val")) out.push_back(j["loss/val"].get<double>());
  }
  return out;
}

TEST(RunLanes, PackedRunsTrainInChildrenAndMatchOneAtATime) {
  AOBENCH_REQUIRE_FORTUNES();
  testing::TempDir tmp;
  json exp = load_json_file(std::string(AOBENCH_SOURCE_DIR) + "/configs/experiments/finding1_loss.json");
  exp["tier"] = "debug";
  exp["seeds"] = 2;
  exp["generation"] = json::parse(R"({"judge": "gpt", "sample": {"num_samples": 2, "batch_size": 2, "length": 16},
                                      "settings": [{"steps": 4}]})");
  exp["tiers"]["debug"]["out_dir"] = "runs/packed";
  const std::string packed_file = tmp.file("packed.json");
  testing::write_text(packed_file, exp.dump(1));
  exp["tiers"]["debug"]["out_dir"] = "runs/alone";
  const std::string alone_file = tmp.file("alone.json");
  testing::write_text(alone_file, exp.dump(1));
  std::string out;

  EXPECT_NE(testing::run_aobench_in(tmp.path.string(), "run " + packed_file + " --set runs_per_device=0", &out), 0);
  EXPECT_NE(out.find("--set runs_per_device=0: '0' is not a number of runs per device"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(tmp.path / "runs/packed"));

  ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), "run " + packed_file + " --set runs_per_device=2", &out), 0)
      << out;
  EXPECT_NE(out.find("run: 4 runs in 2 lanes (2 per device on 1 device); logs in runs/packed/logs"), std::string::npos)
      << out;
  EXPECT_NE(out.find("runs 4 of 4 (2 jobs × 2 seeds): 4 trainings,"), std::string::npos) << out;
  EXPECT_NE(out.find("run: aobench genppl"), std::string::npos) << out;  // generation: in the parent, after the lanes
  const fs::path packed = tmp.path / "runs/packed", alone = tmp.path / "runs/alone";
  for (const char* run : {"gpt", "ao_gpt", "gpt_seed1", "ao_gpt_seed1"}) {
    const std::string log = testing::read_text((packed / "logs" / (std::string(run) + ".log")).string());
    EXPECT_NE(log.find("run: lane done: 1 trainings"), std::string::npos) << run << ":\n" << log;
    EXPECT_TRUE(fs::exists(packed / run / "DONE.json")) << run;
  }
  EXPECT_TRUE(fs::exists(packed / "report/results.json"));

  ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), "run " + alone_file, &out), 0) << out;
  EXPECT_EQ(out.find("lanes"), std::string::npos) << out;
  for (const char* run : {"gpt", "ao_gpt", "gpt_seed1", "ao_gpt_seed1"}) {
    const auto a = val_losses(alone / run), p = val_losses(packed / run);
    ASSERT_FALSE(a.empty()) << run;
    EXPECT_EQ(a, p) << run;  // bitwise: the same computation in another process
  }

  // Nothing is left to train: no lanes start, nothing is redone.
  ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), "run " + packed_file + " --set runs_per_device=2", &out), 0)
      << out;
  EXPECT_EQ(out.find("lanes"), std::string::npos) << out;
  EXPECT_NE(out.find("0 trainings, 0 evals;"), std::string::npos) << out;
}

}  // namespace
}  // namespace aobench
