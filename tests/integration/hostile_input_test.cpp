// Implements: issue G item 3 (hostile inputs), end to end through the aobench binary: truncated and
// wrong-magic token files, bad JSON, unknown keys, wrong types, NaN / negative hyper-parameters, a plugin
// built against another API version, a missing plugin directory, a checkpoint of another plugin or
// flavour, and a file-size limit hit while writing a checkpoint (the previous checkpoint survives).
// Each case asserts: a non-zero exit (never a signal, never a sanitizer report), "error:" naming the
// offending file / key / value, and a "HINT:" line.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "datasets/token_file.h"
#include "harness/checkpoint.h"
#include "harness/registry.h"
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
void expect_clean_error(int rc, const std::string& out, int expected_rc,
                        const std::vector<std::string>& names) {
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
    const std::map<std::string, int64_t> shrink = {{"block_size", 32}, {"n_layer", 2}, {"n_head", 2},
                                                   {"n_embd", 32}};
    for (const auto& [k, v] : shrink)
      if (defaults.contains(k)) model[k] = v;
    return {{"model", model},
            {"data", {{"train", train_}, {"tokenizer", "bytes"}}},
            {"train",
             {{"out_dir", out_dir}, {"device", "cpu"}, {"batch_size", 4}, {"max_iters", max_iters},
              {"warmup_iters", 1}, {"lr_decay_iters", 10}, {"log_interval", 1}, {"eval_interval", 0},
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

TEST_F(HostileInputTest, NanAndNegativeHyperParameters) {
  if (!have_plugin("gpt")) GTEST_SKIP() << "the gpt plugin is not built";
  const std::string cfg = write_config("ok.json", experiment(dir_.file("run"), 1).dump(2));
  std::string out;
  auto train_set = [&](const std::string& assignment) {
    return run_child({"train", "--config", cfg, "--set", assignment}, &out);
  };
  // JSON has no NaN: on the command line it arrives as the string "nan" and is refused by type.
  expect_clean_error(train_set("train.learning_rate=nan"), out, 2,
                     {"train.learning_rate", "\"nan\""});
  // 1e999 overflows a double, on the command line and in a file: refused, not turned into infinity.
  expect_clean_error(train_set("train.learning_rate=1e999"), out, 2,
                     {"1e999", "out of range"});
  const std::string huge = write_config("huge.json", "{\"train\": {\"learning_rate\": 1e999}}");
  expect_clean_error(run_child({"train", "--config", huge}, &out), out, 2, {huge, "1e999"});
  expect_clean_error(train_set("train.learning_rate=-0.001"), out, 2,
                     {"train.learning_rate", "-0.001", "negative"});
  expect_clean_error(train_set("train.weight_decay=-1"), out, 2,
                     {"train.weight_decay", "-1"});
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
  expect_clean_error(
      run_child({"train", "--config", write_config("b.json", other_flavour.dump(2)), "--resume"}, &out), out,
      5,
      {*latest_checkpoint(run), "gpt/debug", "gpt/tiny"});

  if (!have_plugin("sigma_gpt")) GTEST_SKIP() << "the sigma_gpt plugin is not built";
  auto other_plugin = experiment(run, 2);
  other_plugin["model"] = {{"plugin", "sigma_gpt"}, {"flavour", "debug"}};
  expect_clean_error(
      run_child({"train", "--config", write_config("c.json", other_plugin.dump(2)), "--resume"}, &out), out,
      5,
      {*latest_checkpoint(run), "gpt/debug", "sigma_gpt/debug"});
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

}  // namespace
}  // namespace aobench
