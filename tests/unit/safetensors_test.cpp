// Implements: tests of core/safetensors.cpp (DESIGN.md checkpoints): round trips of
// every dtype and of metadata, a file written by the Python `safetensors` package, and corrupt files
// (truncated, oversized header length, bad JSON, a name given twice, out-of-range / overlapping offsets,
// unknown dtype), each of which must raise CheckpointError naming the file (and the tensor where there is one).
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/safetensors.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

// A scratch directory cleaned with POSIX calls: in this build std::filesystem::remove_all (used by
// testing::TempDir) resolves to libtorch.so's copy and crashes, so these tests avoid it.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/aobench_st_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    if (DIR* d = ::opendir(path.c_str())) {
      while (dirent* e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) ::unlink((path + "/" + e->d_name).c_str());
      ::closedir(d);
    }
    ::rmdir(path.c_str());
  }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

// A raw file: 8-byte LE header length, the header text, then `data`.
std::string raw_file(const std::string& header, const std::string& data, int64_t len_override = -1) {
  const uint64_t n = len_override >= 0 ? static_cast<uint64_t>(len_override) : header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

// Expects CheckpointError whose message mentions every string in `needles`.
void expect_error(const std::string& path, std::initializer_list<std::string> needles) {
  try {
    read_safetensors(path);
    FAIL() << "no error for " << path;
  } catch (const CheckpointError& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    EXPECT_FALSE(e.hint().empty());
  }
}

TEST(Safetensors, RoundTripAllDtypesAndMetadata) {
  TempDir tmp;
  TensorMap m;
  m["f64"] = torch::randn({3, 4}, torch::kFloat64);
  m["f32"] = torch::randn({2, 3, 5});
  m["f16"] = torch::randn({7}).to(torch::kFloat16);
  m["bf16"] = torch::randn({4, 4}).to(torch::kBFloat16);
  m["i64"] = torch::arange(-5, 5, torch::kInt64).reshape({2, 5});
  m["i32"] = torch::arange(-3, 3, torch::kInt32);
  m["i16"] = torch::arange(-3, 3, torch::kInt16);
  m["i8"] = torch::arange(-3, 3, torch::kInt8);
  m["u8"] = torch::arange(0, 255, torch::kUInt8);
  m["bool"] = torch::tensor({true, false, true});
  m["scalar"] = torch::tensor(3.5);         // 0-dim
  m["empty"] = torch::empty({0, 3});        // zero bytes
  m["strided"] = torch::randn({4, 6}).t();  // non-contiguous input
  const std::map<std::string, std::string> meta = {{"format_version", "1"}, {"note", "héllo \"q\""}};
  const std::string path = tmp.file("a.safetensors");
  write_safetensors(path, m, meta);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(::getpid())));

  SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.tensors.size(), m.size());
  for (const auto& [name, t] : m) {
    ASSERT_TRUE(f.tensors.count(name)) << name;
    const torch::Tensor& r = f.tensors.at(name);
    EXPECT_EQ(r.scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(r.sizes(), t.sizes()) << name;
    EXPECT_TRUE(torch::equal(r, t)) << name;  // bitwise: no conversion happens anywhere
  }
  // The data region starts 8-byte aligned, as the Rust reference writes it.
  const std::string bytes = testing::read_text(path);
  uint64_t hlen = 0;
  std::memcpy(&hlen, bytes.data(), 8);
  EXPECT_EQ(hlen % 8, 0u);
}

