// Implements: tests of the typed experiment (harness/experiment/experiment.h) and what it is made of: config
// overrides (Overrides, core/config.h) given as --set text or as JSON patches, prepare entries read into a
// PrepareSpec (datasets/prepare.h), and load_experiment checking every section before any work.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/config.h"
#include "core/errors.h"
#include "datasets/prepare.h"
#include "harness/experiment/experiment.h"
#include "harness/experiment/plan.h"
#include "harness/registry.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

// Runs `f`, which must throw ConfigError with every one of `parts` in its message or its hint.
template <class F>
void expect_config_error(F f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    const std::string text = std::string(e.what()) + " | " + e.hint();
    for (const auto& p : parts) EXPECT_NE(text.find(p), std::string::npos) << text;
  }
}

TEST(Overrides, SetTextAndJsonPatchesApplyInOrderAndNameTheirOrigin) {
  Overrides o = Overrides::from_sets({"train.learning_rate=3e-4", "eval.mode=random"});
  o.add({{"eval", {{"mode", "ensemble"}, {"ensemble", {1, 2}}}}}, "x.json: eval.modes[1]");
  json c = base_config();
  o.apply_to(c);
  EXPECT_DOUBLE_EQ(c["train"]["learning_rate"].get<double>(), 3e-4);
  EXPECT_EQ(c["eval"]["mode"], "ensemble");  // the later override wins
  ASSERT_NE(o.find("eval.mode"), nullptr);
  EXPECT_EQ(*o.find("eval.mode"), "ensemble");
  EXPECT_EQ(o.find("model.plugin"), nullptr);
  EXPECT_EQ(
      o.command_line(),
      " --set train.learning_rate=3e-4 --set eval.mode=random --set eval.ensemble=[1,2] --set eval.mode=\"ensemble\"");
  // An unknown key names where it came from: the flag as typed, or the file's entry.
  expect_config_error(
      [] {
        json c2 = base_config();
        Overrides::from_sets({"eval.ordrs=4"}).apply_to(c2);
      },
      {"--set eval.ordrs=4", "unknown key 'eval.ordrs'", "eval.orders"});
  expect_config_error(
      [] {
        json c2 = base_config();
        Overrides().add({{"eval", {{"ordrs", 4}}}}, "x.json: eval.modes[0]").apply_to(c2);
      },
      {"x.json: eval.modes[0]", "eval.ordrs"});
  expect_config_error([] { Overrides().add(json::array({1}), "x.json: eval.modes[0]"); }, {"must be an object"});
  expect_config_error([] { Overrides::from_sets({"train.max_iters"}); }, {"key.path=value"});
}

TEST(Overrides, RequireWithinAcceptsSectionsAndPathsOnly) {
  const Overrides ok = Overrides::from_sets({"sample.top_p=0.9", "train.device=cpu"});
  EXPECT_NO_THROW(ok.require_within({"sample", "train.device"}, "only sample", "h"));
  expect_config_error([&] { ok.require_within({"sample"}, "takes only sample.* overrides", "h"); },
                      {"--set train.device=cpu", "takes only sample.*"});
  // "train.device" is a path, not a prefix of "train.devices"-like keys or of its siblings.
  expect_config_error([] { Overrides::from_sets({"train.dtype=float32"}).require_within({"train.device"}, "no", "h"); },
                      {"no"});
}

