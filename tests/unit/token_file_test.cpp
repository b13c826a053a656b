// Implements: tests of token_file.h — header round trip (uint16 and uint32), raw nanoGPT files, corrupt /
// truncated / wrong-magic / wrong-version files, BatchSampler determinism, resume and rank shards,
// and eval window starts.
#include <cstdio>
#include <cstring>

#include "core/errors.h"
#include "datasets/token_file.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

std::vector<int32_t> read_ints(const std::string& path) {
  std::string s = testing::read_text(path);
  std::vector<int32_t> v(s.size() / 4);
  std::memcpy(v.data(), s.data(), v.size() * 4);
  return v;
}

template <class F>
std::string data_error_text(F f) {
  try {
    f();
  } catch (const DataError& e) {
    return std::string(e.what()) + " | " + e.hint();
  }
  return "";
}

TEST(TokenFile, RoundTripUint16AndHeader) {
  testing::TempDir d;
  std::vector<uint32_t> toks;
  for (uint32_t i = 0; i < 5000; ++i) toks.push_back((i * 7919u) % 50257u);
  write_token_file(d.file("a.bin"), toks, 50257, 1024, 50256);
  auto ints = read_ints(d.file("a.bin"));
  EXPECT_EQ(ints[0], kTokenFileMagic);
  EXPECT_EQ(ints[1], 1);
  EXPECT_EQ(ints[2], 5000);
  EXPECT_EQ(std::filesystem::file_size(d.file("a.bin")), 1024u + 2u * 5000u);
  TokenFile f(d.file("a.bin"));
  EXPECT_FALSE(f.raw());
  EXPECT_EQ(f.size(), 5000);
  EXPECT_EQ(f.header().vocab_size, 50257);
  EXPECT_EQ(f.header().window, 1024);
  EXPECT_EQ(f.header().eos, 50256);
  for (int64_t i = 0; i < 5000; i += 97) EXPECT_EQ(f.at(i), toks[i]);
  auto s = f.slice(10, 5);
  ASSERT_EQ(s.dtype(), torch::kInt64);
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(s[i].item<int64_t>(), toks[10 + i]);
  EXPECT_THROW(f.slice(4998, 5), DataError);
  EXPECT_THROW(f.at(5000), DataError);
  // no temp file left behind
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(d.path)) {
    (void)e;
    ++n;
  }
  EXPECT_EQ(n, 1);
}

// The tokenizer's name travels in the header; a reader expecting another one refuses the file.
TEST(TokenFile, TokenizerNameInTheHeader) {
  testing::TempDir d;
  const std::vector<uint32_t> toks = {1, 2, 3, 256};
  write_token_file(d.file("b.bin"), toks, 257, 0, 256, "bytes");
  write_token_file(d.file("old.bin"), toks, 257, 0, 256);  // as files written before the name was recorded
  const auto ints = read_ints(d.file("b.bin"));
  EXPECT_EQ(std::memcmp(&ints[6], "bytes", 5), 0);
  EXPECT_EQ(ints[8], 0);
  TokenFile b(d.file("b.bin")), old(d.file("old.bin"));
  EXPECT_EQ(b.header().tokenizer, "bytes");
  EXPECT_EQ(old.header().tokenizer, "");
  EXPECT_NO_THROW(check_tokenizer(b, "bytes", "run r"));
  EXPECT_NO_THROW(check_tokenizer(old, "gpt2", "run r"));  // unknown: nothing to compare
  EXPECT_NO_THROW(check_tokenizer(b, "", "run r"));
  try {
    check_tokenizer(b, "gpt2", "Hugging Face model m");
    FAIL() << "a byte file passed as GPT-2 tokens";
  } catch (const DataError& e) {
    const std::string what = e.what();
    for (const char* part : {"b.bin", "'bytes'", "'gpt2'", "Hugging Face model m"})
      EXPECT_NE(what.find(part), std::string::npos) << part << ": " << what;
  }
  EXPECT_THROW(write_token_file(d.file("c.bin"), toks, 257, 0, 256, std::string(32, 'x')), ConfigError);
}

TEST(TokenFile, Uint32WhenIdsAreLarge) {
  testing::TempDir d;
  std::vector<uint32_t> toks = {1, 70000, 3, 4000000};
  write_token_file(d.file("b.bin"), toks, 5000000);
  TokenFile f(d.file("b.bin"));
  EXPECT_EQ(f.header().version, 2);
  EXPECT_EQ(f.at(1), 70000u);
  EXPECT_EQ(f.at(3), 4000000u);
  EXPECT_EQ(std::filesystem::file_size(d.file("b.bin")), 1024u + 16u);
}

