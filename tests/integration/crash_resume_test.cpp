// Implements: reliability end to end through the aobench binary (DESIGN.md §3): a run killed
// with SIGKILL (no handler runs) and resumed in a new process logs the same losses bitwise as a run that
// was never interrupted; nan_policy "stop" fails with the step, the offending tensor and a hint and leaves
// the last good checkpoint loadable, "skip" finishes and counts the skipped batches; SIGTERM checkpoints
// and exits 143 (128 + 15) with the "resume with" command.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "core/config.h"
#include "datasets/token_file.h"
#include "harness/registry.h"
#include "harness/train/checkpoint.h"
#include "tests/test_util.h"

namespace aobench {
namespace {
namespace fs = std::filesystem;
using aobench::testing::TempDir;
using Clock = std::chrono::steady_clock;

// A repetitive English-like byte corpus (as in train_test.cpp): learnable, deterministic.
std::vector<uint32_t> byte_corpus(size_t n_bytes, uint32_t salt) {
  const char* words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat ", "and ", "dog ", "ran ", "far ", "away. "};
  std::vector<uint32_t> out;
  uint32_t x = 12345 + salt;
  while (out.size() < n_bytes) {
    x = x * 1103515245u + 12345u;
    for (const char* c = words[(x >> 16) % 11]; *c; ++c) out.push_back(uint8_t(*c));
  }
  out.resize(n_bytes);
  return out;
}

using aobench::testing::run_aobench_child;
using aobench::testing::spawn_aobench;

// Polls (every 2 ms, at most `timeout_s`) until `ready()` or the child exits; true when ready first.
template <class F>
bool wait_until(pid_t pid, F ready, double timeout_s, bool* exited) {
  const auto t0 = Clock::now();
  *exited = false;
  while (std::chrono::duration<double>(Clock::now() - t0).count() < timeout_s) {
    if (ready()) return true;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      *exited = true;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

int64_t step_of_dir(const std::string& ckpt_dir) {
  const std::string name = fs::path(ckpt_dir).filename().string();
  return name.rfind("step_", 0) == 0 ? std::stoll(name.substr(5)) : -1;
}

class CrashResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bool have_gpt = false;
    for (const auto& p : PluginRegistry::instance().plugins()) have_gpt |= p.name == "gpt";
    if (!have_gpt) GTEST_SKIP() << "the gpt plugin is not built (libaobench_gpt.so not found)";
    train_path_ = dir_.file("train.bin");
    val_path_ = dir_.file("val.bin");
    write_token_file(train_path_, byte_corpus(20000, 0), 256);
    write_token_file(val_path_, byte_corpus(4000, 1), 256);
  }

  // Experiment JSON for the debug GPT shrunk to test size (keys set only where the flavour has them).
  nlohmann::json experiment(const std::string& out_dir, int64_t max_iters) const {
    const nlohmann::json defaults = flavour_defaults("gpt", "debug");
    nlohmann::json model = {{"plugin", "gpt"}, {"flavour", "debug"}};
    const std::map<std::string, int64_t> shrink = {{"block_size", 32}, {"n_layer", 2}, {"n_head", 2}, {"n_embd", 32}};
    for (const auto& [k, v] : shrink)
      if (defaults.contains(k)) model[k] = v;
    if (defaults.contains("dropout")) model["dropout"] = 0.0;
    return {{"model", model},
            {"data", {{"train", train_path_}, {"val", val_path_}}},
            {"train",
             {{"out_dir", out_dir},
              {"device", "cpu"},
              {"batch_size", 8},
              {"max_iters", max_iters},
              {"learning_rate", 3e-3},
              {"min_lr", 3e-4},
              {"warmup_iters", 2},
              {"lr_decay_iters", 40},
              {"log_interval", 1},
              {"eval_interval", 0},
              {"eval_iters", 2},
              {"checkpoint_interval", 4},
              {"keep_checkpoints", 2}}}};
  }

  std::string write_experiment(const std::string& name, const nlohmann::json& e) const {
    const std::string path = dir_.file(name);
    aobench::testing::write_text(path, e.dump(2));
    return path;
  }

  // step → metrics.jsonl record of that step (the training lines only).
  static std::map<int64_t, nlohmann::json> train_records(const std::string& run_dir) {
    std::map<int64_t, nlohmann::json> out;
    std::ifstream in(run_dir + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line);
      if (!j.contains("loss/train")) continue;
      EXPECT_EQ(out.count(j["step"].get<int64_t>()), 0u) << "duplicate step in " << run_dir;
      out[j["step"].get<int64_t>()] = j;
    }
    return out;
  }

