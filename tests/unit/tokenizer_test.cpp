// Implements: tests of tokenizer.h — GPT-2 BPE against the tiktoken golden
// (tests/data/make_tokenizer_golden.py, spec-sedd-radd.md §4.3 step 1), round trips, invalid UTF-8 safety and
// the byte tokenizer.
#include <time.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "datasets/data_dir.h"
#include "datasets/tokenizer.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

std::unique_ptr<Tokenizer> gpt2_or_skip() {
  const char* g = std::getenv("AOBENCH_GPT2_DIR");
  if ((!g || !*g) && testing::shared_data_dir().empty()) return nullptr;
  return make_tokenizer("gpt2");
}

#define GPT2_OR_SKIP(var)    \
  auto var = gpt2_or_skip(); \
  if (!var) GTEST_SKIP() << "AOBENCH_DATA_DIR / AOBENCH_GPT2_DIR not set; skipping GPT-2 tests"

TEST(Gpt2Tokenizer, MatchesTiktokenGolden) {
  GPT2_OR_SKIP(tok);
  std::ifstream f(std::string(AOBENCH_TEST_DATA) + "/tokenizer/gpt2_golden.json");
  ASSERT_TRUE(f) << "missing tests/data/tokenizer/gpt2_golden.json";
  auto golden = nlohmann::json::parse(f);
  ASSERT_GE(golden["cases"].size(), 20u);
  size_t total_ids = 0;
  for (const auto& c : golden["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const auto want = c["ids"].get<std::vector<uint32_t>>();
    const auto got = tok->encode(text);
    EXPECT_EQ(got, want) << "input: " << text.substr(0, 80);
    EXPECT_EQ(tok->decode(got), text);
    total_ids += want.size();
  }
  EXPECT_GT(total_ids, 3000u);  // the long real passages are in
}

TEST(Gpt2Tokenizer, BasicsAndEos) {
  GPT2_OR_SKIP(tok);
  EXPECT_EQ(tok->name(), "gpt2");
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->eos_id(), 50256);
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<uint32_t>{15496, 995}));
  EXPECT_EQ(tok->decode({50256}), "<|endoftext|>");
  // The special string is never parsed as EOS.
  auto ids = tok->encode("<|endoftext|>");
  EXPECT_GT(ids.size(), 1u);
  EXPECT_THROW(tok->decode({50257}), DataError);
}

TEST(Gpt2Tokenizer, ArbitraryBytesNeverCrashAndRoundTrip) {
  GPT2_OR_SKIP(tok);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string s(rng() % 64, '\0');
    for (auto& ch : s) ch = static_cast<char>(rng() & 0xFF);
    if (trial % 3 == 0) s = "ok \xff\xfe text \xc3 mid" + s + "\xe2\x82";  // truncated sequences
    auto ids = tok->encode(s);
    for (auto id : ids) ASSERT_LT(id, 50256u);
    EXPECT_EQ(tok->decode(ids), s);
  }
}

