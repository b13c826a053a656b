// Implements: the everyday-use behaviour of the CLI end to end: `train` prints the
// config compactly once and ends with a summary line; an experiment file given to `train` says to use
// `aobench run`; `eval` writes progress lines with elapsed time, rate and ETA into a log; `eval --hf`
// evaluates a Hugging Face GPT-2 folder directly and records its loaded shape; `train` records the run
// (paradigm, parameters, tokens, training FLOPs) in its results.json; two reports of one folder take turns.
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "datasets/token_file.h"
#include "harness/registry.h"
#include "harness/run_dir.h"
#include "harness/tasks.h"
#include "reports/results.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

// `cd dir && env aobench args` (tests/test_util.h).
int run_in(const std::string& dir, const std::string& env, const std::string& args, std::string* output) {
  return testing::run_aobench_in(dir, args, output, env);
}

namespace fs = std::filesystem;

std::vector<uint32_t> bytes_of(size_t n, uint32_t seed) {
  std::vector<uint32_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = uint32_t("the cat sat on the mat. "[(i * 7 + seed) % 24]);
  return out;
}

class EverydayUse : public ::testing::Test {
 protected:
  void SetUp() override {
    bool have_gpt = false;
    for (const auto& p : PluginRegistry::instance().plugins()) have_gpt |= p.name == "gpt";
    if (!have_gpt) GTEST_SKIP() << "the gpt plugin is not built";
    write_token_file(tmp_.file("train.bin"), bytes_of(8000, 0), 256);
    write_token_file(tmp_.file("val.bin"), bytes_of(2000, 5), 256);
  }
  // A 6-step debug GPT run in tmp_/run.
  std::string train(std::string* out) {
    const nlohmann::json config = {
        {"model", {{"plugin", "gpt"}, {"flavour", "debug"}, {"block_size", 32}, {"n_embd", 32}}},
        {"data", {{"train", tmp_.file("train.bin")}, {"val", tmp_.file("val.bin")}, {"tokenizer", "bytes"}}},
        {"train",
         {{"out_dir", tmp_.file("run")},
          {"device", "cpu"},
          {"max_iters", 6},
          {"eval_interval", 3},
          {"eval_iters", 1},
          {"log_interval", 3},
          {"warmup_iters", 1},
          {"lr_decay_iters", 6}}}};
    testing::write_text(tmp_.file("config.json"), config.dump(2));
    return std::to_string(run_in(tmp_.path.string(), "", "train --config config.json", out));
  }
  testing::TempDir tmp_;
};

// Point 8: the changed keys only, in a few lines; point 7: the final summary line of `train`.
TEST_F(EverydayUse, TrainPrintsTheChangedKeysOnceAndEndsWithASummary) {
  std::string out;
  ASSERT_EQ(train(&out), "0") << out;
  const size_t cfg = out.find("config: gpt/debug; keys that differ from the defaults (all keys: ");
  ASSERT_NE(cfg, std::string::npos) << out;
  EXPECT_EQ(out.find("config:", cfg + 1), std::string::npos) << "printed twice:\n" << out;
  EXPECT_NE(out.find("\n  model: block_size=32 n_embd=32\n", cfg), std::string::npos) << out;
  EXPECT_NE(out.find("max_iters=6", cfg), std::string::npos) << out;
  const std::string block = out.substr(cfg, out.find("model gpt/debug", cfg) - cfg);
  EXPECT_LE(std::count(block.begin(), block.end(), '\n'), 8) << block;  // was one line per leaf: 61
  for (const char* unchanged : {"beta1", "weight_decay", "n_layer", "nan_policy", "mc_steps"})
    EXPECT_EQ(block.find(unchanged), std::string::npos) << unchanged << "\n" << block;
  // "done: 6 steps, 1536 tokens (1536) in 1.2s; val loss best 4.1 (step 6), final 4.1; 71.0k parameters"
  const size_t done = out.find("done: 6 steps, " + std::to_string(6 * 8 * 32) + " tokens");
  ASSERT_NE(done, std::string::npos) << out;
  const std::string line = out.substr(done, out.find('\n', done) - done);
  EXPECT_NE(line.find("; val loss best "), std::string::npos) << line;
  EXPECT_NE(line.find(", final "), std::string::npos) << line;
  EXPECT_NE(line.find(" parameters; checkpoint "), std::string::npos) << line;
}

// Point 9: an experiment file is not a training config; the error says what to run.
TEST_F(EverydayUse, ExperimentFileGivenToTrainSaysUseRun) {
  for (const char* file : {"configs/quickstart.json", "configs/experiments/paradigms_tiny.json"}) {
    std::string out;
    const std::string path = std::string(AOBENCH_SOURCE_DIR) + "/" + file;
    EXPECT_EQ(run_in(tmp_.path.string(), "", "train --config " + path, &out), 2) << out;
    EXPECT_NE(out.find("is an experiment file"), std::string::npos) << out;
    EXPECT_NE(out.find("use `aobench run " + path + "`"), std::string::npos) << out;
    EXPECT_NE(testing::read_text(path).find("\"Run: aobench run "), std::string::npos) << file;
  }
}

