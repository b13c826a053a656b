// Implements: tests of experiment tiers (harness/experiment/tiers.h): the --set tier= key, merge patches over
// the body, jobs patched by name, the default tier, errors naming the file and the tiers; and that every
// experiment file under configs/experiments/ resolves at each tier it declares, with its findings known.
// Also seeds (harness/experiment/seeds.h): the --set seeds= key, "seeds" in a file or tier, the run folders
// and configs of each seed, folder collisions, and the runs in the experiment record.
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/config.h"
#include "core/errors.h"
#include "harness/experiment/experiment.h"
#include "harness/experiment/generation.h"
#include "harness/experiment/paths.h"
#include "harness/experiment/seeds.h"
#include "harness/experiment/tiers.h"
#include "harness/resolve_config.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

// Sets $AOBENCH_DATA_DIR (the shared data folder of datasets/data_dir.h) for a scope; restores it after.
class ScopedDataDir {
 public:
  explicit ScopedDataDir(const std::string& dir) {
    if (const char* v = std::getenv("AOBENCH_DATA_DIR")) old_ = v;
    ::setenv("AOBENCH_DATA_DIR", dir.c_str(), 1);
  }
  ~ScopedDataDir() {
    if (old_)
      ::setenv("AOBENCH_DATA_DIR", old_->c_str(), 1);
    else
      ::unsetenv("AOBENCH_DATA_DIR");
  }

 private:
  std::optional<std::string> old_;
};

json sample_experiment() {
  return json::parse(R"({
    "out_dir": "runs/x", "tier": "tiny", "findings": ["1"],
    "common": {"model": {"flavour": "tiny"}, "train": {"max_iters": 1500, "batch_size": 16}},
    "jobs": [{"name": "gpt", "config": {"model": {"plugin": "gpt"}}},
             {"name": "ao_gpt", "config": {"model": {"plugin": "ao_gpt"}, "train": {"ema": 0.0}}}],
    "eval": {"modes": [{"mode": "l2r"}, {"mode": "random", "orders": 4}]},
    "tiers": {
      "debug": {"out_dir": "runs/x_debug", "common": {"model": {"flavour": "debug"}, "train": {"max_iters": 20}},
                "jobs": {"ao_gpt": {"config": {"train": {"ema": 0.99}}}},
                "eval": {"modes": [{"mode": "l2r"}]}},
      "tiny": {},
      "small": {"common": {"model": {"flavour": "small"}, "train": {"max_iters": 500000}}}}
  })");
}

TEST(ExperimentTiers, TakeTierRemovesOnlyTheTierSetting) {
  std::vector<std::string> sets = {"train.max_iters=5", "tier=debug", "eval.batch_size=2"};
  EXPECT_EQ(take_tier_setting(sets), "debug");
  EXPECT_EQ(sets, (std::vector<std::string>{"train.max_iters=5", "eval.batch_size=2"}));
  std::vector<std::string> none = {"train.max_iters=5"};
  EXPECT_EQ(take_tier_setting(none), "");
  EXPECT_EQ(none.size(), 1u);
  std::vector<std::string> twice = {"tier=debug", "tier=debug"};
  EXPECT_EQ(take_tier_setting(twice), "debug");
  std::vector<std::string> clash = {"tier=debug", "tier=tiny"};
  EXPECT_THROW(take_tier_setting(clash), ConfigError);
  std::vector<std::string> empty = {"tier="};
  EXPECT_THROW(take_tier_setting(empty), ConfigError);
}