TEST(Gpt2Tokenizer, MissingVocabNamesFileAndEnvVars) {
  testing::TempDir dir;
  const char* old_data = std::getenv("AOBENCH_DATA_DIR");
  const std::string saved = old_data ? old_data : "";
  // No folder given, AOBENCH_GPT2_DIR and AOBENCH_DATA_DIR set to an empty folder (unset, the data folder
  // beside the checkout would be found): the error names both.
  ::setenv("AOBENCH_GPT2_DIR", dir.path.c_str(), 1);
  ::setenv("AOBENCH_DATA_DIR", dir.path.c_str(), 1);
  try {
    make_tokenizer("gpt2");
    ADD_FAILURE() << "found a vocabulary in an empty folder";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("encoder.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.hint()).find("AOBENCH_GPT2_DIR"), std::string::npos) << e.hint();
    EXPECT_NE(std::string(e.hint()).find("AOBENCH_DATA_DIR"), std::string::npos) << e.hint();
  }
  ::unsetenv("AOBENCH_GPT2_DIR");
  if (saved.empty())
    ::unsetenv("AOBENCH_DATA_DIR");
  else
    ::setenv("AOBENCH_DATA_DIR", saved.c_str(), 1);
  // An explicit folder (--vocab-dir) that lacks the files is an error naming it, never a silent fallback
  // to the environment's vocabulary.
  try {
    make_tokenizer("gpt2", dir.path.string());
    ADD_FAILURE() << "an explicit vocabulary folder without the files was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.path.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lacks encoder.json or vocab.bpe"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_tokenizer("nope"), ConfigError);
}

// A naive tiktoken byte_pair_merge over encoder.json (lowest id of a concatenation, leftmost on ties;
// quadratic), for lowercase ASCII pieces whose byte-level spelling is the text itself.
std::vector<uint32_t> reference_bpe(const nlohmann::json& encoder, const std::string& piece) {
  if (encoder.contains(piece)) return {encoder[piece].get<uint32_t>()};
  std::vector<std::string> parts;
  for (char c : piece) parts.emplace_back(1, c);
  for (;;) {
    uint32_t best = UINT32_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = encoder.find(parts[i] + parts[i + 1]);
      if (it != encoder.end() && it->get<uint32_t>() < best) best = it->get<uint32_t>(), at = i;
    }
    if (best == UINT32_MAX) break;
    parts[at] += parts[at + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  std::vector<uint32_t> ids;
  for (const auto& p : parts) ids.push_back(encoder[p].get<uint32_t>());
  return ids;
}

std::string random_letters(size_t n, uint32_t seed, int alphabet) {
  std::string s(n, 'a');
  for (auto& c : s) c = static_cast<char>('a' + ((seed = seed * 1103515245u + 12345u) >> 16) % alphabet);
  return s;
}

TEST(Gpt2Tokenizer, LongPiecesMergeLikeTheReferenceAndFast) {
  GPT2_OR_SKIP(tok);
  const char* g = std::getenv("AOBENCH_GPT2_DIR");
  const std::string dir = g && *g ? g : testing::shared_data_dir() + "/gpt2";
  std::ifstream ef(dir + "/encoder.json");
  ASSERT_TRUE(ef) << dir;
  const nlohmann::json encoder = nlohmann::json::parse(ef);
  // One pre-token each (letters only): the priority-queue merge gives the naive algorithm's ids.
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    const std::string piece = random_letters(1 + seed * 7 % 400, seed, seed % 2 ? 26 : 3);
    ASSERT_EQ(tok->encode(piece), reference_bpe(encoder, piece)) << piece;
  }
  // 1 MB as one pre-token: the merge is O(n log n) in the piece length, so this takes well under a second.
  // Timed in this thread's CPU seconds: the test machine may be shared, which stretches wall time only.
  const std::string big = random_letters(1 << 20, 11, 26);
  auto cpu_s = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  };
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_s();
  const auto ids = tok->encode(big);
  const double cpu = cpu_s() - c0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(cpu, 1.0) << "1 MB pre-token took " << cpu << " CPU s (" << wall << " s wall)";
  EXPECT_EQ(tok->decode(ids), big);
}

// One rule for the binary and the tests (datasets/data_dir.h): without $AOBENCH_DATA_DIR the shared data
// folder is ../shared/data beside the checkout, so `aobench tokenize` works after the README's setup.
TEST(SharedDataDir, EnvVarElseBesideTheCheckout) {
  const char* old = std::getenv("AOBENCH_DATA_DIR");
  const std::string saved = old ? old : "";
  ::setenv("AOBENCH_DATA_DIR", "/some/where", 1);
  EXPECT_EQ(shared_data_dir(), "/some/where");
  ::unsetenv("AOBENCH_DATA_DIR");
  const std::filesystem::path beside =
      (std::filesystem::path(AOBENCH_SOURCE_DIR) / ".." / "shared" / "data").lexically_normal();
  EXPECT_EQ(shared_data_dir(), std::filesystem::is_directory(beside) ? beside.string() : "");
  EXPECT_NE(shared_data_dir_rule().find(beside.string()), std::string::npos);
  if (std::filesystem::is_directory(beside / "gpt2")) {
    ::unsetenv("AOBENCH_GPT2_DIR");
    testing::TempDir tmp;
    testing::write_text(tmp.file("in.txt"), "Hello world");
    std::string out;
    EXPECT_EQ(testing::run_aobench("tokenize --tokenizer gpt2 < " + tmp.file("in.txt"), &out), 0) << out;
    EXPECT_NE(out.find("[15496,995]"), std::string::npos) << out;  // tiktoken gpt2
  }
  if (!saved.empty()) ::setenv("AOBENCH_DATA_DIR", saved.c_str(), 1);
}

TEST(ByteTokenizer, EncodeDecode) {
  auto tok = make_tokenizer("bytes");
  EXPECT_EQ(tok->name(), "bytes");
  EXPECT_EQ(tok->vocab_size(), 257);
  EXPECT_EQ(tok->eos_id(), 256);
  std::string s = "h\xc3\xa9\xff\x00z";
  s.push_back('\0');
  auto ids = tok->encode(s);
  ASSERT_EQ(ids.size(), s.size());
  EXPECT_EQ(ids[0], 'h');
  EXPECT_EQ(ids[1], 0xC3u);
  EXPECT_EQ(ids[3], 0xFFu);
  EXPECT_EQ(tok->decode(ids), s);
  EXPECT_EQ(tok->decode({104, 256, 105}), "h<|endoftext|>i");
  EXPECT_THROW(tok->decode({257}), DataError);
}

}  // namespace
}  // namespace aobench