// A trained run records itself in results.json (plugin, paradigm, parameters, tokens, training FLOPs), so its
// report names the paradigm before any evaluation; the evaluation merges its metrics into that record.
TEST_F(EverydayUse, TrainRecordsTheRunForItsReport) {
  std::string out;
  ASSERT_EQ(train(&out), "0") << out;
  const Results r = Results::load(tmp_.file("run/results.json"));
  ASSERT_EQ(r.runs.size(), 1u);
  const RunResults& run = r.runs.at("run");
  EXPECT_EQ(run.plugin, "gpt");
  EXPECT_EQ(run.flavour, "debug");
  EXPECT_EQ(run.paradigm, "autoregressive");
  EXPECT_EQ(run.steps, 6);
  EXPECT_EQ(run.tokens, 6 * 8 * 32);
  EXPECT_TRUE(run.metrics.empty());
  // Parameters and FLOPs from the plugin itself, built with the run's model section.
  auto model = PluginRegistry::instance().create("gpt");
  model->configure(run.config.at("model"));
  model->build(torch::kCPU);
  int64_t params = 0;
  for (const auto& p : model->module().parameters()) params += p.numel();
  EXPECT_EQ(run.params, params);
  EXPECT_DOUBLE_EQ(run.train_flops, model->flops_per_token(32) * 6 * 8 * 32);
  EXPECT_GT(run.train_flops, 0);
  ASSERT_EQ(run_in(tmp_.path.string(), "", "report run", &out), 0) << out;
  const std::string row = "| run | gpt | debug | autoregressive | " + std::to_string(params) + " | 6 | 1536 | " +
                          flops_text(run.train_flops) + " |";
  EXPECT_NE(testing::read_text(tmp_.file("run/report/summary.md")).find(row), std::string::npos) << row;
  ASSERT_EQ(run_in(tmp_.path.string(), "", "eval --run run --data v=val.bin", &out), 0) << out;
  // Without --data: the run's data.val, under its file name.
  ASSERT_EQ(run_in(tmp_.path.string(), "", "eval --run run", &out), 0) << out;
  EXPECT_NE(out.find("(the run's data.val)"), std::string::npos) << out;
  EXPECT_TRUE(Results::load((tmp_.path / "run/results.json").string()).runs.at("run").metrics.count("val/ppl")) << out;
  const Results evaluated = Results::load(tmp_.file("run/results.json"));
  EXPECT_DOUBLE_EQ(evaluated.runs.at("run").train_flops, run.train_flops);  // kept by the merge
  EXPECT_EQ(evaluated.runs.at("run").metrics.at("v/ppl").params.to_json(),
            (nlohmann::json{{"family", "ppl"}, {"mode", "l2r"}}));
}

