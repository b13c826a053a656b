// Implements: tests of packing.h (spec-sedd-radd.md §4.3): EOS after every row, simple flooring and the
// reference rule (8 contiguous shards → 1000-row groups → whole windows, remainders dropped), encoding
// rows on N threads (datasets/encode_rows.h), and the `aobench prepare` / `aobench tokenize` commands end
// to end with the byte tokenizer.
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "core/errors.h"
#include "core/progress.h"
#include "datasets/encode_rows.h"
#include "datasets/packing.h"
#include "datasets/token_file.h"
#include "datasets/tokenizer.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

std::vector<std::vector<uint32_t>> make_rows(int n, int len) {
  std::vector<std::vector<uint32_t>> rows(n);
  for (int i = 0; i < n; ++i) rows[i].assign(len, static_cast<uint32_t>(i % 1000));
  return rows;
}

TEST(Packing, NoneConcatenatesWithEos) {
  std::vector<std::vector<uint32_t>> rows = {{1, 2}, {}, {3}};
  auto r = pack_rows(rows, 9, {});
  EXPECT_EQ(r.tokens, (std::vector<uint32_t>{1, 2, 9, 9, 3, 9}));
  EXPECT_EQ(r.windows, 0);
  EXPECT_EQ(r.dropped, 0);
}

TEST(Packing, SimpleFloorsGlobally) {
  PackOptions o;
  o.mode = "simple";
  o.window = 4;
  auto r = pack_rows({{1, 2}, {3, 4, 5}, {6}}, 0, o);  // 3 + 4 + 2 = 9 tokens
  EXPECT_EQ(r.tokens, (std::vector<uint32_t>{1, 2, 0, 3, 4, 5, 0, 6}));
  EXPECT_EQ(r.windows, 2);
  EXPECT_EQ(r.dropped, 1);
}

TEST(Packing, ContiguousShardsMatchHfDatasets) {
  // HF: div = n // k, mod = n % k; shard i = [div*i + min(i, mod), … + div + (i < mod)).
  int64_t b, e;
  contiguous_shard(10, 8, 0, &b, &e);
  EXPECT_EQ(b, 0);
  EXPECT_EQ(e, 2);
  contiguous_shard(10, 8, 1, &b, &e);
  EXPECT_EQ(b, 2);
  EXPECT_EQ(e, 4);
  contiguous_shard(10, 8, 2, &b, &e);
  EXPECT_EQ(b, 4);
  EXPECT_EQ(e, 5);
  contiguous_shard(10, 8, 7, &b, &e);
  EXPECT_EQ(b, 9);
  EXPECT_EQ(e, 10);
}

TEST(Packing, ReferenceDropsEachGroupsRemainder) {
  // 8000 rows of 9 tokens (+EOS = 10): 8 shards of 1000 rows = 8 groups of 10000 tokens.
  // window 1024 → 9 blocks per group (9216 tokens), 784 dropped per group.
  PackOptions o;
  o.mode = "reference";
  o.window = 1024;
  auto r = pack_rows(make_rows(8000, 9), 50256, o);
  EXPECT_EQ(r.windows, 72);
  EXPECT_EQ(r.tokens.size(), 72u * 1024u);
  EXPECT_EQ(r.dropped, 8 * 784);
  // simple packing keeps more: 80000 / 1024 = 78 blocks
  o.mode = "simple";
  EXPECT_EQ(pack_rows(make_rows(8000, 9), 50256, o).windows, 78);
  // block 9 (the first of group 2) starts with the first row of shard 1 (row 1000 → value 0 of row 1000)
  o.mode = "reference";
  auto rows = make_rows(8000, 9);
  for (int i = 0; i < 8000; ++i) rows[i].assign(9, static_cast<uint32_t>(i));
  r = pack_rows(rows, 999999, o);
  EXPECT_EQ(r.tokens[9 * 1024], 1000u);
  EXPECT_EQ(r.tokens[0], 0u);
}

TEST(Packing, ReferenceUnevenShardsAndGroups) {
  // 8010 rows: shards 0..1 get 1002 rows, the rest 1001 → each shard is a 1000-row group + a tail group.
  PackOptions o;
  o.mode = "reference";
  o.window = 8;
  auto rows = make_rows(8010, 3);  // 4 tokens per row with EOS
  auto r = pack_rows(rows, 7, o);
  // group of 1000 rows = 4000 tokens = 500 windows; tail groups: 2 rows (8 tok → 1 window) or 1 row (0).
  EXPECT_EQ(r.windows, 8 * 500 + 2 * 1);
  EXPECT_EQ(r.dropped, 6 * 4);
  EXPECT_EQ(static_cast<int64_t>(r.tokens.size()), r.windows * 8);
}

