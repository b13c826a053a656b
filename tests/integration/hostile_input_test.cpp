// Implements: hostile inputs, end to end through the aobench binary: truncated and
// wrong-magic token files, bad JSON, a key given twice, unknown keys, wrong types, NaN / negative
// hyper-parameters, a plugin built against another API version, a missing plugin directory, a checkpoint
// of another plugin or flavour, and a file-size limit hit while writing a checkpoint (the previous
// checkpoint survives).
// Classes: no input reaches a shell (.xz names, report run names), no crash (deep JSON, broken
// plugin libraries), nothing lost or overwritten silently (prepare over its input, one writer per run
// directory, concurrent evals, a damaged results.json, --resume with another config, stale `run` jobs),
// no hang (FIFO data, FIFO or device configs and prompt files, cost knobs, a second Ctrl-C), every error
// names the item (token ids past the vocabulary, huge numbers and folders, bad headers and windows), and
// `compare` as a trustworthy gate.
// Each case asserts: a non-zero exit (never a signal, never a sanitizer report), "error:" naming the
// offending file / key / value, and a "HINT:" line.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "core/config.h"
#include "core/config_types.h"
#include "core/errors.h"
#include "datasets/token_file.h"
#include "datasets/tokenizer.h"
#include "harness/registry.h"
#include "harness/resolve_config.h"
#include "harness/train/checkpoint.h"
#include "metrics/generation.h"
#include "metrics/likelihood.h"
#include "reports/results.h"
#include "tests/test_util.h"

namespace aobench {
namespace {
namespace fs = std::filesystem;
using aobench::testing::TempDir;

// `aobench args...` in a child (tests/test_util.h), optionally with another AOBENCH_PLUGIN_PATH and a
// file-size limit standing in for a full disk.
int run_child(const std::vector<std::string>& args, std::string* out, const char* plugin_path = nullptr,
              rlim_t fsize_limit = RLIM_INFINITY) {
  return aobench::testing::run_aobench_child(args, out, {plugin_path, fsize_limit});
}

// The contract of every hostile-input case.
void expect_clean_error(int rc, const std::string& out, int expected_rc, const std::vector<std::string>& names) {
  EXPECT_EQ(rc, expected_rc) << out;
  EXPECT_NE(out.find("error: "), std::string::npos) << out;
  EXPECT_NE(out.find("\nHINT: "), std::string::npos) << out;
  for (const auto& n : names)
    EXPECT_NE(out.find(n), std::string::npos) << "message does not name '" << n << "':\n" << out;
  for (const char* crash : {"Sanitizer", "runtime error:", "terminate called", "Segmentation", "Aborted"})
    EXPECT_EQ(out.find(crash), std::string::npos) << out;
}

std::vector<uint32_t> byte_corpus(size_t n) {
  std::vector<uint32_t> out(n);
  uint32_t x = 7;
  for (auto& t : out) t = 97 + ((x = x * 1103515245u + 12345u) >> 16) % 26;
  return out;
}

class HostileInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    train_ = dir_.file("train.bin");
    write_token_file(train_, byte_corpus(8000), 256);
  }

  bool have_plugin(const std::string& name) {
    for (const auto& p : PluginRegistry::instance().plugins())
      if (p.name == name) return true;
    return false;
  }

  // A debug GPT shrunk to test size, trained on a tiny byte corpus on CPU.
  nlohmann::json experiment(const std::string& out_dir, int64_t max_iters) const {
    const nlohmann::json defaults = flavour_defaults("gpt", "debug");
    nlohmann::json model = {{"plugin", "gpt"}, {"flavour", "debug"}};
    const std::map<std::string, int64_t> shrink = {{"block_size", 32}, {"n_layer", 2}, {"n_head", 2}, {"n_embd", 32}};
    for (const auto& [k, v] : shrink)
      if (defaults.contains(k)) model[k] = v;
    return {{"model", model},
            {"data", {{"train", train_}, {"tokenizer", "bytes"}}},
            {"train",
             {{"out_dir", out_dir},
              {"device", "cpu"},
              {"batch_size", 4},
              {"max_iters", max_iters},
              {"warmup_iters", 1},
              {"lr_decay_iters", 10},
              {"log_interval", 1},
              {"eval_interval", 0},
              {"checkpoint_interval", 0}}}};
  }

  std::string write_config(const std::string& name, const std::string& text) const {
    const std::string path = dir_.file(name);
    aobench::testing::write_text(path, text);
    return path;
  }

  // `aobench train` on an experiment whose data.train is `token_file`.
  int train_on(const std::string& token_file, std::string* out) {
    auto e = experiment(dir_.file("run_" + fs::path(token_file).filename().string()), 1);
    e["data"]["train"] = token_file;
    return run_child({"train", "--config", write_config("e.json", e.dump(2))}, out);
  }

  TempDir dir_;
  std::string train_;
};

TEST_F(HostileInputTest, TruncatedTokenFile) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built";
  const std::string bin = dir_.file("truncated.bin");
  write_token_file(bin, byte_corpus(4000), 256);
  fs::resize_file(bin, 1024 + 2 * 1000 + 1);  // header says 4000 uint16 tokens; 1000½ remain
  std::string out;
  expect_clean_error(train_on(bin, &out), out, 3, {bin});
}

TEST_F(HostileInputTest, TokenFileWithWrongMagic) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built";
  // Not a token file at all (odd size: not a raw nanoGPT uint16 file either).
  const std::string bin = write_config("notes.bin", "these are some notes, not tokens!");
  std::string out;
  expect_clean_error(train_on(bin, &out), out, 3, {bin, "header"});
  // Even size: readable as a header-less nanoGPT uint16 file, but its "ids" exceed the vocabulary.
  std::string text;
  while (text.size() < 4000) text += "Plain English text is not a token file. ";
  const std::string even = write_config("text.bin", text.substr(0, 4000));
  expect_clean_error(train_on(even, &out), out, 3, {even, "wrong magic", "vocab_size"});
}

TEST_F(HostileInputTest, ConfigWithBadJson) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built (defaults come from it)";
  const std::string cfg = write_config("bad.json", "{\"train\": {\"max_iters\": 3,}}");
  std::string out;
  expect_clean_error(run_child({"train", "--config", cfg}, &out), out, 2, {cfg, "invalid JSON"});
}

TEST_F(HostileInputTest, ConfigWithUnknownKey) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built (defaults come from it)";
  const std::string cfg = write_config("typo.json", "{\"train\": {\"learnin_rate\": 1e-3}}");
  std::string out;
  expect_clean_error(run_child({"train", "--config", cfg}, &out), out, 2,
                     {cfg, "unknown key 'train.learnin_rate'", "did you mean 'train.learning_rate'"});
}