TEST(PrepareSpec, FromJsonReadsTheCommandsOptionsWithEitherSpelling) {
  const json entry = json::parse(R"({"name": "d", "format": "text", "input": ["a.txt", "b.txt.xz"],
      "output": "out/d.bin", "vocab_dir": "v", "packing": "reference", "window": 128,
      "val-output": "out/v.bin", "val_fraction": 0.1, "max-rows": 5, "threads": 2})");
  const PrepareSpec s = PrepareSpec::from_json(entry, "x.json: prepare[0]");
  EXPECT_EQ(s.format, "text");
  EXPECT_EQ(s.inputs, (std::vector<std::string>{"a.txt", "b.txt.xz"}));
  EXPECT_EQ(s.output, "out/d.bin");
  EXPECT_EQ(s.vocab_dir, "v");
  EXPECT_EQ(s.packing, "reference");
  EXPECT_EQ(s.window, 128);
  EXPECT_EQ(s.val_output, "out/v.bin");
  EXPECT_DOUBLE_EQ(s.val_fraction, 0.1);
  EXPECT_EQ(s.max_rows, 5);
  EXPECT_EQ(s.threads, 2);
  EXPECT_EQ(s.tokenizer, "gpt2");  // the command's default
  EXPECT_EQ(PrepareSpec::from_json(json::parse(R"({"format": "lines", "input": "a", "output": "o.bin"})"), "w").inputs,
            std::vector<std::string>{"a"});
  expect_config_error(
      [] {
        PrepareSpec::from_json(json::parse(R"({"format": "text", "input": "a", "output": "o",
                                                   "windw": 128})"),
                               "x.json: prepare[2]");
      },
      {"x.json: prepare[2]", "unknown key 'windw'", "window"});
  expect_config_error(
      [] {
        PrepareSpec::from_json(json::parse(R"({"format": "text", "input": "a", "output": "o",
                                                   "window": "128"})"),
                               "x.json: prepare[0]");
      },
      {"prepare[0].window", "must be an integer"});
  expect_config_error(
      [] {
        PrepareSpec::from_json(json::parse(R"({"format": "text", "input": "a", "output": "o",
                                                   "packing": "refrence"})"),
                               "x.json: prepare[1]");
      },
      {"x.json: prepare[1]", "unknown --packing 'refrence'"});
  expect_config_error(
      [] {
        PrepareSpec::from_json(json::parse(R"({"format": "text", "input": "a", "output": "o",
                                                   "val_output": "v", "val-output": "w"})"),
                               "p");
      },
      {"'val-output' is given twice"});
  expect_config_error([] { PrepareSpec::from_json(json::parse(R"({"format": "text", "output": "o"})"), "p"); },
                      {"p needs \"input\""});
  expect_config_error(
      [] { PrepareSpec::from_json(json::parse(R"({"format": "text", "input": [1], "output": "o"})"), "p"); },
      {"p.input must be a string"});
}

bool have_plugin(const std::string& name) {
  for (const auto& p : PluginRegistry::instance().plugins())
    if (p.name == name) return true;
  return false;
}
bool have_gpt() { return have_plugin("gpt"); }

// A small experiment file of two gpt jobs, two seeds and two eval modes.
json small_experiment() {
  return json::parse(R"({
    "out_dir": "runs/exp_test",
    "seeds": 2,
    "prepare": [{"name": "d", "format": "lines", "input": "{here}/in.txt", "output": "{out_dir}/d.bin",
                 "tokenizer": "bytes"}],
    "common": {"model": {"plugin": "gpt", "flavour": "debug"}, "data": {"train": "{out_dir}/d.bin"}},
    "jobs": [{"name": "a"}, {"name": "b", "config": {"train": {"learning_rate": 1e-3}}}],
    "eval": {"datasets": {"x": "{out_dir}/d.bin", "y": "{out_dir}/d.bin"},
             "modes": [{"mode": "l2r"}, {"mode": "random", "orders": 2, "jobs": ["b"], "datasets": ["y"]}]}
  })");
}

TEST(Experiment, GpuSharingIsNamedAtTheTopInATierOrBySet) {
  if (!have_gpt()) GTEST_SKIP() << "the gpt plugin is not built";
  testing::TempDir tmp;
  const std::string file = tmp.file("e.json");
  json exp = small_experiment();
  testing::write_text(file, exp.dump());
  EXPECT_EQ(load_experiment(file, {}).gpu_sharing, GpuSharing::kAuto);
  EXPECT_EQ(load_experiment(file, {"gpu_sharing=time_slicing"}).gpu_sharing, GpuSharing::kTimeSlicing);
  exp["gpu_sharing"] = "time_slicing";
  exp["tiers"] = {{"packed", {{"gpu_sharing", "mps"}}}};
  testing::write_text(file, exp.dump());
  EXPECT_EQ(load_experiment(file, {}).gpu_sharing, GpuSharing::kTimeSlicing);
  EXPECT_EQ(load_experiment(file, {"tier=packed"}).gpu_sharing, GpuSharing::kMps);
  exp["gpu_sharing"] = 1;
  testing::write_text(file, exp.dump());
  expect_config_error([&] { load_experiment(file, {}); }, {file + ": 'gpu_sharing': '1' is not a way to share a GPU"});
  expect_config_error([&] { load_experiment(file, {"gpu_sharing=on"}); }, {"'on' is not a way to share a GPU"});
}