  TempDir dir_;
  std::string train_path_, val_path_;
};

TEST_F(CrashResumeTest, KillNineThenResumeIsBitwiseIdentical) {
  // Enough steps that the run is still going when its first checkpoint appears (a step of this model
  // takes milliseconds; the test polls every 2 ms and kills at once).
  const int64_t N = 48;
  const std::string straight = dir_.file("A"), crashed = dir_.file("B");
  const std::string cfg_a = write_experiment("a.json", experiment(straight, N));
  const std::string cfg_b = write_experiment("b.json", experiment(crashed, N));
  std::string out;
  ASSERT_EQ(run_aobench_child({"train", "--config", cfg_a}, &out), 0) << out;

  const std::string log_b = dir_.file("b1.log");
  const pid_t pid = spawn_aobench({"train", "--config", cfg_b}, log_b);
  ASSERT_GT(pid, 0);
  bool exited = false;
  const bool have_ckpt = wait_until(
      pid, [&] { return latest_checkpoint(crashed).has_value(); }, 120, &exited);
  // Still running (not reaped) at the moment of the kill: the kill lands mid-training.
  const bool running = !exited && ::waitpid(pid, nullptr, WNOHANG) == 0;
  ::kill(pid, SIGKILL);
  int status = 0;
  if (!exited) ::waitpid(pid, &status, 0);
  ASSERT_TRUE(have_ckpt) << "no checkpoint appeared before the child exited:\n" << aobench::testing::read_text(log_b);
  ASSERT_TRUE(running) << aobench::testing::read_text(log_b);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  const std::string log_killed = aobench::testing::read_text(log_b);
  EXPECT_EQ(log_killed.find("done:"), std::string::npos) << "training finished before the kill:\n" << log_killed;
  ASSERT_TRUE(latest_checkpoint(crashed).has_value());
  const int64_t killed_at = step_of_dir(*latest_checkpoint(crashed));
  EXPECT_GE(killed_at, 4);
  EXPECT_LT(killed_at, N) << "the kill landed after training finished";

  // A partial checkpoint directory (as a kill during a save leaves) with a newer step and a complete-looking
  // state.json must never be taken for a checkpoint.
  const fs::path ckpts = fs::path(crashed) / "checkpoints";
  fs::copy(*latest_checkpoint(crashed), ckpts / ".tmp_step_46", fs::copy_options::recursive);
  EXPECT_EQ(step_of_dir(*latest_checkpoint(crashed)), killed_at);

  ASSERT_EQ(run_aobench_child({"train", "--config", cfg_b, "--resume"}, &out), 0) << out;
  EXPECT_NE(out.find("resumed from " + (ckpts / ("step_" + std::to_string(killed_at))).string()), std::string::npos)
      << out;
  EXPECT_NE(out.find("done: " + std::to_string(N) + " steps"), std::string::npos) << out;

  // Every step's training loss (and lr, grad norm, token count) equals the uninterrupted run's bitwise:
  // the JSON number text is compared, and the writer prints doubles round-trip exact.
  const auto a = train_records(straight), b = train_records(crashed);
  ASSERT_EQ(a.size(), size_t(N));
  ASSERT_EQ(b.size(), size_t(N));
  for (int64_t step = 1; step <= N; ++step) {
    ASSERT_TRUE(a.count(step) && b.count(step)) << "step " << step;
    for (const char* k : {"loss/train", "lr", "grad_norm", "tokens", "nan_skips"})
      EXPECT_EQ(a.at(step)[k].dump(), b.at(step)[k].dump()) << k << " at step " << step;
  }
  EXPECT_EQ(a.at(N)["loss/train"].get<double>(), b.at(N)["loss/train"].get<double>());

  // The final checkpoints load, hold the same step, and the same weights bitwise.
  ASSERT_TRUE(latest_checkpoint(straight).has_value());
  ASSERT_TRUE(latest_checkpoint(crashed).has_value());
  EXPECT_EQ(step_of_dir(*latest_checkpoint(crashed)), N);
  CheckpointData ca, cb;
  ASSERT_NO_THROW(ca = load_checkpoint(*latest_checkpoint(straight)));
  ASSERT_NO_THROW(cb = load_checkpoint(*latest_checkpoint(crashed)));
  EXPECT_EQ(cb.state["step"].get<int64_t>(), N);
  ASSERT_EQ(ca.model.size(), cb.model.size());
  for (const auto& [name, t] : ca.model) {
    ASSERT_TRUE(cb.model.count(name)) << name;
    EXPECT_TRUE(torch::equal(t, cb.model.at(name))) << name;
  }
  // The planted partial directory is still not a checkpoint, and never was resumed from.
  EXPECT_EQ(out.find(".tmp_step_"), std::string::npos) << out;
}

TEST_F(CrashResumeTest, NonFiniteStopsWithTheLastGoodCheckpointOrIsSkipped) {
  // Honest trigger: AdamW with eps = 0 divides 0 by 0 for every weight whose gradient is exactly zero
  // (the padding rows of the tied wte/lm_head, never scored), so its first update writes NaN into them and
  // the next step's loss or gradients are non-finite.
  auto nan_experiment = [&](const std::string& run, const std::string& policy) {
    auto e = experiment(run, 12);
    e["train"]["eps"] = 0.0;
    e["train"]["grad_clip"] = 0.0;
    e["train"]["checkpoint_interval"] = 1;
    e["train"]["keep_checkpoints"] = 0;
    e["train"]["nan_policy"] = policy;
    return e;
  };
  const std::string stop_run = dir_.file("stop");
  std::string out;
  const int rc =
      run_aobench_child({"train", "--config", write_experiment("stop.json", nan_experiment(stop_run, "stop"))}, &out);
  EXPECT_EQ(rc, 6) << "TrainingError exits 6:\n" << out;
  const size_t at = out.find("error: non-finite ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string msg = out.substr(at, out.find('\n', at) - at);
  EXPECT_TRUE(msg.find("non-finite loss at step ") != std::string::npos ||
              msg.find("non-finite gradient of parameter '") != std::string::npos)
      << "the message names neither the loss nor a parameter: " << msg;
  const size_t sp = msg.find(" at step ");
  ASSERT_NE(sp, std::string::npos) << msg;
  const int64_t failed_step = std::stoll(msg.substr(sp + 9));  // 0-based index of the step that failed
  EXPECT_GE(failed_step, 1) << "the first update is finite: " << msg;
  EXPECT_NE(out.find("\nHINT: "), std::string::npos) << out;
  EXPECT_NE(out.find(stop_run + "/checkpoints"), std::string::npos) << "the hint names the checkpoint dir:\n" << out;
  for (const char* crash : {"terminate called", "Segmentation", "Aborted"})
    EXPECT_EQ(out.find(crash), std::string::npos) << out;

  // The last good checkpoint: every completed step was saved; `latest` names the last one before the
  // failure, which loads (checksums verified) and holds finite weights.
  ASSERT_TRUE(latest_checkpoint(stop_run).has_value());
  EXPECT_EQ(aobench::testing::read_text(stop_run + "/checkpoints/latest"),
            "step_" + std::to_string(failed_step) + "\n");
  CheckpointData good;
  ASSERT_NO_THROW(good = load_checkpoint(*latest_checkpoint(stop_run)));
  EXPECT_EQ(good.state["step"].get<int64_t>(), failed_step);
  EXPECT_FALSE(fs::exists(stop_run + "/checkpoints/step_" + std::to_string(failed_step + 1)));
  const auto stop_records = train_records(stop_run);
  ASSERT_EQ(stop_records.size(), size_t(failed_step));
  for (const auto& [step, j] : stop_records) EXPECT_TRUE(j["loss/train"].is_number()) << "step " << step;

  // "skip": the run finishes; each non-finite batch is reported and counted in metrics.jsonl.
  const std::string skip_run = dir_.file("skip");
  ASSERT_EQ(
      run_aobench_child({"train", "--config", write_experiment("skip.json", nan_experiment(skip_run, "skip"))}, &out),
      0)
      << out;
  EXPECT_NE(out.find("done: 12 steps"), std::string::npos) << out;
  const auto skip_records = train_records(skip_run);
  ASSERT_EQ(skip_records.size(), 12u);
  int64_t skipped = 0, prev = 0;
  for (const auto& [step, j] : skip_records) {
    const int64_t n = j["nan_skips"].get<int64_t>();
    EXPECT_TRUE(n == prev || n == prev + 1) << "step " << step;  // one step skips at most one batch
    if (n == prev + 1) {
      EXPECT_NE(out.find("step " + std::to_string(step - 1) + ": non-finite "), std::string::npos)
          << "no skip message for step " << step << ":\n"
          << out;
    }
    prev = n;
  }
  skipped = prev;
  EXPECT_GE(skipped, 1) << out;
  EXPECT_EQ(skip_records.at(failed_step)["nan_skips"].get<int64_t>(), 0) << "the same steps were finite";
  EXPECT_EQ(skip_records.at(failed_step + 1)["nan_skips"].get<int64_t>(), 1);
  EXPECT_NE(out.find("batch skipped (" + std::to_string(skipped) + " so far)"), std::string::npos) << out;
  EXPECT_NE(out.find("| skipped " + std::to_string(skipped)), std::string::npos) << out;
  ASSERT_TRUE(latest_checkpoint(skip_run).has_value());
  CheckpointData last;
  ASSERT_NO_THROW(last = load_checkpoint(*latest_checkpoint(skip_run)));
  EXPECT_EQ(last.state["nan_skips"].get<int64_t>(), skipped);
}

TEST_F(CrashResumeTest, SigtermWritesACheckpointAndExits143) {
  const std::string run = dir_.file("run");
  auto e = experiment(run, 1000000);
  e["train"]["checkpoint_interval"] = 0;
  e["train"]["max_seconds"] = 60;  // safety net if the signal were lost
  const std::string cfg = write_experiment("term.json", e);
  const std::string log = dir_.file("term.log");
  const pid_t pid = spawn_aobench({"train", "--config", cfg}, log);
  ASSERT_GT(pid, 0);
  // The handler is installed before the first step, so a metrics line means SIGTERM reaches it.
  bool exited = false;
  const bool training = wait_until(
      pid,
      [&] { return aobench::testing::read_text(run + "/metrics.jsonl").find("\"loss/train\"") != std::string::npos; },
      120, &exited);
  int status = 0;
  if (!exited) {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, &status, 0);
  }
  const std::string out = aobench::testing::read_text(log);
  ASSERT_TRUE(training) << out;
  ASSERT_TRUE(WIFEXITED(status)) << "died of a signal: " << status << "\n" << out;
  EXPECT_EQ(WEXITSTATUS(status), 143) << out;
  const size_t at = out.find("interrupted at step ");
  ASSERT_NE(at, std::string::npos) << out;
  const int64_t stopped = std::stoll(out.substr(at + 20));
  EXPECT_GE(stopped, 1);
  EXPECT_NE(out.find("resume with: aobench train --config " + run + "/config.resolved.json --resume"),
            std::string::npos)
      << out;
  ASSERT_TRUE(latest_checkpoint(run).has_value());
  EXPECT_EQ(step_of_dir(*latest_checkpoint(run)), stopped);
  CheckpointData data;
  ASSERT_NO_THROW(data = load_checkpoint(*latest_checkpoint(run)));
  EXPECT_EQ(data.state["step"].get<int64_t>(), stopped);

  // The printed command works: the run continues from that checkpoint (two more steps).
  const std::string ckpt = *latest_checkpoint(run);
  e["train"]["max_iters"] = stopped + 2;
  e["train"]["max_seconds"] = 0;
  std::string out2;
  ASSERT_EQ(run_aobench_child({"train", "--config", write_experiment("term2.json", e), "--resume"}, &out2), 0) << out2;
  EXPECT_NE(out2.find("resumed from " + ckpt + " at step " + std::to_string(stopped)), std::string::npos) << out2;
  EXPECT_NE(out2.find("done: " + std::to_string(stopped + 2) + " steps"), std::string::npos) << out2;
}

}  // namespace
}  // namespace aobench