TEST_F(HostileInputTest, ConfigWithWrongType) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built (defaults come from it)";
  const std::string cfg = write_config("type.json", "{\"train\": {\"batch_size\": \"eight\"}}");
  std::string out;
  expect_clean_error(run_child({"train", "--config", cfg}, &out), out, 2,
                     {cfg, "'train.batch_size' must be integer", "\"eight\""});
  // Command-line bytes that are not UTF-8 cannot become a JSON string.
  const std::string ok = write_config("ok.json", experiment(dir_.file("run"), 1).dump(2));
  expect_clean_error(run_child({"train", "--config", ok, "--set", "train.batch_size=8\xa2"}, &out), out, 2,
                     {"train.batch_size", "not valid UTF-8"});
}

// nlohmann keeps the last of two equal keys: without the check this config would train 2 steps, silently.
TEST_F(HostileInputTest, DuplicateJsonKeysAreRefusedWithTheirPath) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built (defaults come from it)";
  std::string text = experiment(dir_.file("run"), 1).dump(2);
  const std::string once = "\"max_iters\": 1";
  ASSERT_NE(text.find(once), std::string::npos) << text;
  text.replace(text.find(once), once.size(), once + ", \"max_iters\": 2");
  const std::string cfg = write_config("dup.json", text);
  std::string out;
  expect_clean_error(run_child({"train", "--config", cfg}, &out), out, 2, {cfg, "duplicate key 'train.max_iters'"});
  EXPECT_FALSE(fs::exists(dir_.file("run"))) << "trained anyway";
  // Experiment files go through the same loader.
  const std::string exp =
      write_config("dup_exp.json", R"({"description": "x", "jobs": [{"name": "a"}, {"name": "b", "name": "c"}]})");
  expect_clean_error(run_child({"run", exp}, &out), out, 2, {exp, "duplicate key 'jobs[1].name'"});
}

TEST_F(HostileInputTest, NanAndNegativeHyperParameters) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built";
  const std::string cfg = write_config("ok.json", experiment(dir_.file("run"), 1).dump(2));
  std::string out;
  auto train_set = [&](const std::string& assignment) {
    return run_child({"train", "--config", cfg, "--set", assignment}, &out);
  };
  // JSON has no NaN: on the command line it arrives as the string "nan" and is refused by type.
  expect_clean_error(train_set("train.learning_rate=nan"), out, 2, {"train.learning_rate", "\"nan\""});
  // 1e999 overflows a double, on the command line and in a file: refused, not turned into infinity.
  expect_clean_error(train_set("train.learning_rate=1e999"), out, 2, {"1e999", "out of range"});
  const std::string huge = write_config("huge.json", "{\"train\": {\"learning_rate\": 1e999}}");
  expect_clean_error(run_child({"train", "--config", huge}, &out), out, 2, {huge, "1e999"});
  expect_clean_error(train_set("train.learning_rate=-0.001"), out, 2, {"train.learning_rate", "-0.001", "negative"});
  expect_clean_error(train_set("train.weight_decay=-1"), out, 2, {"train.weight_decay", "-1"});
}

TEST_F(HostileInputTest, PluginBuiltAgainstAnotherApiVersion) {
  const std::string so = std::string(AOBENCH_BAD_PLUGIN_DIR) + "/libaobench_badapi.so";
  ASSERT_TRUE(fs::exists(so)) << so << " was not built";
  std::string out;
  expect_clean_error(run_child({"list"}, &out, AOBENCH_BAD_PLUGIN_DIR), out, 4,
                     {so, "built against plugin API version " + std::to_string(kPluginApiVersion + 1),
                      "API version " + std::to_string(kPluginApiVersion), "rebuild"});
}

TEST_F(HostileInputTest, MissingPluginDirectory) {
  const std::string missing = dir_.file("no_such_dir");
  std::string out;
  expect_clean_error(run_child({"list"}, &out, missing.c_str()), out, 4, {missing, "AOBENCH_PLUGIN_PATH"});
}

TEST_F(HostileInputTest, CheckpointOfAnotherPluginOrFlavour) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built";
  const std::string run = dir_.file("run");
  std::string out;
  const std::string first = write_config("a.json", experiment(run, 1).dump(2));
  ASSERT_EQ(run_child({"train", "--config", first}, &out), 0) << out;
  ASSERT_TRUE(latest_checkpoint(run).has_value());

  auto other_flavour = experiment(run, 2);
  other_flavour["model"] = {{"plugin", "gpt"}, {"flavour", "tiny"}};
  expect_clean_error(run_child({"train", "--config", write_config("b.json", other_flavour.dump(2)), "--resume"}, &out),
                     out, 5, {*latest_checkpoint(run), "gpt/debug", "gpt/tiny"});

  if (!have_plugin("sigma_gpt")) GTEST_SKIP() << "the sigma_gpt plugin is not built";
  auto other_plugin = experiment(run, 2);
  other_plugin["model"] = {{"plugin", "sigma_gpt"}, {"flavour", "debug"}};
  expect_clean_error(run_child({"train", "--config", write_config("c.json", other_plugin.dump(2)), "--resume"}, &out),
                     out, 5, {*latest_checkpoint(run), "gpt/debug", "sigma_gpt/debug"});
}

TEST_F(HostileInputTest, FullDiskWhileCheckpointingKeepsThePreviousCheckpoint) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built";
  const std::string run = dir_.file("run");
  const std::string first = write_config("a.json", experiment(run, 2).dump(2));
  const std::string second = write_config("b.json", experiment(run, 4).dump(2));
  std::string out;
  ASSERT_EQ(run_child({"train", "--config", first}, &out), 0) << out;
  ASSERT_TRUE(latest_checkpoint(run).has_value());
  const std::string step2 = *latest_checkpoint(run);
  ASSERT_EQ(fs::path(step2).filename(), "step_2");
  ASSERT_GT(fs::file_size(step2 + "/model.safetensors"), 64u << 10) << "model too small for the 64 KiB limit";

  // Resume to step 4 where no file may exceed 64 KiB: the step-4 model.safetensors cannot be written.
  const int rc = run_child({"train", "--config", second, "--resume"}, &out, nullptr, 64 << 10);
  expect_clean_error(rc, out, 5, {"model.safetensors", "disk is not full"});

  // The previous checkpoint is still the latest, intact (checksums verified on load), and resumable.
  ASSERT_TRUE(latest_checkpoint(run).has_value());
  EXPECT_EQ(*latest_checkpoint(run), step2);
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step_4"));
  const CheckpointData ck = load_checkpoint(step2);
  EXPECT_EQ(ck.state.at("step").get<int64_t>(), 2);
  EXPECT_FALSE(ck.model.empty());
  ASSERT_EQ(run_child({"train", "--config", second, "--resume"}, &out), 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  EXPECT_EQ(fs::path(*latest_checkpoint(run)).filename(), "step_4");
}

// ---------------------------------------------------------------------------------------------------
// no input reaches a shell.