TEST(Experiment, LoadResolvesRunsAndModesOnce) {
  if (!have_gpt()) GTEST_SKIP() << "the gpt plugin is not built";
  testing::TempDir tmp;
  const std::string file = tmp.file("e.json");
  testing::write_text(file, small_experiment().dump());
  const Experiment e = load_experiment(file, {"train.max_iters=3"});
  EXPECT_EQ(e.jobs, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(e.runs.size(), 4u);  // seed-major
  EXPECT_EQ(e.runs[1].name, "b");
  EXPECT_EQ(e.runs[2].name, "a_seed1");
  EXPECT_EQ(e.runs[3].config["train"]["max_iters"], 3);
  EXPECT_EQ(e.runs[3].config["train"]["learning_rate"], 1e-3);
  ASSERT_EQ(e.prepare.size(), 1u);
  EXPECT_EQ(e.prepare[0].spec.inputs.at(0), (tmp.path / "in.txt").string());
  EXPECT_EQ(e.prepare[0].spec.tokenizer, "bytes");
  ASSERT_EQ(e.modes.size(), 2u);
  EXPECT_TRUE(e.modes[0].applies_to("a"));
  EXPECT_FALSE(e.modes[1].applies_to("a"));
  ASSERT_EQ(e.modes[1].datasets.size(), 1u);
  EXPECT_EQ(e.modes[1].datasets[0].first, "y");
  EXPECT_EQ(e.modes[1].patch, json({{"mode", "random"}, {"orders", 2}}));
  // The key DONE.json records: the mode as written and the datasets it used (finished evals stay finished).
  EXPECT_EQ(
      e.modes[1].done_key(),
      json({{"mode", small_experiment()["eval"]["modes"][1]}, {"datasets", {{"y", "runs/exp_test/d.bin"}}}}).dump());
}

TEST(Experiment, EveryEntryIsCheckedBeforeAnyWork) {
  if (!have_gpt()) GTEST_SKIP() << "the gpt plugin is not built";
  testing::TempDir tmp;
  const std::string file = tmp.file("e.json");
  auto load = [&](const json& exp) {
    testing::write_text(file, exp.dump());
    return load_experiment(file, {});
  };
  json typo = small_experiment();
  typo["eval"]["modes"][1]["ordrs"] = 4;  // the last mode: fails now, not after the trainings before it
  expect_config_error([&] { load(typo); }, {"eval.modes[1]", "unknown key 'eval.ordrs'"});
  json bad_value = small_experiment();
  bad_value["eval"]["modes"][0]["orders"] = -1;
  expect_config_error([&] { load(bad_value); }, {"eval.orders"});
  json bad_prepare = small_experiment();
  bad_prepare["prepare"][0]["packng"] = "none";
  expect_config_error([&] { load(bad_prepare); }, {"prepare[0]", "unknown key 'packng'"});
  json judge = small_experiment();  // an infilling judge named by job: a gpt job of the file
  judge["eval"]["modes"][0] = {{"mode", "infill"}, {"infill", {{"fill", {"greedy"}}, {"judge", "c"}}}};
  expect_config_error([&] { load(judge); }, {"eval.modes[0]", "\"c\" is not a job of this experiment"});
  judge["eval"]["modes"][0]["infill"]["judge"] = "a";
  EXPECT_EQ(load(judge).modes[0].judge_job, "a");  // it runs after every training
  judge["jobs"][0]["config"] = {{"model", {{"plugin", "sigma_gpt"}}}};
  if (have_plugin("sigma_gpt"))
    expect_config_error([&] { load(judge); }, {"is a sigma_gpt job; the judge must be a gpt job"});
  testing::write_text(file, small_experiment().dump());
  expect_config_error([&] { load_experiment(file, {"train.learnin_rate=1"}); }, {"learning_rate"});
  EXPECT_FALSE(std::filesystem::exists("runs/exp_test"));  // nothing was created
}

// --plan: the model's own count and FLOP formula, the tokens of the config, a measured rate where a row of
// configs/measured_rates.json matches, nothing read or written.
TEST(Experiment, PlanCountsWhatTheRunsWillCost) {
  if (!have_gpt()) GTEST_SKIP() << "the gpt plugin is not built";
  testing::TempDir tmp;
  const std::string file = tmp.file("e.json");
  testing::write_text(file, small_experiment().dump());
  const Experiment e = load_experiment(file, {"train.max_iters=7", "train.batch_size=4"});
  const ExperimentPlan plan = plan_experiment(e, "NVIDIA H200");
  ASSERT_EQ(plan.jobs.size(), 2u);
  const JobPlan& a = plan.jobs[0];
  EXPECT_EQ(a.runs, 2);  // two seeds
  auto model = PluginRegistry::instance().create("gpt");
  model->configure(e.runs[0].config.at("model"));
  model->build(torch::kCPU);
  int64_t params = 0;
  for (const auto& p : model->module().parameters()) params += p.numel();
  EXPECT_EQ(a.params, params);
  EXPECT_EQ(a.tokens, 7 * 4 * model->block_size());
  EXPECT_DOUBLE_EQ(a.train_flops, model->flops_per_token(model->block_size()) * static_cast<double>(a.tokens));
  // A debug model is far smaller than every measured one: no rate is carried over to it.
  EXPECT_TRUE(std::isnan(a.gpu_hours));
  EXPECT_NE(a.rate_source.find("no estimate"), std::string::npos) << a.rate_source;
  EXPECT_GT(a.peak_gib, 0);
  const std::string text = plan.text();
  EXPECT_NE(text.find("4 runs of 2 jobs"), std::string::npos) << text;
  EXPECT_NE(text.find("(2 jobs without an estimate)"), std::string::npos) << text;
  EXPECT_FALSE(std::filesystem::exists("runs/exp_test")) << "a plan writes nothing";
  expect_config_error([&] { plan_experiment(e, "Tesla T4"); }, {"Tesla T4", "AOBENCH_PEAK_FLOPS"});
}

TEST(Experiment, PlanTakesAMeasuredRateWhereOneMatches) {
  bool have_ao = false;
  for (const auto& p : PluginRegistry::instance().plugins()) have_ao |= p.name == "ao_gpt";
  if (!have_ao) GTEST_SKIP() << "the ao_gpt plugin is not built";
  json exp = small_experiment();
  exp["common"] = json::parse(R"({"model": {"plugin": "ao_gpt", "flavour": "tiny", "block_size": 128},
                                  "data": {"train": "{out_dir}/d.bin"}, "train": {"batch_size": 16, "max_iters": 10}})");
  exp["eval"]["modes"] = json::array();
  testing::TempDir tmp;
  testing::write_text(tmp.file("e.json"), exp.dump());
  const ExperimentPlan plan = plan_experiment(load_experiment(tmp.file("e.json"), {}), "NVIDIA H200");
  EXPECT_DOUBLE_EQ(plan.jobs[0].tok_s, 590000);  // the H200 row of configs/measured_rates.json
  EXPECT_NEAR(plan.jobs[0].gpu_hours, 10.0 * 16 * 128 / 590000 / 3600, 1e-15);
  EXPECT_NE(plan.jobs[0].rate_source.find("measured [1]"), std::string::npos) << plan.jobs[0].rate_source;
  EXPECT_NE(plan.text().find("[1] H200 ao_gpt/tiny T=128 B=16"), std::string::npos) << plan.text();
  // Its runs (2 jobs × 2 seeds) one at a time: no packed line.
  EXPECT_EQ(plan.text().find("packed:"), std::string::npos) << plan.text();
  EXPECT_DOUBLE_EQ(plan.jobs[0].packed_tok_s, 867000);  // the row's "packed", through MPS (gpu_sharing auto)
  EXPECT_EQ(plan.jobs[0].packed_runs, 4);

  // Four runs at once: the summed rate of runs side by side, through MPS or in turns as gpu_sharing says.
  const double tokens = 4.0 * 10 * 16 * 128;
  for (const auto& [sharing, sum] :
       std::vector<std::pair<std::string, double>>{{"auto", 867000}, {"time_slicing", 552000}}) {
    const ExperimentPlan packed = plan_experiment(
        load_experiment(tmp.file("e.json"), {"runs_per_device=4", "gpu_sharing=" + sharing}), "NVIDIA H200");
    const std::string text = packed.text();
    char hours[32];
    std::snprintf(hours, sizeof hours, "%.3g GPU-hours", tokens / sum / 3600);
    EXPECT_NE(text.find(std::string("packed: runs_per_device 4, ") +
                        (sharing == "auto" ? "through MPS where nvidia-cuda-mps-control is on PATH: " : "in turns: ") +
                        hours),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("counted as one run alone"), std::string::npos) << text;
  }
  // Fewer runs at once than the measurement packed: those count as runs alone.
  const std::string three =
      plan_experiment(load_experiment(tmp.file("e.json"), {"runs_per_device=3"}), "NVIDIA H200").text();
  EXPECT_NE(three.find("2 jobs without a packed measurement for 3 runs at once counted as one run alone"),
            std::string::npos)
      << three;
}

}  // namespace
}  // namespace aobench