TEST(ExperimentTiers, DebugPatchMergesOverTheBodyAndPatchesJobsByName) {
  const json e = apply_tier(sample_experiment(), "debug", "x.json");
  EXPECT_EQ(e["tier"], "debug");
  EXPECT_FALSE(e.contains("tiers"));
  EXPECT_EQ(e["out_dir"], "runs/x_debug");
  EXPECT_EQ(e["common"]["model"]["flavour"], "debug");
  EXPECT_EQ(e["common"]["train"]["max_iters"], 20);
  EXPECT_EQ(e["common"]["train"]["batch_size"], 16);  // untouched keys stay
  ASSERT_EQ(e["jobs"].size(), 2u);                    // the list keeps its jobs and order
  EXPECT_EQ(e["jobs"][0]["name"], "gpt");
  EXPECT_EQ(e["jobs"][1]["config"]["train"]["ema"], 0.99);
  EXPECT_EQ(e["jobs"][1]["config"]["model"]["plugin"], "ao_gpt");
  EXPECT_EQ(e["eval"]["modes"].size(), 1u);  // a list in a patch replaces the list
  EXPECT_EQ(e["findings"], json::array({"1"}));
}

TEST(ExperimentTiers, DefaultTierAndEmptyPatch) {
  const json e = apply_tier(sample_experiment(), "", "x.json");  // the file's "tier": tiny, an empty patch
  json body = sample_experiment();
  body.erase("tiers");
  EXPECT_EQ(e, body);
  const json small = apply_tier(sample_experiment(), "small", "x.json");
  EXPECT_EQ(small["common"]["train"]["max_iters"], 500000);
  EXPECT_EQ(small["out_dir"], "runs/x");
}

TEST(ExperimentTiers, FileWithoutTiersRunsAsWritten) {
  json plain = sample_experiment();
  plain.erase("tiers");
  plain.erase("tier");
  EXPECT_EQ(apply_tier(plain, "", "p.json"), plain);
  try {
    apply_tier(plain, "debug", "p.json");
    FAIL() << "a tier named for a file without tiers must be an error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("p.json"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("declares no"), std::string::npos) << e.hint();
  }
}

