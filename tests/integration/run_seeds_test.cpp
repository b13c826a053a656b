// Implements: seeds of `aobench run` (harness/experiment/seeds.h) end to end: --set seeds=2 gives two run folders
// per job, seed 1 with train.seed + 1 and data.seed pinned to seed 0's batches, every stage on every run (an
// eval filter naming a job covers its seeds; the genppl judge is the judge job's seed 0), the runs recorded in
// experiment.json; a re-run skips everything, raising to seeds=3 trains only the new folders, --jobs selects
// one seed run, and bad values and colliding folder names fail before any work. Uses finding1_loss.json at tier
// debug (gpt and ao_gpt, 20 CPU steps each on the fortunes corpus).
#include <filesystem>

#include <gtest/gtest.h>

#include "core/config.h"
#include "reports/results.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

using nlohmann::json;

namespace fs = std::filesystem;

TEST(RunSeeds, EverySeedIsARunFolderAndRaisingSeedsTrainsOnlyTheNewOnes) {
  AOBENCH_REQUIRE_FORTUNES();
  testing::TempDir tmp;
  json exp = load_json_file(std::string(AOBENCH_SOURCE_DIR) + "/configs/experiments/finding1_loss.json");
  exp["tier"] = "debug";
  exp["tiers"]["debug"]["eval"]["modes"] = json::parse(R"([{"mode": "l2r", "first_token": "skip"},
      {"mode": "random", "orders": 1, "first_token": "skip", "jobs": ["ao_gpt"]}])");
  exp["generation"] = json::parse(R"({"judge": "gpt", "sample": {"num_samples": 2, "batch_size": 2, "length": 16},
                                      "settings": [{"steps": 4}]})");
  const std::string file = tmp.file("exp.json");
  testing::write_text(file, exp.dump(1));
  const std::string run = "run " + file;
  const fs::path out_dir = tmp.path / "runs/finding1_loss_debug";
  std::string out;

  // Bad values and folder collisions fail before any work, naming the value.
  for (const char* bad : {"0", "two"}) {
    EXPECT_NE(testing::run_aobench_in(tmp.path.string(), run + " --set seeds=" + bad, &out), 0) << out;
    EXPECT_NE(out.find(std::string("--set seeds=") + bad + ": '" + bad + "' is not a number of seeds"),
              std::string::npos)
        << out;
  }
  json clash = exp;
  clash["jobs"].push_back({{"name", "gpt_seed1"}, {"config", exp["jobs"][0]["config"]}});
  const std::string clash_file = tmp.file("clash.json");
  testing::write_text(clash_file, clash.dump(1));
  EXPECT_NE(testing::run_aobench_in(tmp.path.string(), "run " + clash_file + " --set seeds=2", &out), 0) << out;
  EXPECT_NE(out.find("run folder 'gpt_seed1' would hold both job gpt_seed1 and seed 1 of job gpt"), std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(out_dir));

  ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), run + " --set seeds=2", &out), 0) << out;
  EXPECT_NE(out.find("runs 4 of 4 (2 jobs × 2 seeds): 4 trainings, 6 evals;"), std::string::npos) << out;
  for (const char* name : {"gpt", "gpt_seed1", "ao_gpt", "ao_gpt_seed1"})
    EXPECT_TRUE(fs::exists(out_dir / name / "DONE.json")) << name;
  const json gpt = load_json_file((out_dir / "gpt/config.resolved.json").string());
  const json gpt1 = load_json_file((out_dir / "gpt_seed1/config.resolved.json").string());
  EXPECT_EQ(gpt["data"]["seed"], -1);  // seed 0: the job as written
  EXPECT_EQ(gpt1["train"]["seed"], gpt["train"]["seed"].get<int64_t>() + 1);
  EXPECT_EQ(gpt1["data"]["seed"], gpt["train"]["seed"]);
  EXPECT_EQ(gpt1["train"]["order"], gpt["train"]["order"]);
  EXPECT_EQ(gpt1["eval"], gpt["eval"]);
  // The ao_gpt-only eval mode and the generation ran on ao_gpt's seed 1, judged by gpt (seed 0).
  EXPECT_EQ(load_json_file((out_dir / "ao_gpt_seed1/DONE.json").string())["evals"].size(), 2u);
  EXPECT_NE(out.find(" --judge runs/finding1_loss_debug/gpt --run runs/finding1_loss_debug/ao_gpt_seed1"),
            std::string::npos)
      << out;
  const json record = load_json_file((out_dir / "experiment.json").string());
  EXPECT_EQ(record["seeds"], 2);
  EXPECT_EQ(record["runs"], json::parse(R"({"gpt": ["gpt", "gpt_seed1"], "ao_gpt": ["ao_gpt", "ao_gpt_seed1"]})"));
  EXPECT_EQ(record["tier"], "debug");
  const Results r = Results::load((out_dir / "report/results.json").string());
  for (const char* name : {"gpt", "gpt_seed1", "ao_gpt", "ao_gpt_seed1"}) EXPECT_EQ(r.runs.count(name), 1u) << name;

  // A DONE.json written before data.seed existed: the default -1 is the same job, skipped, not refused.
  json done = load_json_file((out_dir / "gpt/DONE.json").string());
  ASSERT_EQ(done["config"]["data"].erase("seed"), 1u);
  testing::write_text((out_dir / "gpt/DONE.json").string(), done.dump(2));
  ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), run + " --set seeds=2", &out), 0) << out;
  EXPECT_NE(out.find("0 trainings, 0 evals;"), std::string::npos) << out;
  EXPECT_EQ(out.find("run: aobench genppl"), std::string::npos) << out;

  // Three seeds: only the seed-2 folders train; the finished runs keep their numbers.
  ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), run + " --set seeds=3", &out), 0) << out;
  EXPECT_NE(out.find("runs 6 of 6 (2 jobs × 3 seeds): 2 trainings, 3 evals;"), std::string::npos) << out;
  EXPECT_NE(out.find("job gpt_seed1: training finished earlier, skipped"), std::string::npos) << out;
  EXPECT_EQ(load_json_file((out_dir / "gpt_seed2/config.resolved.json").string())["train"]["seed"],
            gpt["train"]["seed"].get<int64_t>() + 2);
  EXPECT_EQ(load_json_file((out_dir / "experiment.json").string())["runs"]["gpt"],
            json::array({"gpt", "gpt_seed1", "gpt_seed2"}));

  // --jobs names one seed run (an unknown one is refused with the valid names).
  EXPECT_NE(testing::run_aobench_in(tmp.path.string(), run + " --set seeds=3 --jobs gpt_seed3", &out), 0);
  EXPECT_NE(out.find("jobs: gpt, ao_gpt; seed runs: gpt_seed1, ao_gpt_seed1, gpt_seed2, ao_gpt_seed2"),
            std::string::npos)
      << out;
  ASSERT_EQ(testing::run_aobench_in(tmp.path.string(), run + " --set seeds=3 --jobs gpt_seed1 --force", &out), 0)
      << out;
  EXPECT_NE(out.find("runs 1 of 6 (2 jobs × 3 seeds): 1 trainings, 1 evals;"), std::string::npos) << out;
  EXPECT_EQ(out.find("job gpt:"), std::string::npos) << out;
  EXPECT_EQ(out.find("job ao_gpt"), std::string::npos) << out;
}

}  // namespace
}  // namespace aobench