TEST(Packing, BadOptions) {
  PackOptions o;
  o.mode = "weird";
  EXPECT_THROW(pack_rows({{1}}, 0, o), ConfigError);
  o.mode = "simple";
  o.window = 0;
  EXPECT_THROW(pack_rows({{1}}, 0, o), ConfigError);
}

// A tokenizer that notes the threads it runs on and throws on the rows listed in `fail_on`.
class RecordingTokenizer : public Tokenizer {
 public:
  std::string name() const override { return "recording"; }
  int32_t vocab_size() const override { return 1000; }
  int32_t eos_id() const override { return 999; }
  std::vector<uint32_t> encode(const std::string& text) const override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      threads_.insert(std::this_thread::get_id());
    }
    if (fail_on.count(text)) throw DataError("recording: cannot encode '" + text + "'", "recording hint");
    std::vector<uint32_t> ids;
    for (char c : text) ids.push_back(static_cast<uint32_t>(static_cast<unsigned char>(c)) * 3 % 997);
    return ids;
  }
  std::string decode(const std::vector<uint32_t>&) const override { return ""; }
  size_t threads_used() {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t n = threads_.size();
    threads_.clear();
    return n;
  }
  std::set<std::string> fail_on;

 private:
  mutable std::mutex mutex_;
  mutable std::set<std::thread::id> threads_;
};

std::vector<std::string> numbered_rows(int n) {
  std::vector<std::string> rows;
  for (int i = 0; i < n; ++i) rows.push_back("r" + std::to_string(i) + std::string(i % 7, 'x'));
  return rows;
}

TEST(PrepareEncode, SameIdsOnEveryThreadCountAndThatManyThreads) {
  RecordingTokenizer tok;
  const auto rows = numbered_rows(500);
  std::vector<std::vector<uint32_t>> expected;
  for (const auto& r : rows) expected.push_back(tok.encode(r));
  tok.threads_used();
  const int pool_before = at::get_num_threads();
  for (int threads : {1, 2, 3, 5}) {
    std::ostringstream sink;
    Progress::Options quiet;
    quiet.out = &sink;
    Progress progress("encode", static_cast<int64_t>(rows.size()), "rows", quiet);
    EXPECT_EQ(encode_rows(tok, rows, threads, &progress), expected) << threads << " threads";
    EXPECT_EQ(tok.threads_used(), static_cast<size_t>(threads));  // 500 rows ≥ threads × kEncodeGrainRows
    EXPECT_EQ(progress.status().rfind("500/500", 0), 0u) << progress.status();
    EXPECT_EQ(at::get_num_threads(), pool_before) << "the intra-op pool size was not restored";
  }
  // Fewer than 16 rows per thread: ⌈20 / 16⌉ = 2 blocks, so 2 threads of the 4 asked for.
  EXPECT_EQ(encode_rows(tok, numbered_rows(20), 4, nullptr),
            std::vector<std::vector<uint32_t>>(expected.begin(), expected.begin() + 20));
  EXPECT_EQ(tok.threads_used(), 2u);
}