TEST(ExperimentTiers, ErrorsNameTheFileAndTheTiers) {
  try {
    apply_tier(sample_experiment(), "medium", "x.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no tier 'medium'"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("debug, small, tiny"), std::string::npos) << e.hint();
  }
  json bad_job = sample_experiment();
  bad_job["tiers"]["debug"]["jobs"] = {{"gtp", {{"config", json::object()}}}};
  try {
    apply_tier(bad_job, "debug", "x.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("jobs.gtp names no job"), std::string::npos) << e.what();
  }
  json not_object = sample_experiment();
  not_object["tiers"]["debug"] = json::array();
  EXPECT_THROW(apply_tier(not_object, "debug", "x.json"), ConfigError);
  EXPECT_THROW(apply_tier(json::array(), "", "x.json"), ConfigError);
}

TEST(ExperimentTiers, RecordKeepsFindingsAndRefusesUnknownOnes) {
  const json rec = experiment_record(apply_tier(sample_experiment(), "debug", "x.json"), "x.json");
  EXPECT_EQ(rec["file"], "x.json");
  EXPECT_EQ(rec["tier"], "debug");
  EXPECT_EQ(rec["findings"], json::array({"1"}));
  json bad = sample_experiment();
  bad["findings"] = {"42"};
  EXPECT_THROW(experiment_record(bad, "x.json"), ConfigError);
  bad["findings"] = "1";
  EXPECT_THROW(experiment_record(bad, "x.json"), ConfigError);
}

TEST(ExperimentTiers, RecordsOfTwoFilesSharingAnOutDirMerge) {
  const json a = {{"file", "p.json"}, {"tier", "tiny"}, {"findings", {"zero-shot"}}, {"deviations", "A"}};
  const json b = {{"file", "g.json"}, {"tier", "tiny"}, {"findings", {"7", "zero-shot"}}, {"deviations", "B"}};
  const json m = merge_experiment_records(a, b);
  EXPECT_EQ(m["findings"], json::array({"zero-shot", "7"}));
  EXPECT_EQ(m["file"], "g.json | p.json");
  EXPECT_EQ(m["deviations"], "B | A");
  EXPECT_EQ(merge_experiment_records(m, b), m);  // re-running adds nothing
  const json a2 = {{"file", "p.json"}, {"findings", {"1"}}};
  EXPECT_EQ(merge_experiment_records(a, a2), a2);  // same file: replaced
  EXPECT_EQ(merge_experiment_records(json(), b), b);
}

TEST(ExperimentTiers, EvalFiltersMustNameDatasetsAndJobsOfTheFile) {
  const json eval = {{"datasets", {{"wiki_val", "v.bin"}}},
                     {"modes", {{{"mode", "l2r"}, {"jobs", {"gpt"}}, {"datasets", {"wiki_val"}}}}}};
  EXPECT_NO_THROW(check_eval_section(eval, {"gpt"}, "x.json"));
  EXPECT_NO_THROW(check_eval_section(json::object(), {"gpt"}, "x.json"));
  auto message = [](const json& e) {
    try {
      check_eval_section(e, {"gpt"}, "x.json");
    } catch (const ConfigError& err) {
      return std::string(err.what());
    }
    return std::string("no error");
  };
  json typo = eval;
  typo["modes"][0]["datasets"] = {"wiki_vall"};
  EXPECT_NE(message(typo).find("'datasets' names \"wiki_vall\", which is not in eval.datasets"), std::string::npos)
      << message(typo);
  typo = eval;
  typo["modes"][0]["jobs"] = {"gtp"};
  EXPECT_NE(message(typo).find("'jobs' names \"gtp\", which is no job"), std::string::npos) << message(typo);
  typo = eval;
  typo["datasets"]["wiki_val"] = 3;
  EXPECT_NE(message(typo).find("eval.datasets.wiki_val must be a path"), std::string::npos) << message(typo);
  typo = eval;
  typo["modes"] = json::object();
  EXPECT_NE(message(typo).find("eval.modes must be a list"), std::string::npos) << message(typo);
}

// Every shipped experiment file that names findings has the four standard tiers, every one the debug tier
// (tests/integration/experiments_debug_test.cpp runs it), and every tier it declares resolves the way `aobench run` resolves it: the tier's patch, the "base"
// file at the same tier, known findings, every job's config validated strictly (a misspelt key in a tiny_t256
// patch fails here, not after an hour on a GPU), the eval section's dataset and job filters, and the generation
// section.
TEST(ExperimentTiers, EveryExperimentFileResolvesAtEveryTier) {
  const ScopedDataDir data("/shared-data-for-the-test");  // {data} needs a folder, not its files
  int files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(AOBENCH_SOURCE_DIR) + "/configs/experiments")) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    const std::string origin = entry.path().string();
    const json exp = load_json_file(origin);
    ASSERT_TRUE(exp.contains("tiers")) << origin;
    // A measurement (no findings, e.g. plateau.json) has the debug tier and its own; paper artifacts all four.
    const bool artifact = !exp.value("findings", json::array()).empty();
    for (const char* tier : {"debug", "tiny", "small", "medium"})
      if (artifact || std::string(tier) == "debug") {
        EXPECT_TRUE(exp["tiers"].contains(tier)) << origin << " lacks tier " << tier;
      }
    for (auto tier = exp["tiers"].begin(); tier != exp["tiers"].end(); ++tier) {
      SCOPED_TRACE(origin + " tier " + tier.key());
      // The base file and the data paths resolve from the file's folder, whatever the working directory.
      json e;
      EXPECT_NO_THROW(e = experiment_with_base(apply_tier(exp, tier.key(), origin), origin));
      EXPECT_NO_THROW(e = resolve_experiment_paths(e, origin));
      for (const auto& entry : e["prepare"]) {  // what an experiment prepares lands in runs/ of the working directory
        const std::string output = entry.value("output", std::string());
        EXPECT_EQ(output.rfind("runs/", 0), 0u) << output;
      }
      EXPECT_NO_THROW(experiment_record(e, origin));
      ASSERT_TRUE(e.contains("out_dir") && e.contains("jobs") && e.contains("common"));
      EXPECT_NO_THROW(EXPECT_EQ(resolve_experiment_jobs(e, {}, origin).size(), e["jobs"].size()));
      // The typed experiment of `aobench run` at this tier: every prepare entry, run and eval mode checked.
      EXPECT_NO_THROW(load_experiment(origin, {"tier=" + tier.key()}));
      std::vector<std::string> job_names;
      for (const auto& j : e["jobs"]) job_names.push_back(j.value("name", ""));
      EXPECT_NO_THROW(check_eval_section(e.value("eval", json::object()), job_names, origin));
      if (e.contains("generation")) {
        EXPECT_NO_THROW(check_generation_section(e["generation"], origin));
      }
    }
  }
  EXPECT_GE(files, 8);
}

