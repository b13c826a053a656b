// Implements: tests of the streaming `prepare` and of sharded token datasets (datasets/prepare.h,
// datasets/token_file.h): streamed output equal to the whole-input path (pack_rows + write_token_file) for every
// format and packing at tiny chunk sizes; golden SHA-256 of real prepares made before streaming; shards whose
// concatenation is the single file, with matching index counts and checksums; damaged, missing and mismatched
// shards named in DataErrors; BatchSampler / eval windows over shards equal to the single file (world 1 and 2);
// globs of .zst / .xz inputs; bad inputs with hints.
#include <lzma.h>
#include <zstd.h>

#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/sha256.h"
#include "datasets/detokenizers.h"
#include "datasets/packing.h"
#include "datasets/prepare.h"
#include "datasets/token_file.h"
#include "datasets/tokenizer.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

template <class F>
std::string error_text(F f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.what()) + " | " + e.hint();
  }
  return "";
}

std::string zstd_bytes(const std::string& text, int level = 3) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), level);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

std::string xz_bytes(const std::string& text) {
  std::string out(lzma_stream_buffer_bound(text.size()), '\0');
  size_t pos = 0;
  EXPECT_EQ(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, nullptr, reinterpret_cast<const uint8_t*>(text.data()),
                                    text.size(), reinterpret_cast<uint8_t*>(out.data()), &pos, out.size()),
            LZMA_OK);
  out.resize(pos);
  return out;
}

// The tokens of a token file (header skipped), as the bytes they are stored in.
std::string token_bytes(const std::string& bin) { return testing::read_text(bin).substr(1024); }

// What the whole-input path wrote: rows → the format's detokenizer → bytes tokenizer → pack_rows → write_token_file.
std::string expected_file(const testing::TempDir& d, const std::string& format, const std::vector<std::string>& rows,
                          const std::string& packing, int64_t window) {
  auto tok = make_tokenizer("bytes");
  std::vector<std::vector<uint32_t>> ids;
  for (const auto& r : rows) ids.push_back(tok->encode(format == "wikitext" ? detokenize(format, r) : r));
  PackOptions opt;
  opt.mode = packing;
  opt.window = window;
  const PackResult res = pack_rows(ids, static_cast<uint32_t>(tok->eos_id()), opt);
  const std::string path = d.file("expected.bin");
  write_token_file(path, res.tokens, tok->vocab_size(), packing == "none" ? 0 : static_cast<int32_t>(window),
                   tok->eos_id(), tok->name());
  return testing::read_text(path);
}

PrepareSpec bytes_spec(const std::string& format, const std::vector<std::string>& inputs, const std::string& output) {
  PrepareSpec spec;
  spec.format = format;
  spec.inputs = inputs;
  spec.output = output;
  spec.tokenizer = "bytes";
  spec.threads = 2;
  return spec;
}