// "first line\nsecond line\n" compressed by Python's lzma.compress (.xz container).
const std::string kXz(
    "\xfd\x37\x7a\x58\x5a\x00\x00\x04\xe6\xd6\xb4\x46\x02\x00\x21\x01\x16\x00\x00\x00\x74\x2f\xe5\xa3\x01\x00"
    "\x16\x66\x69\x72\x73\x74\x20\x6c\x69\x6e\x65\x0a\x73\x65\x63\x6f\x6e\x64\x20\x6c\x69\x6e\x65\x0a\x00\x00"
    "\x12\xe9\x31\xef\xb2\xa2\xda\x64\x00\x01\x2f\x17\x81\x08\x49\xb1\x1f\xb6\xf3\x7d\x01\x00\x00\x00\x00\x04"
    "\x59\x5a",
    80);

TEST_F(HostileInputTest, XzFileNamesNeverReachAShell) {
  // A name that a shell command line built around it would run, and a quote that would break one.
  const std::string evil = dir_.file("x';touch PWNED;'.xz");
  aobench::testing::write_text(evil, kXz);
  std::string out;
  ASSERT_EQ(run_child({"prepare", "--format", "lines", "--tokenizer", "bytes", "--input", evil, "--output",
                       dir_.file("out.bin")},
                      &out),
            0)
      << out;
  EXPECT_FALSE(fs::exists("PWNED"));
  EXPECT_FALSE(fs::exists(dir_.file("PWNED")));
  TokenFile tf(dir_.file("out.bin"));
  ASSERT_EQ(tf.size(), 10 + 1 + 11 + 1);  // both lines decompressed, EOS after each
  EXPECT_EQ(tf.at(0), uint32_t('f'));
  EXPECT_EQ(tf.at(10), 256u);
  // A damaged stream is a named error.
  const std::string cut = dir_.file("cut.xz");
  aobench::testing::write_text(cut, kXz.substr(0, 50));
  expect_clean_error(run_child({"prepare", "--format", "lines", "--tokenizer", "bytes", "--input", cut, "--output",
                                dir_.file("cut.bin")},
                               &out),
                     out, 3, {cut, "cannot decompress"});
}

TEST_F(HostileInputTest, ReportRunNamesNeverReachAShell) {
  // gnuplot runs `command` inside double-quoted strings: a run (directory) name must not get there.
  const std::string exp = dir_.file("exp");
  const std::string run = exp + "/r`touch PWNED_REPORT`'\"x";
  fs::create_directories(run);
  aobench::testing::write_text(run + "/config.resolved.json", R"({"model": {"plugin": "gpt", "flavour": "debug"}})");
  aobench::testing::write_text(run + "/metrics.jsonl",
                               "{\"step\": 1, \"loss/train\": 5.0}\n{\"step\": 2, \"loss/train\": 4.0}\n"
                               "{\"step\": 2, \"loss/val\": 4.5}\n");
  std::string out;
  ASSERT_EQ(run_child({"report", exp}, &out), 0) << out;
  for (const auto& where : {fs::path("PWNED_REPORT"), fs::path(exp) / "report" / "PWNED_REPORT"})
    EXPECT_FALSE(fs::exists(where)) << where;
  const std::string gp = aobench::testing::read_text(exp + "/report/loss_train.gp");
  EXPECT_NE(gp.find("title 'r`touch PWNED_REPORT`''\"x'"), std::string::npos) << gp;
}

// no crash on any input.

TEST_F(HostileInputTest, DeeplyNestedJsonIsRefusedNotACrash) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built (defaults come from it)";
  const size_t depth = 60000;
  const std::string deep =
      write_config("deep.json", "{\"train\": " + std::string(depth, '[') + std::string(depth, ']') + "}");
  std::string out;
  expect_clean_error(run_child({"train", "--config", deep}, &out), out, 2, {deep, "deeper than 64"});
  const std::string ok = write_config("ok.json", experiment(dir_.file("run"), 1).dump(2));
  expect_clean_error(
      run_child({"train", "--config", ok, "--set", "train.order=" + std::string(depth, '[') + std::string(depth, ']')},
                &out),
      out, 2, {"train.order", "deeper than 64"});
  std::string path = "train";
  while (path.size() < 100000) path += ".a";
  expect_clean_error(run_child({"train", "--config", ok, "--set", path + "=1"}, &out), out, 2,
                     {"key path deeper than 64"});
  // A value of the wrong type is shown shortened, never dumped whole into the message.
  expect_clean_error(
      run_child({"train", "--config", ok, "--set", "train.batch_size=\"" + std::string(100000, 'x') + "\""}, &out), out,
      2, {"train.batch_size", "…"});
  EXPECT_LT(out.size(), 2000u) << "the message holds the whole value";
}

TEST_F(HostileInputTest, BrokenPluginLibrariesAreRefusedByName) {
  std::string out;
  const std::string null_so = std::string(AOBENCH_NULL_PLUGIN_DIR) + "/libaobench_nullcreate.so";
  expect_clean_error(run_child({"list"}, &out, AOBENCH_NULL_PLUGIN_DIR), out, 4, {null_so, "returned null"});
  const std::string nofp_so = std::string(AOBENCH_NOFP_PLUGIN_DIR) + "/libaobench_nofp.so";
  expect_clean_error(run_child({"list"}, &out, AOBENCH_NOFP_PLUGIN_DIR), out, 4,
                     {nofp_so, "no aobench_plugin_fingerprint"});
  const std::string nodefaults_so = std::string(AOBENCH_NODEFAULTS_PLUGIN_DIR) + "/libaobench_nodefaults.so";
  expect_clean_error(run_child({"list"}, &out, AOBENCH_NODEFAULTS_PLUGIN_DIR), out, 4,
                     {nodefaults_so, "no aobench_plugin_default_config"});
}

// nothing lost or overwritten silently.

TEST_F(HostileInputTest, PrepareNeverWritesOverItsInput) {
  const std::string text = write_config("corpus.txt", "one line\nanother line\n");
  const std::string link = dir_.file("link.bin");
  fs::create_symlink(text, link);
  std::string out;
  for (const std::string& output : {text, dir_.file("./corpus.txt"), link}) {
    expect_clean_error(
        run_child({"prepare", "--format", "lines", "--tokenizer", "bytes", "--input", text, "--output", output}, &out),
        out, 2, {output, "overwrite its own input"});
    EXPECT_EQ(aobench::testing::read_text(text), "one line\nanother line\n");
  }
  expect_clean_error(run_child({"prepare", "--format", "lines", "--tokenizer", "bytes", "--input", text, "--output",
                                dir_.file("o.bin"), "--val-output", text},
                               &out),
                     out, 2, {text, "overwrite its own input"});
}