// Where an experiment's paths point: placeholders, the file's folder, never the working directory.
TEST(ExperimentPaths, PlaceholdersAndRelativePathsResolveFromTheFile) {
  const ScopedDataDir data("/d");
  const std::string origin = "/e/configs/x.json";
  const std::string out_dir = "runs/x";
  auto path = [&](const std::string& p) { return resolve_experiment_path(p, &out_dir, origin, "k"); };
  EXPECT_EQ(path("{out_dir}/data/v.bin"), "runs/x/data/v.bin");
  EXPECT_EQ(path("{out_dir}/../p/data/t.bin"), "runs/p/data/t.bin");  // lexically normal: one name per file
  EXPECT_EQ(path("{here}/prompts.txt"), "/e/configs/prompts.txt");
  EXPECT_EQ(path("local.bin"), "/e/configs/local.bin");
  EXPECT_EQ(path("../shared/a.txt"), "/e/shared/a.txt");
  EXPECT_EQ(path("/abs/f.bin"), "/abs/f.bin");
  EXPECT_EQ(path("{data}/gpt2"), "/d/gpt2");
  EXPECT_EQ(path("{data}"), "/d");
  EXPECT_EQ(resolve_experiment_path("v.bin", &out_dir, "x.json", "k"), "v.bin");  // a file in the working directory
  EXPECT_EQ(path(""), "");                                                        // data.val "" (none) stays none
  EXPECT_EQ(resolve_experiment_path("{out_dir}/v.bin", nullptr, origin, "k"), "{out_dir}/v.bin");  // a base's
  EXPECT_THROW(require_data_folder("{data}/train/a.xz", "x.json: prepare[0].input"), ConfigError);
  EXPECT_NO_THROW(require_data_folder("/d/train/a.xz", "x.json: prepare[0].input"));

  json exp = json::parse(R"({"out_dir": "runs/x",
    "prepare": [{"name": "t", "input": ["{data}/a.xz", "b.txt"], "vocab-dir": "{data}/gpt2",
                 "output": "{out_dir}/data/t.bin", "val_output": "{out_dir}/data/v.bin"}],
    "common": {"data": {"train": "{out_dir}/data/t.bin", "val": "{out_dir}/data/v.bin"}},
    "jobs": [{"name": "gpt", "config": {"data": {"val": "{out_dir}/../y/v.bin"}}}],
    "eval": {"datasets": {"v": "{out_dir}/data/v.bin"},
             "modes": [{"mode": "infill", "infill": {"judge": "{out_dir}/gpt"}}, {"mode": "infill", "infill": {"judge": "gpt"}}]},
    "generation": {"judge": "{here}/judges/gpt"}})");
  const json e = resolve_experiment_paths(exp, origin);
  EXPECT_EQ(e["prepare"][0]["input"], json::array({"/d/a.xz", "/e/configs/b.txt"}));
  EXPECT_EQ(e["prepare"][0]["vocab-dir"], "/d/gpt2");
  EXPECT_EQ(e["prepare"][0]["output"], "runs/x/data/t.bin");
  EXPECT_EQ(e["prepare"][0]["val_output"], "runs/x/data/v.bin");
  EXPECT_EQ(e["common"]["data"]["train"], "runs/x/data/t.bin");
  EXPECT_EQ(e["jobs"][0]["config"]["data"]["val"], "runs/y/v.bin");
  EXPECT_EQ(e["eval"]["datasets"]["v"], "runs/x/data/v.bin");
  EXPECT_EQ(e["out_dir"], "runs/x");  // relative to the working directory: where runs/ goes
  EXPECT_EQ(e["generation"]["judge"], "/e/configs/judges/gpt");
  EXPECT_EQ(e["eval"]["modes"][0]["infill"]["judge"], "runs/x/gpt");  // an infilling judge: a path, resolved
  EXPECT_EQ(e["eval"]["modes"][1]["infill"]["judge"], "gpt");         // or a job's name, kept
  const json kept = resolve_experiment_paths(exp, origin, /*keep_out_dir=*/true);  // a base file's paths
  EXPECT_EQ(kept["common"]["data"]["train"], "{out_dir}/data/t.bin");
  EXPECT_EQ(kept["prepare"][0]["vocab-dir"], "/d/gpt2");
  json named = exp;
  named["generation"]["judge"] = "gpt";  // a job of the experiment: a name, not a path
  EXPECT_EQ(resolve_experiment_paths(named, origin)["generation"]["judge"], "gpt");

  auto message = [&](const std::string& p) {
    try {
      path(p);
    } catch (const ConfigError& err) {
      return std::string(err.what()) + " | " + err.hint();
    }
    return std::string("no error");
  };
  EXPECT_NE(message("{dat}/x").find("x.json: k = \"{dat}/x\": unknown placeholder {dat} | paths start with {data}/"),
            std::string::npos)
      << message("{dat}/x");
  EXPECT_NE(message("{out_dir}x").find("a placeholder is followed by '/'"), std::string::npos);
  json bad = exp;
  bad["prepare"][0]["output"] = 3;
  try {
    resolve_experiment_paths(bad, origin);
    FAIL() << "a path that is no string";
  } catch (const ConfigError& err) {
    EXPECT_NE(std::string(err.what()).find("prepare[0].output must be a path"), std::string::npos) << err.what();
  }
  bad = exp;
  bad["out_dir"] = "{out_dir}/x";
  EXPECT_THROW(resolve_experiment_paths(bad, origin), ConfigError);
}