// Every format's row rules, through the streaming reader at chunk sizes of one row, a few rows and all rows, gives
// the bytes of the whole-input path, for every packing, with and without a validation split.
TEST(StreamingPrepare, EqualsTheWholeInputPathAtAnyChunkSize) {
  testing::TempDir d;
  struct Case {
    std::string format, text;
    std::vector<std::string> rows;  // the rows the format's rule gives, before detokenization
  };
  std::string many_docs, many_lines;
  std::vector<std::string> docs, lines;
  for (int i = 0; i < 2600; ++i) {  // > 2 × 1000 rows: reference packing's groups and shards both matter
    const std::string t = "doc " + std::to_string(i) + std::string(i % 13, 'x');
    many_docs += t + "\n<|endoftext|>\n";
    docs.push_back(t);
    many_lines += t + "\n";
    lines.push_back(t);
  }
  std::vector<std::string> docs_last = docs;
  docs_last.push_back("tail without separator");
  const std::vector<Case> cases = {
      {"text", many_docs, docs},
      {"text", many_docs + "tail without separator\n", docs_last},
      {"text", "a\n<|endoftext|>\n<|endoftext|>\nb\nc\n<|endoftext|>\n", {"a", "", "b\nc"}},
      {"text", "no separator at all\n\nkeeps its newlines\n", {"no separator at all\n\nkeeps its newlines\n"}},
      {"fortune", "one\n%\n%\ntwo\nlines\n%\nlast", {"one", "two\nlines", "last"}},
      {"lines", many_lines + "no newline",
       [&] {
         auto v = lines;
         v.push_back("no newline");
         return v;
       }()},
      {"wikitext", " = Title = \n   \nbody line\nlast", {" = Title = \n", "", "body line\n", "last"}},
      {"jsonl", "{\"text\": \"a\\nb\"}\n  \n{\"text\": \"c\"}\n", {"a\nb", "c"}},
  };
  int k = 0;
  for (const auto& c : cases) {
    const std::string in = d.file("in" + std::to_string(k++) + ".txt");
    testing::write_text(in, c.text);
    for (const std::string packing : {"none", "simple", "reference"}) {
      const int64_t window = 7;
      const std::string want = expected_file(d, c.format, c.rows, packing, window);
      for (const int64_t chunk : {int64_t(1), int64_t(40), int64_t(32) << 20}) {
        PrepareSpec spec = bytes_spec(c.format, {in}, d.file("got.bin"));
        spec.packing = packing;
        spec.window = window;
        spec.chunk_bytes = chunk;
        if (want.size() == 1024) {  // packing left no token: refused, as the whole-input path refused it
          EXPECT_NE(error_text([&] { prepare_dataset(spec); }).find("leaves 0 tokens"), std::string::npos);
          continue;
        }
        prepare_dataset(spec);
        EXPECT_EQ(testing::read_text(d.file("got.bin")), want)
            << c.format << " " << packing << " chunk " << chunk << " rows " << c.rows.size();
      }
      if (c.rows.size() < 100) continue;
      // The validation split: the last 5 % of rows, the rest before it, each packed on its own.
      const size_t n_val = static_cast<size_t>(std::llround(0.05 * static_cast<double>(c.rows.size())));
      const std::vector<std::string> head(c.rows.begin(), c.rows.end() - static_cast<std::ptrdiff_t>(n_val));
      const std::vector<std::string> tail(c.rows.end() - static_cast<std::ptrdiff_t>(n_val), c.rows.end());
      PrepareSpec spec = bytes_spec(c.format, {in}, d.file("t.bin"));
      spec.packing = packing;
      spec.window = window;
      spec.val_output = d.file("v.bin");
      spec.chunk_bytes = 333;
      const PrepareSummary s = prepare_dataset(spec);
      EXPECT_EQ(s.val_rows, static_cast<int64_t>(n_val));
      EXPECT_EQ(testing::read_text(d.file("t.bin")), expected_file(d, c.format, head, packing, window))
          << c.format << packing;
      EXPECT_EQ(testing::read_text(d.file("v.bin")), expected_file(d, c.format, tail, packing, window))
          << c.format << packing;
    }
  }
}

// SHA-256 of token files written by the whole-input `prepare` (commit d368153) from the shared data: streaming
// must not change a byte of the datasets the repository's results were measured on.
TEST(StreamingPrepare, SharedDataGivesTheBytesOfBeforeStreaming) {
  AOBENCH_REQUIRE_DATA(data);
  testing::TempDir d;
  PrepareSpec spec;
  spec.format = "text";
  spec.inputs = {data + "/train/wiki_val.txt.xz"};
  spec.tokenizer = "gpt2";
  spec.vocab_dir = data + "/gpt2";
  spec.packing = "reference";
  spec.window = 128;
  spec.output = d.file("ref128.bin");
  spec.chunk_bytes = 300000;  // several chunks
  prepare_dataset(spec);
  const std::string ref = testing::read_text(spec.output);
  EXPECT_EQ(sha256_hex(ref.data(), ref.size(), "ref128"),
            "c3b8f5243ec6121d4c3ead87b45987f13e74a25d6da877f49155436a5a9cc8af");
  spec.packing = "none";
  spec.output = d.file("none.bin");
  spec.val_output = d.file("none_val.bin");
  spec.val_fraction = 0.1;
  prepare_dataset(spec);
  const std::string none = testing::read_text(spec.output), val = testing::read_text(spec.val_output);
  EXPECT_EQ(sha256_hex(none.data(), none.size(), "none"),
            "5ccf5361efbecf79d848000d2d9aa66f527eef2e6aa3b79d19cb156d84559caa");
  EXPECT_EQ(sha256_hex(val.data(), val.size(), "val"),
            "bdb67ef2236275f2d23e1a0c6b4072a051738f8d8aae138ea307020171ea4865");
}