// A child process of the test, reaped exactly once.
struct Child {
  pid_t pid = -1;
  bool reaped = false;
  int status = 0;
  bool running() {
    if (!reaped && ::waitpid(pid, &status, WNOHANG) == pid) reaped = true;
    return !reaped;
  }
  // Exit code (−signal when killed) after sending `sig` (0: none) to a still running child.
  int finish(int sig) {
    if (!reaped) {
      if (sig) ::kill(pid, sig);
      ::waitpid(pid, &status, 0);
      reaped = true;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
};

// Polls `ready` every 2 ms for at most `timeout_s`; false when the child exited or time ran out first.
template <class F>
bool wait_for(Child& child, F ready, double timeout_s) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < timeout_s) {
    if (ready()) return true;
    if (!child.running()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

TEST_F(HostileInputTest, OneTrainingPerRunDirectoryAndTheSecondCtrlCExitsAtOnce) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built";
  const std::string run = dir_.file("run");
  auto e = experiment(run, 1000000);
  e["train"]["max_seconds"] = 120;  // safety net if a signal were lost
  e["train"]["batch_size"] = 64;    // steps long enough for a second signal to land inside one
  const std::string cfg = write_config("long.json", e.dump(2));
  const std::string log = dir_.file("first.log");
  Child first{aobench::testing::spawn_aobench({"train", "--config", cfg}, log)};
  const bool training = wait_for(
      first,
      [&] { return aobench::testing::read_text(run + "/metrics.jsonl").find("loss/train") != std::string::npos; }, 120);
  std::string out;
  const int second = training ? run_child({"train", "--config", cfg, "--resume"}, &out) : -1;
  // First Ctrl-C: "stopping after this step…"; a second one while it stops: exit at once.
  ::kill(first.pid, SIGINT);
  wait_for(
      first, [&] { return aobench::testing::read_text(log).find("stopping after this step") != std::string::npos; },
      30);
  const bool alive = first.running();
  const int rc = first.finish(alive ? SIGINT : 0);
  const std::string first_log = aobench::testing::read_text(log);
  ASSERT_TRUE(training) << first_log;
  expect_clean_error(second, out, 2, {run + "/.lock", "held by pid " + std::to_string(first.pid), "aobench train"});
  EXPECT_EQ(rc, 130) << first_log;
  EXPECT_NE(first_log.find("stopping after this step…"), std::string::npos) << first_log;
  if (alive) {
    EXPECT_NE(first_log.find("second signal: exiting now"), std::string::npos) << first_log;
  }
  // Whatever the moment, the newest complete checkpoint (if one was written) loads.
  if (latest_checkpoint(run)) {
    EXPECT_NO_THROW(load_checkpoint(*latest_checkpoint(run)));
  }
}

TEST_F(HostileInputTest, ConcurrentEvalsKeepEveryDatasetAndADamagedResultsFileLosesNothing) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built";
  const std::string run = dir_.file("run");
  std::string out;
  ASSERT_EQ(run_child({"train", "--config", write_config("a.json", experiment(run, 1).dump(2))}, &out), 0) << out;
  const std::string data = dir_.file("val.bin");
  write_token_file(data, byte_corpus(32 * 4), 257);
  constexpr int kEvals = 6;
  std::vector<Child> evals;
  for (int i = 0; i < kEvals; ++i)
    evals.push_back(
        Child{aobench::testing::spawn_aobench({"eval", "--run", run, "--data", "d" + std::to_string(i) + "=" + data},
                                              dir_.file("eval" + std::to_string(i) + ".log"))});
  for (int i = 0; i < kEvals; ++i)
    EXPECT_EQ(evals[i].finish(0), 0) << aobench::testing::read_text(dir_.file("eval" + std::to_string(i) + ".log"));
  const Results merged = Results::load(run + "/results.json");
  ASSERT_EQ(merged.runs.size(), 1u);
  for (int i = 0; i < kEvals; ++i)
    EXPECT_TRUE(merged.runs.begin()->second.metrics.count("d" + std::to_string(i) + "/nll")) << "lost dataset d" << i;

  // The same name twice is an error, not one result silently replacing the other.
  expect_clean_error(run_child({"eval", "--run", run, "--data", "v=" + data, "--data", "v=" + train_}, &out), out, 2,
                     {"'v'", "twice"});
  // A damaged merge target: the numbers are written beside it, and the message says where.
  aobench::testing::write_text(run + "/results.json", "{\"schema\": \"aobench.results/1\", \"runs\": ");
  expect_clean_error(run_child({"eval", "--run", run, "--data", "late=" + data}, &out), out, 3,
                     {run + "/results.json", "written to"});
  const size_t at = out.find("written to ");
  ASSERT_NE(at, std::string::npos);
  const std::string aside = out.substr(at + 11, out.find(" instead", at) - at - 11);
  const Results saved = Results::load(aside);
  EXPECT_TRUE(saved.runs.begin()->second.metrics.count("late/nll")) << aside;
  EXPECT_EQ(aobench::testing::read_text(run + "/results.json"), "{\"schema\": \"aobench.results/1\", \"runs\": ");
  // Training goes on past a damaged results file: the run's record goes beside it, with a warning.
  ASSERT_EQ(
      run_child({"train", "--config", run + "/config.resolved.json", "--resume", "--set", "train.max_iters=2"}, &out),
      0)
      << out;
  EXPECT_NE(out.find("warning: the run's record was not merged into its results.json"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_2/state.json")) << out;
  EXPECT_EQ(aobench::testing::read_text(run + "/results.json"), "{\"schema\": \"aobench.results/1\", \"runs\": ");
  const size_t train_at = out.find("written to ");
  ASSERT_NE(train_at, std::string::npos) << out;
  EXPECT_EQ(
      Results::load(out.substr(train_at + 11, out.find(" instead", train_at) - train_at - 11)).runs.at("run").steps, 2);
}

TEST_F(HostileInputTest, ResumeRefusesAnotherConfigAndNeverRewritesALaterCheckpoint) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built";
  const std::string run = dir_.file("run");
  std::string out;
  ASSERT_EQ(run_child({"train", "--config", write_config("a.json", experiment(run, 3).dump(2))}, &out), 0) << out;
  const std::string step3 = run + "/checkpoints/step_3";
  ASSERT_TRUE(fs::exists(step3 + "/state.json"));
  // Another learning rate and batch: refused, every differing key listed; run-length keys may change.
  auto changed = experiment(run, 5);
  changed["train"]["learning_rate"] = 1e-4;
  changed["train"]["batch_size"] = 2;
  const std::string cfg = write_config("b.json", changed.dump(2));
  expect_clean_error(run_child({"train", "--config", cfg, "--resume"}, &out), out, 5,
                     {step3, "train.learning_rate", "train.batch_size", "--resume-with-changes"});
  EXPECT_EQ(out.find("train.max_iters"), std::string::npos) << "max_iters is a run-length key:\n" << out;
  // A prefix of an option is not that option.
  expect_clean_error(run_child({"train", "--config", cfg, "--resum"}, &out), out, 2, {"--resum"});

  // max_iters below (or at) the checkpoint's step: nothing is trained and nothing rewritten.
  const auto before = fs::last_write_time(step3 + "/state.json");
  const std::string state = aobench::testing::read_text(step3 + "/state.json");
  const std::string resolved = aobench::testing::read_text(run + "/config.resolved.json");
  ASSERT_EQ(run_child({"train", "--config", write_config("c.json", experiment(run, 1).dump(2)), "--resume"}, &out), 0)
      << out;
  EXPECT_NE(out.find("nothing to train"), std::string::npos) << out;
  EXPECT_EQ(fs::last_write_time(step3 + "/state.json"), before);
  EXPECT_EQ(aobench::testing::read_text(step3 + "/state.json"), state);
  EXPECT_EQ(aobench::testing::read_text(run + "/config.resolved.json"), resolved);
  EXPECT_EQ(*latest_checkpoint(run), step3);

  // --resume-with-changes continues with the new settings.
  ASSERT_EQ(run_child({"train", "--config", cfg, "--resume-with-changes"}, &out), 0) << out;
  EXPECT_NE(out.find("resumed from " + step3), std::string::npos) << out;
  EXPECT_EQ(fs::path(*latest_checkpoint(run)).filename(), "step_5");
}

TEST_F(HostileInputTest, RunRefusesStaleJobsDuplicateNamesAndFiltersNamingNothing) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built";
  const std::string out_dir = dir_.file("exp");
  nlohmann::json common = experiment("unused", 1);
  common["train"].erase("out_dir");
  nlohmann::json exp = {{"out_dir", out_dir},
                        {"common", common},
                        {"jobs", {{{"name", "a"}, {"config", nlohmann::json::object()}}}},
                        {"eval", {{"datasets", {{"train", train_}}}, {"modes", nlohmann::json::array()}}}};
  std::string out;
  ASSERT_EQ(run_child({"run", write_config("exp.json", exp.dump(2))}, &out), 0) << out;
  ASSERT_TRUE(fs::exists(out_dir + "/a/DONE.json"));

  // A DONE.json written before train.ddp_bucket_mb existed (how gradients travel, not what is trained) is
  // still the same job: skipped, not refused.
  auto done = nlohmann::json::parse(aobench::testing::read_text(out_dir + "/a/DONE.json"));
  ASSERT_EQ(done["config"]["train"].erase("ddp_bucket_mb"), 1u);
  aobench::testing::write_text(out_dir + "/a/DONE.json", done.dump(2));
  ASSERT_EQ(run_child({"run", write_config("exp.json", exp.dump(2))}, &out), 0) << out;
  EXPECT_NE(out.find("job a: training finished earlier, skipped"), std::string::npos) << out;

  // The job's config changed since it finished: refused with the difference, not skipped.
  auto stale = exp;
  stale["common"]["train"]["learning_rate"] = 1e-4;
  const std::string stale_cfg = write_config("stale.json", stale.dump(2));
  expect_clean_error(run_child({"run", stale_cfg}, &out), out, 2, {"job a", "train.learning_rate", "--force"});
  ASSERT_EQ(run_child({"run", stale_cfg, "--force"}, &out), 0) << out;

  auto dup = exp;
  dup["jobs"].push_back({{"name", "a"}});
  expect_clean_error(run_child({"run", write_config("dup.json", dup.dump(2))}, &out), out, 2, {"'a'", "twice"});
  auto filter = exp;
  filter["eval"]["modes"] = {{{"mode", "l2r"}, {"jobs", {"b"}}}};
  expect_clean_error(run_child({"run", write_config("filter.json", filter.dump(2))}, &out), out, 2,
                     {"\"b\"", "no job"});
  filter["eval"]["modes"] = {{{"mode", "l2r"}, {"datasets", {"wikitext"}}}};
  expect_clean_error(run_child({"run", write_config("filter2.json", filter.dump(2))}, &out), out, 2,
                     {"\"wikitext\"", "eval.datasets"});
}

// no hang.

TEST_F(HostileInputTest, FifoAsDataIsRefusedWithoutBlocking) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built";
  const std::string fifo = dir_.file("fifo.bin");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto e = experiment(dir_.file("run"), 1);
  e["data"]["train"] = fifo;
  const std::string log = dir_.file("fifo.log");
  Child child{aobench::testing::spawn_aobench({"train", "--config", write_config("f.json", e.dump(2))}, log)};
  const bool exited = !wait_for(
      child, [] { return false; }, 60);
  const int rc = child.finish(exited ? 0 : SIGKILL);
  ASSERT_TRUE(exited) << "blocked on the FIFO for 60 s";
  std::string out = aobench::testing::read_text(log);
  expect_clean_error(rc, out, 3, {fifo, "not a regular file"});
  expect_clean_error(run_child({"prepare", "--format", "lines", "--tokenizer", "bytes", "--input", fifo, "--output",
                                dir_.file("o.bin")},
                               &out),
                     out, 3, {fifo, "not a regular file"});
}