// The ConfigError message and hint of f(), or "no error".
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return std::string(e.what()) + " | " + e.hint();
  }
  return "no error";
}

// "paths": named folders as {NAME}/… placeholders, themselves resolved; --set paths.NAME=DIR moves one the file
// declares (relative to the working directory) and refuses a name it does not declare.
TEST(ExperimentPaths, NamedPathsAndTheirSettings) {
  const ScopedDataDir data("/d");
  const std::string origin = "/e/configs/x.json";
  const json exp = json::parse(R"({"out_dir": "runs/x", "paths": {"owt": "{data}/openwebtext", "mine": "local"},
    "prepare": [{"name": "t", "input": "{owt}/*.jsonl*", "output": "{out_dir}/../owt_gpt2/train"},
                {"name": "m", "input": ["{mine}/a.txt"], "output": "{out_dir}/m.bin"}]})");
  const json e = resolve_experiment_paths(exp, origin);
  EXPECT_EQ(e["paths"]["owt"], "/d/openwebtext");
  EXPECT_EQ(e["prepare"][0]["input"], "/d/openwebtext/*.jsonl*");
  EXPECT_EQ(e["prepare"][0]["output"], "runs/owt_gpt2/train");
  EXPECT_EQ(e["prepare"][1]["input"], json::array({"/e/configs/local/a.txt"}));

  json moved = exp;
  std::vector<std::string> sets = {"train.max_iters=3", "paths.owt=/scratch/owt", "tier=small"};
  apply_path_settings(moved, sets, origin);
  EXPECT_EQ(sets, (std::vector<std::string>{"train.max_iters=3", "tier=small"}));  // the others stay
  EXPECT_EQ(resolve_experiment_paths(moved, origin)["prepare"][0]["input"], "/scratch/owt/*.jsonl*");
  sets = {"paths.owt=rel/owt"};
  apply_path_settings(moved, sets, origin);
  EXPECT_EQ(moved["paths"]["owt"], (std::filesystem::current_path() / "rel/owt").lexically_normal().string());

  sets = {"paths.ow=/x"};
  EXPECT_NE(
      error_of([&] { apply_path_settings(moved, sets, origin); }).find("declares no path 'ow' | its paths: mine, owt"),
      std::string::npos);
  sets = {"paths.owt="};
  EXPECT_NE(error_of([&] { apply_path_settings(moved, sets, origin); }).find("the path is empty"), std::string::npos);
  json bad = exp;
  bad["paths"]["data"] = "/x";  // a placeholder of its own
  EXPECT_NE(error_of([&] { resolve_experiment_paths(bad, origin); }).find("paths.data"), std::string::npos);
  bad = exp;
  bad["paths"]["owt"] = 3;
  EXPECT_NE(error_of([&] { resolve_experiment_paths(bad, origin); }).find("paths.owt must be a non-empty path"),
            std::string::npos);
  bad = exp;
  bad["prepare"][0]["input"] = "{other}/x";
  EXPECT_NE(error_of([&] { resolve_experiment_paths(bad, origin); }).find("unknown placeholder {other}"),
            std::string::npos);

  // A file with a "base" names the base's folder too: its value (here from --set) reaches the base's prepare.
  testing::TempDir dir;
  testing::write_text(dir.file("base.json"), exp.dump());
  json child = {{"base", "base.json"}, {"paths", {{"owt", "{data}/openwebtext"}}}};
  sets = {"paths.owt=/big/owt"};
  apply_path_settings(child, sets, dir.file("child.json"));
  const json merged = experiment_with_base(child, dir.file("child.json"));
  EXPECT_EQ(merged["prepare"][0]["input"], "/big/owt/*.jsonl*");
  EXPECT_EQ(merged["prepare"][1]["input"], json::array({dir.file("local/a.txt")}));  // the base's own, from its folder
}