// A small corpus of `rows` lines for the sharded tests.
std::string corpus(int rows) {
  std::string text;
  for (int i = 0; i < rows; ++i) text += "row " + std::to_string(i * 7919 % 1000) + std::string(i % 5, '!') + "\n";
  return text;
}

TEST(ShardedPrepare, ShardsConcatenateToTheSingleFileWithCountsAndChecksums) {
  testing::TempDir d;
  testing::write_text(d.file("in.txt"), corpus(500));
  for (const std::string packing : {"none", "simple", "reference"}) {
    PrepareSpec one = bytes_spec("lines", {d.file("in.txt")}, d.file("one.bin"));
    one.packing = packing;
    one.window = 16;
    one.val_output = d.file("one_val.bin");
    prepare_dataset(one);
    PrepareSpec sh = one;
    sh.output = d.file("sharded");
    sh.val_output = d.file("sharded_val");
    sh.shard_tokens = 1000;  // packed: 992, a whole number of 16-token windows
    sh.chunk_bytes = 100;
    const PrepareSummary s = prepare_dataset(sh);
    for (const auto& [single, folder] : {std::pair{one.output, sh.output}, std::pair{one.val_output, sh.val_output}}) {
      const json index = json::parse(testing::read_text(folder + "/index.json"));
      const json side = json::parse(testing::read_text(single + ".json"));
      EXPECT_EQ(index["kind"], "aobench.token_shards");
      EXPECT_EQ(index["tokens"], side["tokens"]);
      EXPECT_EQ(index["rows"], side["rows"]);
      EXPECT_EQ(index["windows"], side["windows"]);
      EXPECT_EQ(index["vocab_size"], 257);
      EXPECT_EQ(index["window"], packing == "none" ? 0 : 16);
      EXPECT_EQ(index["packing"], packing);
      std::string concat;
      int64_t sum = 0;
      for (const auto& sh_entry : index["shards"]) {
        const std::string path = folder + "/" + sh_entry["file"].get<std::string>();
        const std::string bytes = testing::read_text(path);
        EXPECT_EQ(sh_entry["sha256"], sha256_hex(bytes.data(), bytes.size(), path));
        const TokenFile f(path);  // every shard is a token file of its own
        EXPECT_EQ(f.size(), sh_entry["tokens"].get<int64_t>());
        EXPECT_LE(f.size(), packing == "none" ? 1000 : 992);
        if (packing != "none") {
          EXPECT_EQ(f.size() % 16, 0);
        }
        sum += f.size();
        concat += token_bytes(path);
      }
      EXPECT_EQ(sum, index["tokens"].get<int64_t>());
      EXPECT_EQ(concat, token_bytes(single)) << packing;
      const TokenFile a(single), b(folder), c(folder + "/index.json");
      EXPECT_TRUE(b.sharded());
      EXPECT_EQ(b.size(), a.size());
      EXPECT_EQ(c.size(), a.size());
      EXPECT_TRUE(torch::equal(b.slice(0, b.size()), a.slice(0, a.size())));
      EXPECT_EQ(b.header().tokenizer, "bytes");
      EXPECT_EQ(b.header().eos, 256);
      b.verify();
    }
    EXPECT_GT(s.shards, 1);
    EXPECT_NE(s.line(sh).find(" shards)"), std::string::npos) << s.line(sh);
  }
  EXPECT_EQ(token_dataset_meta_path(d.file("sharded")), d.file("sharded") + "/index.json");
  EXPECT_EQ(token_dataset_meta_path(d.file("one.bin")), d.file("one.bin") + ".json");
}

// A sharded dataset of 1500-token shards (4 of them) from the 500-row corpus, the single file beside it.
struct ShardedFixture {
  testing::TempDir d;
  std::string single, folder;
  json index;
  ShardedFixture() {
    testing::write_text(d.file("in.txt"), corpus(500));
    PrepareSpec spec = bytes_spec("lines", {d.file("in.txt")}, d.file("one.bin"));
    prepare_dataset(spec);
    spec.output = d.file("ds");
    spec.shard_tokens = 1500;
    prepare_dataset(spec);
    single = d.file("one.bin");
    folder = d.file("ds");
    index = json::parse(testing::read_text(folder + "/index.json"));
  }
  std::string shard(int k) const { return folder + "/" + index["shards"][k]["file"].get<std::string>(); }
};