// `aobench args...` given at most `timeout_s` seconds: a child still running then (blocked on a FIFO) is
// killed, and the test fails instead of hanging.
int run_child_bounded(const std::vector<std::string>& args, const std::string& log, std::string* out,
                      double timeout_s = 60) {
  Child child{aobench::testing::spawn_aobench(args, log)};
  const bool exited = !wait_for(
      child, [] { return false; }, timeout_s);
  const int rc = child.finish(exited ? 0 : SIGKILL);
  *out = aobench::testing::read_text(log);
  EXPECT_TRUE(exited) << "still running after " << timeout_s << " s (blocked on a FIFO?): aobench " << args[0];
  return rc;
}

TEST_F(HostileInputTest, FifoOrDeviceAsConfigOrPromptFileIsRefusedWithoutBlocking) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built";
  const std::string fifo = dir_.file("fifo.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::string log = dir_.file("bounded.log");
  std::string out;
  expect_clean_error(run_child_bounded({"train", "--config", fifo}, log, &out), out, 2,
                     {"'" + fifo + "' is a FIFO", "not a regular file"});
  expect_clean_error(run_child_bounded({"run", fifo}, log, &out), out, 2, {"'" + fifo + "' is a FIFO"});
  expect_clean_error(run_child_bounded({"train", "--config", "/dev/null"}, log, &out), out, 2,
                     {"'/dev/null' is a character device"});
  // sample refuses the prompt file before it loads the model: with the checkpoints moved away, loading
  // first would fail on them (exit 5) instead.
  const std::string run = dir_.file("run");
  ASSERT_EQ(run_child({"train", "--config", write_config("a.json", experiment(run, 1).dump(2))}, &out), 0) << out;
  fs::rename(run + "/checkpoints", run + "/checkpoints_moved");
  expect_clean_error(run_child_bounded({"sample", "--run", run, "--prompt-file", fifo}, log, &out), out, 3,
                     {"prompt file '" + fifo + "' is a FIFO"});
  fs::rename(run + "/checkpoints_moved", run + "/checkpoints");
  expect_clean_error(run_child_bounded({"sample", "--run", run, "--prompt-file", "/dev/null"}, log, &out), out, 3,
                     {"prompt file '/dev/null' is a character device"});
  // The reader itself refuses them too, whoever calls it.
  try {
    read_prompt_file(dir_.path.string(), *make_tokenizer("bytes"), 257, 32);
    ADD_FAILURE() << "a directory was read as a prompt file";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("prompt file '" + dir_.path.string() + "' is a directory"), std::string::npos)
        << e.what();
  }
}