TEST(TokenFile, RawNanoGptFile) {
  testing::TempDir d;
  std::vector<uint16_t> raw = {5, 6, 7, 65535};
  testing::write_text(d.file("raw.bin"), std::string(reinterpret_cast<char*>(raw.data()), 8));
  TokenFile f(d.file("raw.bin"));
  EXPECT_TRUE(f.raw());
  EXPECT_EQ(f.size(), 4);
  EXPECT_EQ(f.at(3), 65535u);
  EXPECT_THROW(TokenFile(d.file("raw.bin"), /*allow_raw=*/false), DataError);
}

TEST(TokenFile, CorruptFilesGiveDataErrorsNamingTheFile) {
  testing::TempDir d;
  std::vector<uint32_t> toks(100, 42);
  write_token_file(d.file("ok.bin"), toks, 50257);
  const std::string full = testing::read_text(d.file("ok.bin"));

  testing::write_text(d.file("trunc.bin"), full.substr(0, full.size() - 10));
  std::string msg = data_error_text([&] { TokenFile f(d.file("trunc.bin")); });
  EXPECT_NE(msg.find("trunc.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find("aobench prepare"), std::string::npos) << msg;

  testing::write_text(d.file("hdr.bin"), full.substr(0, 100));
  msg = data_error_text([&] { TokenFile f(d.file("hdr.bin")); });
  EXPECT_NE(msg.find("hdr.bin"), std::string::npos) << msg;

  std::string bad_ver = full;
  int32_t v = 7;
  std::memcpy(&bad_ver[4], &v, 4);
  testing::write_text(d.file("ver.bin"), bad_ver);
  msg = data_error_text([&] { TokenFile f(d.file("ver.bin")); });
  EXPECT_NE(msg.find("version 7"), std::string::npos) << msg;

  std::string bad_magic = full;
  int32_t m = 12345;
  std::memcpy(&bad_magic[0], &m, 4);
  testing::write_text(d.file("magic.bin"), bad_magic);
  msg = data_error_text([&] { TokenFile f(d.file("magic.bin"), false); });
  EXPECT_NE(msg.find("magic"), std::string::npos) << msg;

  testing::write_text(d.file("odd.bin"), "abc");
  EXPECT_NE(data_error_text([&] { TokenFile f(d.file("odd.bin")); }).find("odd"), std::string::npos);
  testing::write_text(d.file("empty.bin"), "");
  EXPECT_NE(data_error_text([&] { TokenFile f(d.file("empty.bin")); }).find("empty"), std::string::npos);
  EXPECT_NE(data_error_text([&] { TokenFile f(d.file("missing.bin")); }).find("missing.bin"), std::string::npos);
}

TEST(BatchSampler, DeterministicResumableAndSharded) {
  testing::TempDir d;
  std::vector<uint32_t> toks(10000);
  for (uint32_t i = 0; i < toks.size(); ++i) toks[i] = i % 60000;
  write_token_file(d.file("t.bin"), toks, 60000);
  auto f = std::make_shared<TokenFile>(d.file("t.bin"));

  BatchSampler a(f, 16, 1234), b(f, 16, 1234);
  auto xa = a.next(8), xb = b.next(8);
  ASSERT_EQ(xa.sizes(), (std::vector<int64_t>{8, 16}));
  EXPECT_TRUE(torch::equal(xa, xb));
  // consecutive tokens inside a window
  for (int64_t bi = 0; bi < 8; ++bi) EXPECT_EQ(xa[bi][15].item<int64_t>() - xa[bi][0].item<int64_t>(), 15);
  auto state = a.get_state();
  auto next1 = a.next(4);
  a.set_state(state);
  EXPECT_TRUE(torch::equal(a.next(4), next1));
  BatchSampler c(f, 16, 99);
  EXPECT_FALSE(torch::equal(c.next(8), b.next(8)));

  // rank shards are disjoint: rank r starts in [r*N/W, (r+1)*N/W)
  for (int r = 0; r < 4; ++r) {
    BatchSampler s(f, 16, 5, r, 4);
    auto x = s.next(64);
    auto starts = x.select(1, 0);
    EXPECT_GE(starts.min().item<int64_t>(), 2500 * r);
    EXPECT_LT(starts.max().item<int64_t>(), 2500 * (r + 1));
  }
  EXPECT_THROW(BatchSampler(f, 20000, 1), DataError);
  EXPECT_THROW(BatchSampler(f, 16, 1, 3, 2), ConfigError);
}

TEST(EvalWindows, NonOverlappingAndStrided) {
  testing::TempDir d;
  write_token_file(d.file("e.bin"), std::vector<uint32_t>(1024 * 5 + 7, 1), 2);
  TokenFile f(d.file("e.bin"));
  EXPECT_EQ(eval_window_starts(f, 1024), (std::vector<int64_t>{0, 1024, 2048, 3072, 4096}));
  EXPECT_EQ(eval_window_starts(f, 1024, 1, 2), (std::vector<int64_t>{1024, 3072}));
  EXPECT_THROW(eval_window_starts(f, 0), ConfigError);
}

}  // namespace
}  // namespace aobench