TEST(ExperimentSeeds, TakeSeedsRemovesOnlyTheSeedsSettingAndRefusesBadValues) {
  std::vector<std::string> sets = {"train.max_iters=5", "seeds=3", "tier=debug"};
  EXPECT_EQ(take_seeds_setting(sets), 3);
  EXPECT_EQ(sets, (std::vector<std::string>{"train.max_iters=5", "tier=debug"}));
  EXPECT_EQ(take_seeds_setting(sets), 0);  // none given
  std::vector<std::string> twice = {"seeds=2", "seeds=2"};
  EXPECT_EQ(take_seeds_setting(twice), 2);
  for (const char* bad : {"0", "two", "", "-1", "2.5", "1e3", "1001", "99999999999"}) {
    std::vector<std::string> one = {std::string("seeds=") + bad};
    const std::string message = error_of([&] { take_seeds_setting(one); });
    EXPECT_NE(message.find(std::string("'") + bad + "' is not a number of seeds"), std::string::npos) << message;
  }
  std::vector<std::string> clash = {"seeds=2", "seeds=3"};
  EXPECT_NE(error_of([&] { take_seeds_setting(clash); }).find("given twice (2, 3)"), std::string::npos);
}

TEST(ExperimentSeeds, FileKeyTierPatchAndSetting) {
  json e = sample_experiment();
  EXPECT_EQ(experiment_seeds(e, 0, "x.json"), 1);  // the default: the jobs as written
  e["seeds"] = 2;
  e["tiers"]["debug"]["seeds"] = 3;
  EXPECT_EQ(experiment_seeds(apply_tier(e, "tiny", "x.json"), 0, "x.json"), 2);
  EXPECT_EQ(experiment_seeds(apply_tier(e, "debug", "x.json"), 0, "x.json"), 3);
  EXPECT_EQ(experiment_seeds(apply_tier(e, "debug", "x.json"), 5, "x.json"), 5);  // --set seeds wins
  for (const json& bad : {json(0), json(-2), json(2.5), json("3"), json(true), json(5000)}) {
    e["seeds"] = bad;
    const std::string message = error_of([&] { experiment_seeds(e, 0, "x.json"); });
    EXPECT_NE(message.find("x.json: 'seeds' must be a positive integer, got " + bad.dump()), std::string::npos)
        << message;
  }
}