TEST_F(HostileInputTest, EvalCostKnobsAreBounded) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built (defaults come from it)";
  for (const std::string set :
       {"eval.ensemble=[1,100000]", "eval.orders=1000000", "eval.mc_steps=1000000000", "eval.batch_size=1000000"}) {
    nlohmann::json config = resolve_config(nlohmann::json::object(), Overrides::from_sets({set}));
    try {
      EvalConfig::from_json(config);
      ADD_FAILURE() << set << " was accepted";
    } catch (const ConfigError& err) {
      EXPECT_NE(std::string(err.what()).find(set.substr(0, set.find('='))), std::string::npos) << err.what();
    }
  }
}

// every error names the item and the fix.

TEST_F(HostileInputTest, TokenIdsPastTheVocabularyAreFoundWhenTheFileIsOpened) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built";
  auto tokens = byte_corpus(8000);
  tokens[5000] = 300;  // the byte model's vocabulary is 257
  const std::string unknown = dir_.file("unknown_vocab.bin");
  write_token_file(unknown, tokens, 0);  // header vocab 0 = unknown: only the model's vocabulary bounds ids
  std::string out;
  expect_clean_error(train_on(unknown, &out), out, 3, {unknown, "token 5000", "byte offset 11024", "id 300", "257"});
  const std::string lying = dir_.file("lying_header.bin");
  write_token_file(lying, tokens, 257);  // header claims 257
  expect_clean_error(train_on(lying, &out), out, 3, {lying, "token 5000", "id 300", "in its own header"});
  // eval opens files the same way.
  const std::string run = dir_.file("run");
  ASSERT_EQ(run_child({"train", "--config", write_config("a.json", experiment(run, 1).dump(2))}, &out), 0) << out;
  expect_clean_error(run_child({"eval", "--run", run, "--data", "u=" + unknown}, &out), out, 3,
                     {unknown, "token 5000", "id 300"});
  expect_clean_error(run_child({"eval", "--run", run, "--data", "u=" + unknown, "--throughput"}, &out), out, 3,
                     {unknown, "token 5000", "id 300"});
  // A step number no int64 holds is a named error, not std::stoll's "stoll".
  const std::string huge = run + "/checkpoints/step_99999999999999999999";
  fs::create_directories(huge);
  fs::remove(run + "/checkpoints/latest");  // so the folder scan (as after a crash) meets it
  expect_clean_error(run_child({"eval", "--run", run, "--data", "t=" + train_}, &out), out, 5,
                     {"step_99999999999999999999", "too large"});
}

TEST_F(HostileInputTest, HugeNumbersAndBadHeadersAreNamedErrors) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built";
  const std::string cfg = write_config("ok.json", experiment(dir_.file("run"), 1).dump(2));
  std::string out;
  for (const std::string v : {"99999999999999999999", "18446744073709551615", "1e19"})
    expect_clean_error(run_child({"train", "--config", cfg, "--set", "train.max_iters=" + v}, &out), out, 2,
                       {"train.max_iters", "does not fit a 64-bit integer"});
  // A model too large to allocate: the message names the model keys, not only the allocator.
  expect_clean_error(run_child({"train", "--config", cfg, "--set", "model.block_size=10000000000000"}, &out), out, 2,
                     {"cannot build model gpt/debug", "block_size=10000000000000"});
  // Negative vocabulary and window in a token-file header.
  for (int field : {3, 4}) {
    const std::string bad = dir_.file("neg" + std::to_string(field) + ".bin");
    write_token_file(bad, byte_corpus(4000), 257);
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    const int32_t minus = -5;
    f.seekp(4 * field);
    f.write(reinterpret_cast<const char*>(&minus), 4);
    f.close();
    expect_clean_error(train_on(bad, &out), out, 3, {bad, field == 3 ? "negative vocab size" : "negative window"});
  }
  const std::string text = write_config("corpus.txt", "short line\nanother one\n");
  auto prepare = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"prepare", "--format", "lines",    "--tokenizer",     "bytes",
                                     "--input", text,       "--output", dir_.file("p.bin")};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_child(args, &out);
  };
  expect_clean_error(prepare({"--packing", "simple", "--window", "4294967296"}), out, 2,
                     {"--window 4294967296", "int32"});
  expect_clean_error(prepare({"--packing", "simple", "--window", "4096"}), out, 3,
                     {dir_.file("p.bin"), "leaves 0 tokens"});
  EXPECT_FALSE(fs::exists(dir_.file("p.bin")));
  expect_clean_error(prepare({"--threads=-2"}), out, 2, {"--threads -2"});
  expect_clean_error(prepare({"--threads=100000"}), out, 2, {"--threads 100000", "[0, 1024]"});
  const std::string empty_dir = dir_.file("no_vocab");
  fs::create_directories(empty_dir);
  std::vector<std::string> args = {"prepare", "--format",    "lines",           "--tokenizer",
                                   "gpt2",    "--vocab-dir", empty_dir,         "--input",
                                   text,      "--output",    dir_.file("g.bin")};
  expect_clean_error(run_child(args, &out), out, 3, {empty_dir, "lacks encoder.json"});
}

// compare is a trustworthy gate.

TEST_F(HostileInputTest, CompareRefusesWhatItCannotCompare) {
  Results base;
  auto& run = base.runs["r"];
  run.metrics["wt/ppl"] = {30.0, 0.5, 10, false, false, "l2r"};
  run.metrics["wt/eval_tok_s"] = {1000.0, std::nullopt, 0, false, true, "l2r"};
  base.save(dir_.file("base.json"));
  Results slower = base;
  slower.runs["r"].metrics["wt/eval_tok_s"].value = 500.0;  // throughput halves: not a quality regression
  slower.save(dir_.file("slower.json"));
  std::string out;
  EXPECT_EQ(run_child({"compare", dir_.file("base.json"), dir_.file("slower.json")}, &out), 0) << out;
  EXPECT_EQ(out.find("eval_tok_s"), std::string::npos) << out;
  EXPECT_EQ(run_child({"compare", dir_.file("base.json"), dir_.file("slower.json"), "--metrics", "eval_tok_s"}, &out),
            1)
      << out;
  expect_clean_error(run_child({"compare", dir_.file("base.json"), dir_.file("slower.json"), "--metrics", "bpb"}, &out),
                     out, 2, {"--metrics 'bpb'", "wt/ppl"});
  Results other;
  other.runs["r"].metrics["lambada/ppl"] = {30.0, 0.5, 10, false, false, "l2r"};
  other.save(dir_.file("other.json"));
  expect_clean_error(run_child({"compare", dir_.file("base.json"), dir_.file("other.json")}, &out), out, 3,
                     {"no quality metric is in both", dir_.file("other.json")});
  Results nan = base;
  nan.runs["r"].metrics["wt/ppl"].value = std::nan("");
  nan.save(dir_.file("nan.json"));
  expect_clean_error(run_child({"compare", dir_.file("base.json"), dir_.file("nan.json")}, &out), out, 3,
                     {"wt/ppl", "not a number", dir_.file("nan.json")});
  nlohmann::json text = base.to_json();
  text["runs"]["r"]["metrics"]["wt/ppl"]["value"] = "30.0";
  aobench::testing::write_text(dir_.file("string.json"), text.dump());
  expect_clean_error(run_child({"compare", dir_.file("base.json"), dir_.file("string.json")}, &out), out, 3,
                     {dir_.file("string.json"), "runs.r.metrics.wt/ppl.value", "must be a number"});
}