TEST(Safetensors, ReadsFileWrittenByPythonPackage) {
  // tests/data/make_hf_tiny_gpt2.py writes expected.safetensors with safetensors.torch.save_file.
  SafetensorsFile f = read_safetensors(std::string(AOBENCH_TEST_DATA) + "/hf_tiny_gpt2/expected.safetensors");
  EXPECT_EQ(f.metadata.at("source"), "make_hf_tiny_gpt2.py");
  const auto ramp = torch::arange(6, torch::kFloat64).reshape({2, 3}) - 2;
  for (const char* name : {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8"})
    EXPECT_TRUE(torch::equal(f.tensors.at(std::string("dtype_") + name).to(torch::kFloat64), ramp)) << name;
  EXPECT_EQ(f.tensors.at("dtype_BF16").scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(f.tensors.at("dtype_U8"), torch::arange(6, torch::kUInt8).reshape({2, 3})));
  EXPECT_TRUE(
      torch::equal(f.tensors.at("dtype_BOOL"), torch::tensor({true, false, true, false, false, true}).reshape({2, 3})));
  EXPECT_EQ(f.tensors.at("logits").sizes(), (std::vector<int64_t>{2, 16, 300}));
  EXPECT_EQ(f.tensors.at("input_ids").scalar_type(), torch::kInt64);
  // The HF model file (written by save_pretrained) parses as well.
  SafetensorsFile g = read_safetensors(std::string(AOBENCH_TEST_DATA) + "/hf_tiny_gpt2/model.safetensors");
  EXPECT_EQ(g.tensors.at("transformer.wte.weight").sizes(), (std::vector<int64_t>{300, 32}));
}

TEST(Safetensors, MissingFile) {
  TempDir tmp;
  expect_error(tmp.file("nope.safetensors"), {"nope.safetensors", "cannot open"});
}

TEST(Safetensors, Truncated) {
  TempDir tmp;
  const std::string good = tmp.file("good.safetensors");
  write_safetensors(good, {{"w", torch::randn({8, 8})}});
  const std::string bytes = testing::read_text(good);
  const std::string p = tmp.file("trunc.safetensors");
  testing::write_text(p, bytes.substr(0, bytes.size() - 10));  // lose the tail of the data
  expect_error(p, {"trunc.safetensors", "'w'", "beyond the data region"});
  testing::write_text(p, bytes.substr(0, 5));  // not even a header length
  expect_error(p, {"trunc.safetensors", "fewer than the 8-byte"});
}

TEST(Safetensors, HeaderLengthTooBig) {
  TempDir tmp;
  const std::string p = tmp.file("big.safetensors");
  testing::write_text(p, raw_file("{}", "", 1000));
  expect_error(p, {"big.safetensors", "header length 1000 exceeds the file size"});
  testing::write_text(p, raw_file("{}", "", int64_t{1} << 40));
  expect_error(p, {"big.safetensors", "100 MB"});
}

TEST(Safetensors, BadJson) {
  TempDir tmp;
  const std::string p = tmp.file("json.safetensors");
  testing::write_text(p, raw_file("{\"w\": {\"dtype\": ", ""));
  expect_error(p, {"json.safetensors", "not valid JSON"});
  testing::write_text(p, raw_file("[1, 2]", ""));
  expect_error(p, {"json.safetensors", "not an object"});
  testing::write_text(p, raw_file(R"({"w": {"dtype": "F32", "shape": [2]}})", std::string(8, '\0')));
  expect_error(p, {"'w'", "data_offsets"});
  testing::write_text(p, raw_file(R"({"__metadata__": {"a": 1}})", ""));
  expect_error(p, {"metadata 'a'"});
}

// nlohmann keeps the last of two equal keys: without the check each file below would load, with one 'w'.
TEST(Safetensors, DuplicateTensorNamesAndFieldsAreRefused) {
  TempDir tmp;
  const std::string p = tmp.file("dup.safetensors");
  const std::string entry = R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";
  testing::write_text(p, raw_file("{\"w\": " + entry + ", \"w\": " + entry + "}", std::string(8, '\0')));
  expect_error(p, {"dup.safetensors", "duplicate key 'w'"});
  testing::write_text(p, raw_file(R"({"w": {"dtype": "I32", "dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                                  std::string(8, '\0')));
  expect_error(p, {"dup.safetensors", "duplicate key 'w.dtype'"});
  testing::write_text(p, raw_file(R"({"__metadata__": {"step": "1", "step": "2"}})", ""));
  expect_error(p, {"duplicate key '__metadata__.step'"});
  // The same field names in two entries are not duplicates.
  testing::write_text(
      p, raw_file(R"({"a": )" + entry + R"(, "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
                  std::string(16, '\0')));
  EXPECT_EQ(read_safetensors(p).tensors.size(), 2u);
}

TEST(Safetensors, OffsetsOutOfRangeOverlapAndShapeMismatch) {
  TempDir tmp;
  const std::string p = tmp.file("off.safetensors");
  const std::string data(16, '\0');
  testing::write_text(p, raw_file(R"({"w": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}})", data));
  expect_error(p, {"off.safetensors", "'w'", "beyond the data region"});
  testing::write_text(p, raw_file(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                      "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
                                  data));
  expect_error(p, {"'b'", "overlap"});
  testing::write_text(p, raw_file(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}})", data));
  expect_error(p, {"'a'", "needs 12 bytes"});
  testing::write_text(p, raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})", data));
  expect_error(p, {"'a'", "gap"});
  testing::write_text(p, raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", data));
  expect_error(p, {"trailing bytes"});
  testing::write_text(p, raw_file(R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", data));
  expect_error(p, {"'a'", "non-negative"});
}

TEST(Safetensors, UnknownDtype) {
  TempDir tmp;
  const std::string p = tmp.file("dt.safetensors");
  testing::write_text(
      p, raw_file(R"({"q": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [0, 4]}})", std::string(4, '\0')));
  try {
    read_safetensors(p);
    FAIL() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'q'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("F8_E4M3"), std::string::npos);
    EXPECT_NE(e.hint().find("BF16"), std::string::npos);  // the hint lists what is supported
  }
  // Writing an unsupported dtype fails too, naming the tensor, and leaves no file behind.
  const std::string w = tmp.file("w.safetensors");
  EXPECT_THROW(write_safetensors(w, {{"c", torch::zeros({2}, torch::kComplexFloat)}}), CheckpointError);
  EXPECT_FALSE(std::filesystem::exists(w));
  EXPECT_FALSE(std::filesystem::exists(w + ".tmp." + std::to_string(::getpid())));
}

TEST(Safetensors, BoolBytesMustBeZeroOrOne) {
  TempDir tmp;
  const std::string p = tmp.file("b.safetensors");
  testing::write_text(
      p, raw_file(R"({"m": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}})", std::string("\x01\x07", 2)));
  expect_error(p, {"'m'", "BOOL"});
}

TEST(Safetensors, WriteFileAtomicReplaces) {
  TempDir tmp;
  const std::string p = tmp.file("r.json");
  write_file_atomic(p, "first");
  write_file_atomic(p, "second");
  EXPECT_EQ(testing::read_text(p), "second");
  EXPECT_FALSE(std::filesystem::exists(p + ".tmp." + std::to_string(::getpid())));
  EXPECT_THROW(write_file_atomic(tmp.file("no/such/dir/x"), "x"), CheckpointError);
}

}  // namespace
}  // namespace aobench