TEST(ExperimentSeeds, SeedZeroIsTheJobAsWrittenAndLaterSeedsChangeOnlyTrainSeed) {
  const json gpt = {{"data", {{"seed", -1}, {"train", "t.bin"}}},
                    {"train", {{"seed", 1337}, {"out_dir", "runs/x/gpt"}, {"order", {{"seed", 0}}}}},
                    {"eval", {{"seed", 1234}}}};
  json pinned = gpt;  // a job whose batches follow their own data.seed
  pinned["data"]["seed"] = 7;
  pinned["train"]["out_dir"] = "runs/x/ao";
  const auto runs = expand_seeds({{"gpt", gpt}, {"ao", pinned}}, 3, "runs/x", "x.json");
  ASSERT_EQ(runs.size(), 6u);
  std::vector<std::string> names;
  for (const auto& r : runs) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"gpt", "ao", "gpt_seed1", "ao_seed1", "gpt_seed2", "ao_seed2"}));
  EXPECT_EQ(runs[0].config, gpt);  // unchanged: raising seeds keeps a finished run
  EXPECT_EQ(runs[1].config, pinned);
  EXPECT_EQ(runs[4].job, "gpt");
  EXPECT_EQ(runs[4].seed, 2);
  const json& g2 = runs[4].config;
  EXPECT_EQ(g2["train"]["seed"], 1339);
  EXPECT_EQ(g2["data"]["seed"], 1337);  // seed 0's batches
  EXPECT_EQ(g2["train"]["out_dir"], "runs/x/gpt_seed2");
  EXPECT_EQ(g2["train"]["order"]["seed"], 0);  // the comparison's seeds stay
  EXPECT_EQ(g2["eval"]["seed"], 1234);
  const json& a1 = runs[3].config;
  EXPECT_EQ(a1["train"]["seed"], 1338);
  EXPECT_EQ(a1["data"]["seed"], 7);
  EXPECT_EQ(expand_seeds({{"gpt", gpt}}, 1, "runs/x", "x.json").size(), 1u);
}

TEST(ExperimentSeeds, RunFoldersThatCollideAreRefused) {
  EXPECT_EQ(seed_runs({"a", "a_seed1"}, 1, "x.json").size(), 2u);  // one seed: no other folders
  const std::string message = error_of([] { seed_runs({"a", "a_seed1"}, 2, "x.json"); });
  EXPECT_NE(message.find("x.json: run folder 'a_seed1' would hold both job a_seed1 and seed 1 of job a"),
            std::string::npos)
      << message;
  EXPECT_EQ(seed_run_name("a", 0), "a");
  EXPECT_EQ(seed_run_name("a", 12), "a_seed12");
}

TEST(ExperimentSeeds, RecordListsTheRunsOfEveryJobAndMergesThem) {
  json e = apply_tier(sample_experiment(), "debug", "x.json");
  const json one = experiment_record(e, "x.json");
  EXPECT_EQ(one["seeds"], 1);
  EXPECT_EQ(one["runs"], json::parse(R"({"gpt": ["gpt"], "ao_gpt": ["ao_gpt"]})"));
  e["seeds"] = 3;
  const json three = experiment_record(e, "x.json");
  EXPECT_EQ(three["seeds"], 3);
  EXPECT_EQ(three["runs"]["ao_gpt"], json::array({"ao_gpt", "ao_gpt_seed1", "ao_gpt_seed2"}));
  // Another file sharing the out_dir with one seed: the expected runs stay, its own job is added.
  json other = one;
  other["file"] = "g.json";
  other["runs"]["sedd"] = {"sedd"};
  const json merged = merge_experiment_records(three, other);
  EXPECT_EQ(merged["seeds"], 3);
  EXPECT_EQ(merged["runs"]["ao_gpt"], json::array({"ao_gpt", "ao_gpt_seed1", "ao_gpt_seed2"}));
  EXPECT_EQ(merged["runs"]["sedd"], json::array({"sedd"}));
  EXPECT_EQ(merge_experiment_records(three, one), one);  // the same file: replaced
}

}  // namespace
}  // namespace aobench
