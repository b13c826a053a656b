// Implements: tests of training checkpoints (harness/train/checkpoint.h): SHA-256 against FIPS 180-4
// vectors, save → load round trip of a plain torch module, corruption detection naming the file, and
// atomicity (a crash that leaves .tmp_step_N or a stale `latest` keeps the previous checkpoint loadable).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "harness/train/checkpoint.h"
#include "tests/test_util.h"

namespace aobench {
namespace {
namespace fs = std::filesystem;
using aobench::testing::TempDir;

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// sha256_file reads 4 MiB at a time: a file of 4 MiB + 3 bytes ends in a second, short read. The
// expected digest is Python's hashlib.sha256 over the same bytes (another implementation than OpenSSL's).
TEST(Sha256, FilesAcrossTheReadChunkMatchAnIndependentDigest) {
  TempDir dir;
  std::string bytes((size_t(4) << 20) + 3, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 31 + 7) % 251);
  aobench::testing::write_text(dir.file("chunks.bin"), bytes);
  EXPECT_EQ(sha256_file(dir.file("chunks.bin")), "fd8f7c1ab7be070416f8916f9a7463bd0e1af958a523ee3bc1392e7293e8e15f");
  EXPECT_EQ(sha256_hex(bytes), "fd8f7c1ab7be070416f8916f9a7463bd0e1af958a523ee3bc1392e7293e8e15f");
  aobench::testing::write_text(dir.file("a.bin"), std::string(1000000, 'a'));  // FIPS 180-4 vector, as a file
  EXPECT_EQ(sha256_file(dir.file("a.bin")), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  aobench::testing::write_text(dir.file("empty.bin"), "");
  EXPECT_EQ(sha256_file(dir.file("empty.bin")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  try {
    sha256_file(dir.file("missing.bin"));
    ADD_FAILURE() << "a missing file was hashed";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("missing.bin")), std::string::npos) << e.what();
  }
}

CheckpointData make_data(torch::nn::Module& m, int64_t step) {
  CheckpointData d;
  d.model = module_state(m);
  d.ema = module_state(m);
  d.optimizer["weight.exp_avg"] = torch::full({3, 4}, 0.5);
  d.optimizer["weight.step"] = torch::tensor(step, torch::kInt64);
  d.state = {{"plugin", "test"}, {"flavour", "debug"}, {"config", {{"model", {{"n", 1}}}}}};
  return d;
}

TEST(Checkpoint, RoundTripAndKeepLast) {
  TempDir dir;
  torch::manual_seed(0);
  torch::nn::Sequential net(torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3));
  for (int64_t step : {10, 20, 30}) save_checkpoint(dir.path.string(), step, make_data(*net, step), 2);
  // keep_checkpoints = 2: step_10 removed.
  EXPECT_FALSE(fs::exists(dir.path / "checkpoints/step_10"));
  EXPECT_TRUE(fs::exists(dir.path / "checkpoints/step_20/state.json"));
  auto latest = latest_checkpoint(dir.path.string());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(fs::path(*latest).filename(), "step_30");

  CheckpointData back = load_checkpoint(*latest);
  EXPECT_EQ(back.state["step"], 30);
  EXPECT_EQ(back.state["format_version"], kCheckpointFormatVersion);
  EXPECT_EQ(back.state["plugin"], "test");
  EXPECT_EQ(back.state["sha256"].size(), 3u);
  EXPECT_EQ(back.optimizer.at("weight.step").item<int64_t>(), 30);

  torch::nn::Sequential other(torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3));
  load_module_state(*other, back.model, *latest);
  auto a = module_state(*net), b = module_state(*other);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_TRUE(torch::equal(t, b.at(name))) << name;

  // A shape mismatch names the tensor.
  torch::nn::Sequential wrong(torch::nn::Linear(4, 5), torch::nn::BatchNorm1d(5));
  try {
    load_module_state(*wrong, back.model, *latest);
    FAIL() << "mis-shaped weights accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("0.weight"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, CorruptionIsDetectedAndNamesTheFile) {
  TempDir dir;
  torch::nn::Linear net(4, 3);
  const std::string ck = save_checkpoint(dir.path.string(), 5, make_data(*net, 5), 0);
  const std::string victim = ck + "/model.safetensors";
  {
    // Flip every bit of one data byte: always a change (writing a fixed value was a no-op whenever the
    // random weights already held it there).
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-3, std::ios::end);
    const char byte = static_cast<char>(f.get());
    f.seekp(-3, std::ios::end);
    f.put(static_cast<char>(~byte));
  }
  try {
    load_checkpoint(ck);
    FAIL() << "corrupt checkpoint accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, CrashBeforeRenameLeavesPreviousLoadable) {
  TempDir dir;
  torch::nn::Linear net(4, 3);
  save_checkpoint(dir.path.string(), 100, make_data(*net, 100), 2);
  // Simulate a crash mid-save of step 200: a half-written tmp dir, never renamed.
  const fs::path tmp = dir.path / "checkpoints/.tmp_step_200";
  fs::create_directories(tmp);
  aobench::testing::write_text((tmp / "model.safetensors").string(), "partial");
  auto latest = latest_checkpoint(dir.path.string());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(fs::path(*latest).filename(), "step_100");
  EXPECT_NO_THROW(load_checkpoint(*latest));

  // Crash after the rename but before `latest` was rewritten: `latest` still names step_100, valid.
  // If `latest` is missing or names a vanished dir, the newest complete step_* wins.
  fs::remove(dir.path / "checkpoints/latest");
  latest = latest_checkpoint(dir.path.string());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(fs::path(*latest).filename(), "step_100");

  // The next save replaces the stale tmp dir and succeeds.
  save_checkpoint(dir.path.string(), 200, make_data(*net, 200), 2);
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_EQ(fs::path(*latest_checkpoint(dir.path.string())).filename(), "step_200");
}

TEST(Checkpoint, MissingRunHasNoLatest) {
  TempDir dir;
  EXPECT_FALSE(latest_checkpoint(dir.path.string()).has_value());
  EXPECT_THROW(load_checkpoint(dir.file("nope")), CheckpointError);
}

}  // namespace
}  // namespace aobench