// Found by a hostile tester: three `sample` processes writing one --out all exited 0 while one file survived (the
// never-overwrite check raced with the rename); `speed` whose --out was damaged discarded its timings; `--out -`
// wrote a file named "-".
TEST_F(HostileInputTest, SamplesAndTimingsAreNeverLostToOtherWriters) {
  std::string out;
  auto e = experiment(dir_.file("s"), 2);
  e["train"]["checkpoint_interval"] = 2;
  ASSERT_EQ(run_child({"train", "--config", write_config("s.json", e.dump(2))}, &out), 0) << out;
  const std::string f = dir_.file("shared.jsonl");
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  for (int i = 0; i < 3; ++i) {
    logs.push_back(dir_.file("race" + std::to_string(i) + ".log"));
    pids.push_back(aobench::testing::spawn_aobench(
        {"sample", "--run", dir_.file("s"), "--out", f, "--set", "sample.num_samples=2", "--set", "sample.length=16",
         "--set", "sample.seed=" + std::to_string(100 + i)},
        logs.back()));
  }
  int ok = 0;
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    ::waitpid(pids[i], &status, 0);
    const std::string log = aobench::testing::read_text(logs[i]);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
      ++ok;
    else
      EXPECT_NE(log.find("never overwrite"), std::string::npos) << log;  // the check or the final link(2)
  }
  EXPECT_EQ(ok, 1) << "every writer but one must fail loudly";
  const std::string written = aobench::testing::read_text(f);
  EXPECT_EQ(std::count(written.begin(), written.end(), '\n'), 2);
  // speed: a damaged --out keeps the timings beside it, named in the error.
  const std::string damaged = dir_.file("damaged.json");
  aobench::testing::write_text(damaged, "{ not json");
  const std::vector<std::string> speed = {"speed",           "--run", dir_.file("s"),       "--set",
                                          "speed.steps=[2]", "--set", "speed.batch_size=1", "--set",
                                          "speed.repeats=1", "--set", "speed.warmup=0"};
  std::vector<std::string> args = speed;
  args.insert(args.end(), {"--out", damaged});
  expect_clean_error(run_child(args, &out), out, 3, {damaged, "written to " + damaged + ".speed-"});
  EXPECT_EQ(aobench::testing::read_text(damaged), "{ not json");
  // --out -: the results alone on standard output, the table on standard error, no file named "-".
  args = speed;
  args.insert(args.end(), {"--out", "-"});
  const std::string err = dir_.file("speed_stderr.txt");
  aobench::testing::ChildOptions only_stdout;
  only_stdout.stderr_log = err.c_str();
  ASSERT_EQ(aobench::testing::run_aobench_child(args, &out, only_stdout), 0) << aobench::testing::read_text(err);
  EXPECT_TRUE(Results::from_json(nlohmann::json::parse(out)).runs.at("s").metrics.count("speed_s2/gen_s")) << out;
  EXPECT_NE(aobench::testing::read_text(err).find("tokens/s"), std::string::npos) << "the table goes to stderr";
  EXPECT_FALSE(fs::exists("-"));
}

// Found by a hostile tester: `train` stored sample.* values that `sample` later refused, and `run` validated its
// --set values only after preparing data. Both now check every section before any side effect.
TEST_F(HostileInputTest, EverySectionIsCheckedBeforeAnySideEffect) {
  std::string out;
  auto e = experiment(dir_.file("bad_sample"), 1);
  e["sample"] = {{"top_p", 2.0}};
  expect_clean_error(run_child({"train", "--config", write_config("bad_sample.json", e.dump(2))}, &out), out, 2,
                     {"sample.top_p"});
  EXPECT_FALSE(fs::exists(dir_.file("bad_sample"))) << "a run folder for a config that `sample` would refuse";
  const std::string text = dir_.file("lines.txt");
  aobench::testing::write_text(text, "one line\nanother line\n");
  const nlohmann::json exp = {{"out_dir", dir_.file("exp")},
                              {"prepare",
                               {{{"name", "t"},
                                 {"format", "lines"},
                                 {"input", text},
                                 {"tokenizer", "bytes"},
                                 {"output", dir_.file("exp_data/t.bin")}}}},
                              {"common", experiment(dir_.file("unused"), 1)},
                              {"jobs", {{{"name", "a"}, {"config", nlohmann::json::object()}}}}};
  const std::string file = write_config("exp.json", exp.dump(2));
  expect_clean_error(run_child({"run", file, "--set", "speed.repeats=0"}, &out), out, 2, {"speed.repeats"});
  EXPECT_FALSE(fs::exists(dir_.file("exp_data/t.bin"))) << "data prepared before the --set was checked";
  EXPECT_FALSE(fs::exists(dir_.file("exp"))) << "the experiment folder made before the --set was checked";
}

// Found by a hostile tester: `eval --run A --checkpoint B/...` rewrote run A's record with run B's plugin and step.
TEST_F(HostileInputTest, EvalRefusesACheckpointOfAnotherRun) {
  std::string out;
  for (const char* name : {"a", "b"}) {
    auto e = experiment(dir_.file(name), 2);
    e["train"]["checkpoint_interval"] = 2;
    ASSERT_EQ(run_child({"train", "--config", write_config(std::string(name) + ".json", e.dump(2))}, &out), 0) << out;
  }
  const std::string record = aobench::testing::read_text(dir_.file("a/results.json"));
  const std::string foreign = dir_.file("b/checkpoints/step_2");
  ASSERT_TRUE(fs::exists(foreign)) << out;
  expect_clean_error(
      run_child({"eval", "--run", dir_.file("a"), "--checkpoint", foreign, "--data", "t=" + train_}, &out), out, 2,
      {foreign, "not a checkpoint of --run", dir_.file("b")});
  EXPECT_EQ(aobench::testing::read_text(dir_.file("a/results.json")), record);
  EXPECT_EQ(run_child({"eval", "--run", dir_.file("a"), "--checkpoint", dir_.file("a/checkpoints/step_2/"), "--data",
                       "t=" + train_},
                      &out),
            0)
      << out;
}