TEST(PrepareEncode, TheFirstFailingRowIsNamedWhateverTheTiming) {
  RecordingTokenizer tok;
  const auto rows = numbered_rows(400);
  tok.fail_on = {rows[390], rows[150], rows[151]};  // in the blocks of threads 3 and 1 of 4
  for (int round = 0; round < 5; ++round) {
    try {
      encode_rows(tok, rows, 4, nullptr, [](size_t i) { return "row " + std::to_string(i + 1) + " of in.txt"; });
      ADD_FAILURE() << "no error";
    } catch (const DataError& e) {
      EXPECT_EQ(std::string(e.what()), "cannot encode row 151 of in.txt: recording: cannot encode '" + rows[150] + "'");
      EXPECT_EQ(e.hint(), "recording hint");
    }
  }
  try {
    encode_rows(tok, rows, 2, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot encode row 151: "), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aobench

namespace aobench {
namespace {

// `aobench prepare` end to end with the byte tokenizer (no shared data needed).
TEST(PrepareCommand, TextDocsValSplitAndSidecar) {
  testing::TempDir d;
  testing::write_text(d.file("a.txt"),
                      "doc one\n<|endoftext|>\ndoc two!\n<|endoftext|>\nthird\n<|endoftext|>\n"
                      "fourth doc\n<|endoftext|>\n");
  std::string out;
  int rc = testing::run_aobench("prepare --format text --tokenizer bytes --input " + d.file("a.txt") + " --output " +
                                    d.file("t.bin") + " --val-output " + d.file("v.bin") + " --val-fraction 0.25",
                                &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("MB/s"), std::string::npos) << out;
  auto side = nlohmann::json::parse(testing::read_text(d.file("t.bin.json")));
  EXPECT_EQ(side["rows"], 3);
  EXPECT_EQ(side["bytes"], 7 + 8 + 5);
  EXPECT_EQ(side["tokens"], 7 + 8 + 5 + 3);  // one EOS per row
  EXPECT_EQ(side["vocab_size"], 257);
  EXPECT_EQ(side["packing"], "none");
  TokenFile t(d.file("t.bin"));
  EXPECT_EQ(t.size(), 23);
  EXPECT_EQ(t.at(7), 256u);  // EOS after "doc one"
  TokenFile v(d.file("v.bin"));
  EXPECT_EQ(v.size(), 11);  // the LAST row: "fourth doc" + EOS
  EXPECT_EQ(v.at(0), static_cast<uint32_t>('f'));
}

TEST(PrepareCommand, FortuneDirectoryAndSimplePacking) {
  testing::TempDir d;
  std::filesystem::create_directories(d.file("fort"));
  testing::write_text(d.file("fort/b"), "bb\n%\nbbb\n%\n");
  testing::write_text(d.file("fort/a"), "aaaa\n%\n");
  testing::write_text(d.file("fort/a.dat"), "binary index, skipped");
  std::string out;
  int rc = testing::run_aobench("prepare --format fortune --tokenizer bytes --packing simple --window 4 --input " +
                                    d.file("fort") + " --output " + d.file("f.bin"),
                                &out);
  ASSERT_EQ(rc, 0) << out;
  TokenFile f(d.file("f.bin"));
  // rows (sorted files): "aaaa", "bb", "bbb" → 5 + 3 + 4 = 12 tokens = 3 windows of 4
  EXPECT_EQ(f.size(), 12);
  EXPECT_EQ(f.header().window, 4);
  EXPECT_EQ(f.at(0), static_cast<uint32_t>('a'));
  EXPECT_EQ(f.at(4), 256u);
  auto side = nlohmann::json::parse(testing::read_text(d.file("f.bin.json")));
  EXPECT_EQ(side["windows"], 3);
  EXPECT_EQ(side["inputs"].size(), 2u);
}

TEST(PrepareCommand, BadInputsAreClearErrors) {
  testing::TempDir d;
  std::string out;
  testing::write_text(d.file("bad.jsonl"), "{\"text\": \"ok\"}\nnot json\n");
  EXPECT_EQ(testing::run_aobench("prepare --format jsonl --tokenizer bytes --input " + d.file("bad.jsonl") +
                                     " --output " + d.file("o.bin"),
                                 &out),
            3);
  EXPECT_NE(out.find("bad.jsonl:2"), std::string::npos) << out;
  EXPECT_NE(out.find("HINT"), std::string::npos) << out;
  EXPECT_EQ(testing::run_aobench("prepare --format nope --input x --output " + d.file("o.bin"), &out), 2);
  EXPECT_NE(out.find("fortune"), std::string::npos) << out;
  EXPECT_EQ(testing::run_aobench("prepare --format lines --tokenizer bytes --input " + d.file("missing.txt") +
                                     " --output " + d.file("o.bin"),
                                 &out),
            3);
  EXPECT_NE(out.find("missing.txt"), std::string::npos) << out;
}

// --threads changes who encodes which rows, never the bytes written.
TEST(PrepareCommand, OutputIsTheSameOnAnyThreadCount) {
  testing::TempDir d;
  std::string text;
  for (int i = 0; i < 300; ++i) text += "line " + std::to_string(i) + std::string(i % 11, '-') + "\n";
  testing::write_text(d.file("in.txt"), text);
  std::string one, out;
  for (int threads : {1, 3}) {
    const std::string bin = d.file("t" + std::to_string(threads) + ".bin");
    ASSERT_EQ(testing::run_aobench("prepare --format lines --tokenizer bytes --threads " + std::to_string(threads) +
                                       " --input " + d.file("in.txt") + " --output " + bin,
                                   &out),
              0)
        << out;
    EXPECT_NE(out.find("on " + std::to_string(threads) + " threads"), std::string::npos) << out;
    if (threads == 1) one = testing::read_text(bin);
  }
  EXPECT_EQ(testing::read_text(d.file("t3.bin")), one);
  EXPECT_EQ(TokenFile(d.file("t1.bin")).size(), static_cast<int64_t>(text.size()));  // 300 "\n" → 300 EOS
}

TEST(TokenizeCommand, BytesRoundTrip) {
  testing::TempDir d;
  testing::write_text(d.file("in.txt"), "hi\n");
  std::string out;
  ASSERT_EQ(testing::run_aobench("tokenize --tokenizer bytes < " + d.file("in.txt"), &out), 0) << out;
  EXPECT_EQ(out, "[104,105,10]\n");
  testing::write_text(d.file("ids.json"), "[104, 256, 105]");
  ASSERT_EQ(testing::run_aobench("tokenize --tokenizer bytes --decode < " + d.file("ids.json"), &out), 0) << out;
  EXPECT_EQ(out, "h<|endoftext|>i");
}

}  // namespace
}  // namespace aobench