// Lock files go when their holder is done, and removing one cannot let two writers in: a waiter that locked the
// removed file takes the new one, and a third writer then finds it held.
TEST_F(EverydayUse, LockFilesAreRemovedAndStayExclusive) {
  const std::string path = tmp_.file("x.lock");
  auto first = std::make_unique<DirLock>(path, "first", /*wait=*/false);
  EXPECT_TRUE(fs::exists(path));
  std::unique_ptr<DirLock> second;
  std::thread waiter([&] { second = std::make_unique<DirLock>(path, "second", /*wait=*/true); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the waiter blocks on the first's file
  first.reset();
  waiter.join();
  ASSERT_TRUE(second);
  EXPECT_TRUE(fs::exists(path));
  EXPECT_THROW(DirLock(path, "third", /*wait=*/false), ConfigError);  // the second holds the file at the path
  second.reset();
  EXPECT_FALSE(fs::exists(path));
  // A command leaves none behind: train, eval (its results lock), report.
  std::string out;
  ASSERT_EQ(train(&out), "0") << out;
  ASSERT_EQ(run_in(tmp_.path.string(), "", "eval --run run --data v=val.bin", &out), 0) << out;
  ASSERT_EQ(run_in(tmp_.path.string(), "", "report run", &out), 0) << out;
  for (const auto& e : fs::recursive_directory_iterator(tmp_.path))
    EXPECT_NE(e.path().extension(), ".lock") << e.path();
}

// One report writer per folder: while another holds <dir>/.report.lock, a report waits, then renders.
TEST_F(EverydayUse, ReportWaitsForAnotherReportOfTheSameFolder) {
  std::string out;
  ASSERT_EQ(train(&out), "0") << out;
  auto held = std::make_unique<DirLock>(tmp_.file("run/.report.lock"), "the test", /*wait=*/false);
  std::string error;
  std::thread second([&] {
    try {
      run_report({tmp_.file("run")});
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // in-process, the report itself takes ms
  EXPECT_FALSE(fs::exists(tmp_.file("run/report/summary.md"))) << "the report was written while the lock was held";
  held.reset();
  second.join();
  EXPECT_EQ(error, "");
  EXPECT_TRUE(fs::exists(tmp_.file("run/report/summary.md")));
}

// Point 7: in a log, eval writes periodic progress lines with elapsed time, rate and ETA.
TEST_F(EverydayUse, EvalWritesProgressLinesIntoALog) {
  std::string out;
  ASSERT_EQ(train(&out), "0") << out;
  ASSERT_EQ(run_in(tmp_.path.string(), "AOBENCH_PROGRESS_INTERVAL=0",
                   "eval --run run --data v=val.bin --set eval.batch_size=4", &out),
            0)
      << out;
  // 2000 tokens → 62 windows of 32, in batches of 4: a line per batch with interval 0.
  EXPECT_NE(out.find("] eval v l2r: 4/62 windows (6%), "), std::string::npos) << out;
  EXPECT_NE(out.find(" windows/s, ETA "), std::string::npos) << out;
  EXPECT_NE(out.find("eval v l2r: 62 windows in "), std::string::npos) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << "a live line in a log file";
  EXPECT_NE(run_in(tmp_.path.string(), "AOBENCH_PROGRESS_INTERVAL=soon", "eval --run run --data v=val.bin", &out), 0);
  EXPECT_NE(out.find("AOBENCH_PROGRESS_INTERVAL"), std::string::npos) << out;
}

// Point 11: a Hugging Face folder evaluated directly; results and config record the loaded shape.
TEST_F(EverydayUse, EvalHfEvaluatesAFolderWithoutATrainingRun) {
  const std::string hf = std::string(AOBENCH_TEST_DATA) + "/hf_tiny_gpt2";  // 2 layers, d 32, T 64, V 300
  std::string out;
  ASSERT_EQ(run_in(tmp_.path.string(), "", "eval --hf " + hf + " --data v=val.bin", &out), 0) << out;
  EXPECT_NE(out.find("eval: Hugging Face GPT-2 " + hf + " (2 layers, 32 wide, vocab 300)"), std::string::npos) << out;
  const fs::path dir = tmp_.path / "runs/hf/hf_tiny_gpt2";
  const Results r = Results::load((dir / "results.json").string());
  ASSERT_TRUE(r.runs.count("hf_tiny_gpt2")) << out;
  const RunResults& run = r.runs.at("hf_tiny_gpt2");
  EXPECT_EQ(run.plugin, "gpt");
  EXPECT_EQ(run.flavour, "hf");
  EXPECT_EQ(run.steps, 0);
  for (const auto& [key, value] : std::map<std::string, int64_t>{
           {"n_layer", 2}, {"n_head", 2}, {"n_embd", 32}, {"n_inner", 0}, {"block_size", 64}, {"vocab_size", 300}})
    EXPECT_EQ(run.config["model"][key], value) << key;
  EXPECT_EQ(run.config["model"]["activation"], "gelu_tanh");
  ASSERT_TRUE(run.metrics.count("v/ppl"));
  const MetricValue& ppl = run.metrics.at("v/ppl");
  EXPECT_TRUE(std::isfinite(ppl.value) && ppl.value > 1.0) << ppl.value;
  EXPECT_EQ(ppl.n, 2000 / 64);
  // The same shape in the config beside it, so `aobench report` treats the folder as a run.
  EXPECT_EQ(nlohmann::json::parse(testing::read_text((dir / "config.resolved.json").string()))["model"]["n_embd"], 32);
  ASSERT_EQ(run_in(tmp_.path.string(), "", "report runs/hf/hf_tiny_gpt2", &out), 0) << out;
  EXPECT_NE(testing::read_text((dir / "report/summary.md").string()).find("| hf_tiny_gpt2 | l2r exact | all |"),
            std::string::npos);
  // --hf and --run together, or a folder that is not a HF model: named errors.
  EXPECT_EQ(run_in(tmp_.path.string(), "", "eval --hf " + hf + " --run x --data v=val.bin", &out), 2) << out;
  EXPECT_NE(out.find("--run RUN_DIR or --hf FOLDER"), std::string::npos) << out;
  EXPECT_NE(run_in(tmp_.path.string(), "", "eval --hf " + tmp_.path.string() + " --data v=val.bin", &out), 0);
  EXPECT_NE(out.find("is not a Hugging Face GPT-2 folder"), std::string::npos) << out;
}

}  // namespace
}  // namespace aobench