// Found by a hostile tester: a GPT-2 (BPE) model scored a byte-tokenized file ("ppl 305", exit 0): ids below its
// vocabulary, so no id check could notice. Token files carry their tokenizer; a reader of another refuses them.
TEST_F(HostileInputTest, TokenizerMismatchIsAnError) {
  std::vector<uint32_t> bytes;
  for (uint32_t i = 0; i < 4000; ++i) bytes.push_back(97 + i % 26);
  write_token_file(dir_.file("bytes.bin"), bytes, 257, 0, 256, "bytes");
  const std::string hf = std::string(AOBENCH_TEST_DATA) + "/hf_tiny_gpt2";
  std::string out;
  expect_clean_error(
      run_child({"eval", "--hf", hf, "--data", "v=" + dir_.file("bytes.bin"), "--out", dir_.file("hf_results.json")},
                &out),
      out, 3, {dir_.file("bytes.bin"), "'bytes'", "'gpt2'", "--tokenizer gpt2"});
  EXPECT_FALSE(fs::exists(dir_.file("hf_results.json")));
  // Training: the config's data.tokenizer against the file's.
  const nlohmann::json config = {{"model", {{"plugin", "gpt"}, {"flavour", "debug"}, {"block_size", 32}}},
                                 {"data", {{"train", dir_.file("bytes.bin")}, {"tokenizer", "gpt2"}}},
                                 {"train", {{"device", "cpu"}, {"max_iters", 1}, {"out_dir", dir_.file("tok_run")}}}};
  aobench::testing::write_text(dir_.file("tok.json"), config.dump());
  expect_clean_error(run_child({"train", "--config", dir_.file("tok.json")}, &out), out, 3,
                     {dir_.file("bytes.bin"), "'bytes'", "data.tokenizer"});
}

// Found by a hostile tester: identical speed runs failed on their timings, a run or metric lacking in NEW passed,
// a string or negative Google Benchmark time vanished or passed.
TEST_F(HostileInputTest, CompareGatesTimingOnlyWhenAskedAndMissingIsAFailure) {
  Results base;
  base.runs["r"].metrics["wt/ppl"] = {30.0, 0.5, 10, false, false, "l2r"};
  base.runs["r"].metrics["speed_s64/gen_s"] = {1.00, std::nullopt, 0, false, false, "wall"};
  base.runs["q"].metrics["wt/ppl"] = {40.0, 0.5, 10, false, false, "l2r"};
  base.save(dir_.file("base.json"));
  Results slower = base;
  slower.runs["r"].metrics["speed_s64/gen_s"].value = 1.0533;  // +5.33 %: timing noise, not gated by default
  slower.save(dir_.file("slower.json"));
  std::string out;
  EXPECT_EQ(run_child({"compare", dir_.file("base.json"), dir_.file("slower.json")}, &out), 0) << out;
  EXPECT_NE(out.find("PASS: 0 of 2 metric(s) worse"), std::string::npos) << out;
  EXPECT_NE(out.find("1 timing metric(s) not compared"), std::string::npos) << out;
  EXPECT_EQ(run_child({"compare", dir_.file("base.json"), dir_.file("slower.json"), "--metrics", "gen_s"}, &out), 1)
      << out;
  EXPECT_NE(out.find("FAIL: 1 of 1"), std::string::npos) << out;
  // NEW lacks run q and r's metric: a failure, listed, unless allowed.
  Results partial;
  partial.runs["r"].metrics["speed_s64/gen_s"] = base.runs["r"].metrics["speed_s64/gen_s"];
  partial.runs["r"].metrics["other/ppl"] = {1.0, 0.1, 10, false, false, "l2r"};
  partial.save(dir_.file("partial.json"));
  expect_clean_error(run_child({"compare", dir_.file("base.json"), dir_.file("partial.json")}, &out), out, 3,
                     {"no quality metric is in both"});
  partial.runs["r"].metrics["wt/ppl"] = base.runs["r"].metrics["wt/ppl"];
  partial.save(dir_.file("partial.json"));
  EXPECT_EQ(run_child({"compare", dir_.file("base.json"), dir_.file("partial.json")}, &out), 1) << out;
  EXPECT_NE(out.find("MISSING in NEW"), std::string::npos) << out;
  EXPECT_NE(out.find("FAIL: 0 of 1 metric(s) worse by more than 2%; 1 in BASE missing in NEW"), std::string::npos)
      << out;
  EXPECT_EQ(run_child({"compare", dir_.file("base.json"), dir_.file("partial.json"), "--allow-missing"}, &out), 0)
      << out;
  EXPECT_NE(out.find("PASS:"), std::string::npos) << out;
  // --only-failures lists the failing row alone; --json carries the same verdict.
  EXPECT_EQ(run_child({"compare", dir_.file("base.json"), dir_.file("partial.json"), "--only-failures"}, &out), 1)
      << out;
  EXPECT_EQ(out.find(" ok"), std::string::npos) << out;
  EXPECT_NE(out.find("q "), std::string::npos) << out;
  EXPECT_EQ(run_child({"compare", dir_.file("base.json"), dir_.file("partial.json"), "--json"}, &out), 1) << out;
  const auto j = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_FALSE(j.at("passed").get<bool>());
  EXPECT_EQ(j.at("missing").get<int>(), 1);
  EXPECT_EQ(j.at("rows").size(), 2u);
  // A negative timing is an error, not a speed-up.
  Results negative = base;
  negative.runs["r"].metrics["speed_s64/gen_s"].value = -1.0;
  negative.save(dir_.file("negative.json"));
  expect_clean_error(
      run_child({"compare", dir_.file("base.json"), dir_.file("negative.json"), "--metrics", "gen_s"}, &out), out, 3,
      {"speed_s64/gen_s", "negative", dir_.file("negative.json")});
  // Google Benchmark JSON: a string or negative cpu_time is an error naming the benchmark.
  nlohmann::json gb = {
      {"context", {{"host_name", "h"}}},
      {"benchmarks",
       {{{"name", "BM_A"}, {"run_type", "iteration"}, {"real_time", 2.0}, {"cpu_time", 1.0}, {"time_unit", "ms"}}}}};
  aobench::testing::write_text(dir_.file("gb.json"), gb.dump());
  gb["benchmarks"][0]["cpu_time"] = "fast";
  aobench::testing::write_text(dir_.file("gb_string.json"), gb.dump());
  expect_clean_error(
      run_child({"compare", dir_.file("gb.json"), dir_.file("gb_string.json"), "--metrics", "cpu_ms"}, &out), out, 3,
      {dir_.file("gb_string.json"), "BM_A", "cpu_time"});
  gb["benchmarks"][0]["cpu_time"] = -1.0;
  aobench::testing::write_text(dir_.file("gb_negative.json"), gb.dump());
  expect_clean_error(
      run_child({"compare", dir_.file("gb.json"), dir_.file("gb_negative.json"), "--metrics", "cpu_ms"}, &out), out, 3,
      {dir_.file("gb_negative.json"), "BM_A", "not a time"});
  EXPECT_EQ(run_child({"compare", dir_.file("gb.json"), dir_.file("gb.json"), "--metrics", "cpu_ms"}, &out), 0) << out;
}

}  // namespace
}  // namespace aobench