TEST(ShardedDataset, DamagedMissingOrMismatchedShardsAreNamed) {
  ShardedFixture fx;
  ASSERT_EQ(fx.index["shards"].size(), 4u);
  const std::string good = testing::read_text(fx.shard(1));

  // A byte changed in shard 1: the index still matches its size, so the dataset opens; the first read of shard 1
  // (and verify()) compares its SHA-256 and names it.
  std::string bad = good;
  bad[2000] ^= 1;
  testing::write_text(fx.shard(1), bad);
  {
    const TokenFile f(fx.folder);
    EXPECT_NO_THROW(f.slice(0, 100));  // shard 0 is intact
    const std::string msg = error_text([&] { f.slice(1400, 200); });
    EXPECT_NE(msg.find(fx.shard(1)), std::string::npos) << msg;
    EXPECT_NE(msg.find("index.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sha256"), std::string::npos) << msg;
    EXPECT_NE(error_text([&] { f.verify(); }).find(fx.shard(1)), std::string::npos);
  }
  // Truncated: the header's count no longer fits the size.
  testing::write_text(fx.shard(1), good.substr(0, good.size() - 2));
  std::string msg = error_text([&] { TokenFile f(fx.folder); });
  EXPECT_NE(msg.find("shard 1 (" + fx.shard(1) + ")"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index.json"), std::string::npos) << msg;
  // Missing.
  fs::remove(fx.shard(1));
  msg = error_text([&] { TokenFile f(fx.folder); });
  EXPECT_NE(msg.find(fx.shard(1)), std::string::npos) << msg;
  testing::write_text(fx.shard(1), good);
  EXPECT_NO_THROW(TokenFile(fx.folder).verify());

  // An index whose vocab differs from its shards' headers (shards of another prepare): the shard and both values.
  json other = fx.index;
  other["vocab_size"] = 50257;
  testing::write_text(fx.folder + "/index.json", other.dump());
  msg = error_text([&] { TokenFile f(fx.folder); });
  EXPECT_NE(msg.find("shard 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("vocab_size 257 but the index says 50257"), std::string::npos) << msg;
  EXPECT_NE(msg.find("another prepare"), std::string::npos) << msg;
  // Counts that disagree, a shard name outside the folder, an index that is not one, a folder without an index.
  other = fx.index;
  other["shards"][3]["tokens"] = 1;
  testing::write_text(fx.folder + "/index.json", other.dump());
  EXPECT_NE(error_text([&] { TokenFile f(fx.folder); }).find("tokens"), std::string::npos);
  other = fx.index;
  other["shards"][0]["file"] = "../one.bin";
  testing::write_text(fx.folder + "/index.json", other.dump());
  EXPECT_NE(error_text([&] { TokenFile f(fx.folder); }).find("not a file name in the dataset's folder"),
            std::string::npos);
  testing::write_text(fx.folder + "/index.json", "[1, 2]");
  EXPECT_NE(error_text([&] { TokenFile f(fx.folder); }).find("\"kind\""), std::string::npos);
  fs::remove(fx.folder + "/index.json");
  msg = error_text([&] { TokenFile f(fx.folder); });
  EXPECT_NE(msg.find("not a sharded token dataset"), std::string::npos) << msg;
}

TEST(ShardedDataset, BatchSamplerAndEvalWindowsEqualTheSingleFile) {
  ShardedFixture fx;
  auto one = std::make_shared<TokenFile>(fx.single);
  auto sh = std::make_shared<TokenFile>(fx.folder);
  ASSERT_EQ(one->size(), sh->size());
  ASSERT_EQ(sh->shards(), 4);
  for (const auto& [rank, world] : {std::pair{0, 1}, std::pair{0, 2}, std::pair{1, 2}}) {
    BatchSampler a(one, 64, 7, rank, world), b(sh, 64, 7, rank, world);
    for (int step = 0; step < 20; ++step) EXPECT_TRUE(torch::equal(a.next(16), b.next(16))) << rank << "/" << world;
    // Resume: the generator state alone gives the same next batches.
    const torch::Tensor state = b.get_state();
    const torch::Tensor next = b.next(16);
    BatchSampler c(sh, 64, 12345, rank, world);
    c.set_state(state);
    EXPECT_TRUE(torch::equal(c.next(16), next));
    EXPECT_TRUE(torch::equal(a.next(16), next));
  }
  // Windows across a shard boundary (1500 tokens per shard) are copied piece by piece.
  EXPECT_TRUE(torch::equal(sh->slice(1490, 30), one->slice(1490, 30)));
  EXPECT_EQ(sh->at(1500), one->at(1500));
  EXPECT_EQ(eval_window_starts(*sh, 128, 1, 2), eval_window_starts(*one, 128, 1, 2));
  for (int64_t s : eval_window_starts(*sh, 128)) EXPECT_TRUE(torch::equal(sh->slice(s, 128), one->slice(s, 128)));
  // The id check names the shard; a vocabulary that covers the index's needs no scan.
  EXPECT_NO_THROW(check_token_ids(*sh, 257, "model m"));
  const std::string msg = error_text([&] { check_token_ids(*sh, 100, "model m"); });
  EXPECT_NE(msg.find("of shard 0 (" + fx.shard(0)), std::string::npos) << msg;
  EXPECT_NE(msg.find("model m"), std::string::npos) << msg;
}

TEST(PrepareInputs, GlobOfZstAndXzShards) {
  testing::TempDir d;
  fs::create_directories(d.file("owt"));
  std::string all;
  for (int i = 0; i < 4; ++i) {
    std::string part;
    for (int j = 0; j < 50; ++j)
      part += json({{"text", "part " + std::to_string(i) + " doc " + std::to_string(j)}}).dump() + "\n";
    all += part;
    const std::string name = d.file("owt/part" + std::to_string(i) + ".jsonl");
    if (i == 0) testing::write_text(name + ".zst", zstd_bytes(part));
    if (i == 1)  // two concatenated zstd frames read as one stream, as `zstd -dc` does
      testing::write_text(name + ".zst", zstd_bytes(part.substr(0, 100)) + zstd_bytes(part.substr(100), 19));
    if (i == 2) testing::write_text(name + ".xz", xz_bytes(part));
    if (i == 3) testing::write_text(name, part);
  }
  testing::write_text(d.file("all.jsonl"), all);
  PrepareSpec plain = bytes_spec("jsonl", {d.file("all.jsonl")}, d.file("plain.bin"));
  prepare_dataset(plain);
  PrepareSpec globbed = bytes_spec("jsonl", {d.file("owt/*.jsonl*")}, d.file("glob.bin"));
  globbed.chunk_bytes = 64;
  const PrepareSummary s = prepare_dataset(globbed);
  EXPECT_EQ(s.rows, 200);
  EXPECT_EQ(testing::read_text(d.file("glob.bin")), testing::read_text(d.file("plain.bin")));
  const json side = json::parse(testing::read_text(d.file("glob.bin.json")));
  EXPECT_EQ(side["inputs"].size(), 4u);  // sorted: part0.jsonl.zst … part3.jsonl
  EXPECT_EQ(side["inputs"][0], d.file("owt/part0.jsonl.zst"));

  // Through the command, the pattern quoted (the binary expands it, no shell does).
  std::string out;
  ASSERT_EQ(testing::run_aobench("prepare --format jsonl --tokenizer bytes --input '" + d.file("owt/part[0-2]*") +
                                     "' --output " + d.file("cmd") + " --shard-tokens 1000",
                                 &out),
            0)
      << out;
  EXPECT_NE(out.find("150 rows"), std::string::npos) << out;
  EXPECT_TRUE(TokenFile(d.file("cmd")).sharded());
}

TEST(PrepareInputs, BadInputsAndTargetsGiveErrorsWithHints) {
  testing::TempDir d;
  testing::write_text(d.file("in.txt"), corpus(50));
  auto fails = [&](const PrepareSpec& spec) { return error_text([&] { prepare_dataset(spec); }); };

  std::string msg = fails(bytes_spec("lines", {d.file("nothing/*.zst")}, d.file("o.bin")));
  EXPECT_NE(msg.find("nothing/*.zst matches no file"), std::string::npos) << msg;
  EXPECT_NE(msg.find("quoted"), std::string::npos) << msg;
  testing::write_text(d.file("x.jsonl.gz"), "not really gzip");
  msg = fails(bytes_spec("jsonl", {d.file("x.jsonl.gz")}, d.file("o.bin")));
  EXPECT_NE(msg.find(".gz compression is not supported"), std::string::npos) << msg;
  EXPECT_NE(msg.find("zstd"), std::string::npos) << msg;
  testing::write_text(d.file("t.parquet"), "PAR1");
  msg = fails(bytes_spec("jsonl", {d.file("t.parquet")}, d.file("o.bin")));
  EXPECT_NE(msg.find("JSONL"), std::string::npos) << msg;
  const std::string z = zstd_bytes(corpus(50));
  testing::write_text(d.file("cut.txt.zst"), z.substr(0, z.size() / 2));
  msg = fails(bytes_spec("lines", {d.file("cut.txt.zst")}, d.file("o.bin")));
  EXPECT_NE(msg.find("cut.txt.zst"), std::string::npos) << msg;
  EXPECT_NE(msg.find("zstd -t"), std::string::npos) << msg;
  testing::write_text(d.file("junk.txt.zst"), "this is not zstd at all");
  EXPECT_NE(fails(bytes_spec("lines", {d.file("junk.txt.zst")}, d.file("o.bin"))).find("junk.txt.zst"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(d.file("o.bin")));

  // Sharded targets: a file, a folder of other things, a folder holding the input; a single file onto a folder.
  PrepareSpec spec = bytes_spec("lines", {d.file("in.txt")}, d.file("in.txt.json"));
  spec.shard_tokens = 100;
  testing::write_text(d.file("afile"), "x");
  spec.output = d.file("afile");
  msg = fails(spec);
  EXPECT_NE(msg.find(d.file("afile") + " exists and is not a folder"), std::string::npos) << msg;
  fs::create_directories(d.file("notes"));
  testing::write_text(d.file("notes/todo.txt"), "keep me");
  spec.output = d.file("notes");
  msg = fails(spec);
  EXPECT_NE(msg.find("notes/todo.txt"), std::string::npos) << msg;
  EXPECT_EQ(testing::read_text(d.file("notes/todo.txt")), "keep me");
  spec.inputs = {d.file("notes/todo.txt")};
  msg = fails(spec);
  EXPECT_NE(msg.find("overwrite its own input"), std::string::npos) << msg;
  spec.inputs = {d.file("in.txt")};
  spec.output = d.file("ds");
  prepare_dataset(spec);
  const int64_t before = TokenFile(d.file("ds")).size();
  testing::write_text(d.file("in.txt"), corpus(80));
  prepare_dataset(spec);  // a sharded dataset is replaced by the new one
  EXPECT_GT(TokenFile(d.file("ds")).size(), before);
  for (const auto& e : fs::directory_iterator(d.path))  // no scratch folder left behind
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  PrepareSpec single = bytes_spec("lines", {d.file("in.txt")}, d.file("ds"));
  msg = fails(single);
  EXPECT_NE(msg.find("--shard-tokens"), std::string::npos) << msg;
  spec.packing = "simple";
  spec.window = 200;
  msg = fails(spec);
  EXPECT_NE(msg.find("less than one --window"), std::string::npos) << msg;
}

TEST(ShardedPrepare, ExperimentEntryTakesShardTokens) {
  const PrepareSpec a = PrepareSpec::from_json(
      json::parse(R"({"format": "jsonl", "input": "owt/*.jsonl.zst", "output": "d", "shard_tokens": 1000})"), "e");
  EXPECT_EQ(a.shard_tokens, 1000);
  EXPECT_NE(a.command_line().find("--shard-tokens 1000"), std::string::npos);
  const PrepareSpec b =
      PrepareSpec::from_json(json::parse(R"({"format": "text", "input": "x", "output": "d", "shard-tokens": 5})"), "e");
  EXPECT_EQ(b.shard_tokens, 5);
  EXPECT_THROW(PrepareSpec::from_json(
                   json::parse(R"({"format": "text", "input": "x", "output": "d", "shard_tokens": -1})"), "e"),
               ConfigError);
}

}  // namespace
}  // namespace aobench
