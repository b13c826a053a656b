// Implements: packed token files in the llm.c style. Header = 256 little-endian int32:
//   [0] magic 20240520   [1] version (1 = uint16 tokens, 2 = uint32 tokens)   [2] token count
//   [3] vocab size (aobench extension; 0 = unknown)   [4] window length the file was packed for (0 = none)
//   [5] EOS id (−1 = none)   [6..13] the tokenizer's name, ASCII, NUL-padded (32 bytes; all zero = unknown)
//   [14..255] zero
// followed by the tokens. Raw nanoGPT `.bin` files (uint16, no header) are read too: count = bytes / 2.
// The reader memory-maps the file and validates the header against the file size before use.
//
// A sharded token dataset (`aobench prepare --shard-tokens N`) is a folder of such files plus an index:
//   <dir>/index.json           {"kind": "aobench.token_shards", "format_version": 1, "tokenizer", "vocab_size",
//                               "eos", "packing", "window", "tokens", "shards": [{"file", "tokens", "sha256"}], …}
//   <dir>/shard_000000.bin …   each ≤ N tokens, a whole number of windows when packed
// TokenFile reads it as the concatenation of its shards, so every reader of a token file reads one too.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

namespace aobench {

inline constexpr int32_t kTokenFileMagic = 20240520;
inline constexpr const char* kShardIndexName = "index.json";
inline constexpr const char* kShardIndexKind = "aobench.token_shards";

struct TokenFileHeader {
  int32_t version = 1;
  int64_t count = 0;
  int32_t vocab_size = 0;
  int32_t window = 0;
  int32_t eos = -1;
  std::string tokenizer;  // "gpt2", "bytes"; "" in files written before it was recorded
};

// Streams tokens into one token file: written under "<path>.tmp.<pid>", header and rename at commit() (after an
// fsync), so a reader never sees half a file; the temporary file is removed when the writer dies uncommitted.
// `wide`: uint32 tokens, else uint16 (an id ≥ 65536 is then a DataError). More than INT32_MAX tokens (the
// header's count field) is a DataError at the append that passes it.
class TokenFileWriter {
 public:
  TokenFileWriter(std::string path, int32_t vocab_size, int32_t window, int32_t eos, const std::string& tokenizer,
                  bool wide);
  ~TokenFileWriter();
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;
  void append(const uint32_t* ids, size_t n);
  int64_t count() const { return count_; }
  void commit();

 private:
  [[noreturn]] void fail(const std::string& what);
  std::string path_, tmp_;
  int32_t header_[256] = {};
  FILE* f_ = nullptr;
  bool wide_;
  int64_t count_ = 0;
  std::vector<uint16_t> narrow_;  // conversion buffer for uint16 files
};

// Writes header + tokens atomically (tmp + fsync + rename). Picks uint16 when every id < 65536.
void write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, int32_t vocab_size,
                      int32_t window = 0, int32_t eos = -1, const std::string& tokenizer = "");

// Streams tokens into a sharded dataset: shards of at most `shard_tokens` tokens (uint16 when vocab_size ≤ 65536)
// under "<dir>.tmp.<pid>/", then index.json and one rename of the folder onto `dir` at commit().
class ShardedTokenWriter {
 public:
  ShardedTokenWriter(std::string dir, int64_t shard_tokens, int32_t vocab_size, int32_t window, int32_t eos,
                     std::string tokenizer);
  ~ShardedTokenWriter();  // removes the temporary folder unless committed
  ShardedTokenWriter(const ShardedTokenWriter&) = delete;
  ShardedTokenWriter& operator=(const ShardedTokenWriter&) = delete;
  void append(const uint32_t* ids, size_t n);
  int64_t count() const { return count_; }
  int64_t shards() const { return static_cast<int64_t>(shards_.size()) + (open_ ? 1 : 0); }
  // Closes the last shard, writes index.json (the keys of `meta` beside the writer's own) and puts the folder at
  // `dir`, replacing a sharded dataset there (check_sharded_target's rule).
  void commit(const nlohmann::json& meta);

 private:
  void close_shard();
  std::string dir_, tmp_;
  int64_t shard_tokens_;
  int32_t vocab_size_, window_, eos_;
  std::string tokenizer_;
  std::unique_ptr<TokenFileWriter> open_;
  nlohmann::json shards_ = nlohmann::json::array();
  int64_t count_ = 0;
  bool committed_ = false;
};

// A sharded dataset may be written at `dir` when nothing is there, or an empty folder, or a sharded dataset
// (a folder holding index.json and nothing but its shards); anything else is a ConfigError naming the path.
void check_sharded_target(const std::string& dir);

// Is `path` a sharded dataset: a folder, or a file named index.json?
bool is_sharded_dataset(const std::string& path);
// The JSON that describes a token dataset: "<path>.json" beside a .bin, the index.json of a sharded dataset.
std::string token_dataset_meta_path(const std::string& path);

class TokenFile {
 public:
  // Opens and validates a token file, or a sharded dataset (its folder or its index.json): the index against
  // every shard's header and size (O(shards): a 9 B-token dataset opens in well under a second). Each shard's
  // SHA-256 is checked the first time a read touches it (≈ 0.2 s per 100 M uint16 tokens, 1.1 GB/s), or by verify().
  // `allow_raw` accepts header-less nanoGPT uint16 files (detected by the absence of the magic; never a shard).
  // Throws DataError naming the file (the index and the shard) and what is wrong, with a hint.
  explicit TokenFile(const std::string& path, bool allow_raw = true);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  const TokenFileHeader& header() const { return header_; }
  bool raw() const { return raw_; }
  bool sharded() const { return sharded_; }
  int64_t shards() const { return static_cast<int64_t>(segs_.size()); }
  int64_t size() const { return header_.count; }
  uint32_t at(int64_t i) const;
  // tokens [start, start+len) as int64 (len,) CPU tensor; a slice across shards is copied piece by piece.
  torch::Tensor slice(int64_t start, int64_t len) const;
  // "token file P: token i (byte offset k)"; for a sharded dataset it names the shard and the offset in it.
  std::string locate(int64_t i) const;
  // Checks every shard's SHA-256 against the index now (no-op for a single file).
  void verify() const;

 private:
  struct Segment;
  size_t segment_of(int64_t i) const;  // the segment holding token i, its checksum checked
  void open_sharded(const std::string& index_path);
  std::string path_, index_path_;
  TokenFileHeader header_;
  bool raw_ = false, sharded_ = false;
  std::vector<std::unique_ptr<Segment>> segs_;  // one for a single file
  std::vector<int64_t> starts_;                 // first token of each segment
};

// Every id of `file` must be < vocab_size (the model's) and < the header's vocab_size when it has one;
// else a DataError naming the file, the token and byte offset of the first bad id, the id and `owner`
// (e.g. "model gpt/debug"). Run when a file is opened for training or evaluation, so a bad file fails
// at once, not mid-run inside an embedding lookup. A sharded dataset whose vocab_size the model covers is not
// scanned: prepare wrote ids below it, and each shard's checksum is checked when first read.
void check_token_ids(const TokenFile& file, int64_t vocab_size, const std::string& owner);
// A file tokenized with another tokenizer than `expected` (the model's, e.g. a run's data.tokenizer) is a
// DataError naming both and `owner`: ids below the vocabulary can still mean other text (a byte file under a GPT-2
// model). A file or model whose tokenizer is unknown ("") passes.
void check_tokenizer(const TokenFile& file, const std::string& expected, const std::string& owner);

// Seeded training sampler: random windows of `T` tokens; rank r of W draws only windows starting in
// its disjoint shard [r·N/W, (r+1)·N/W). State (the generator) is saved in checkpoints for exact resume.
// A sharded dataset is one stream of N tokens here: the same seed draws the same windows as from the single file.
class BatchSampler {
 public:
  BatchSampler(std::shared_ptr<TokenFile> file, int64_t T, uint64_t seed, int rank = 0, int world = 1);
  torch::Tensor next(int64_t B);    // (B, T) int64 CPU
  torch::Tensor get_state() const;  // generator state, for checkpoints
  void set_state(const torch::Tensor& s);

 private:
  std::shared_ptr<TokenFile> file_;
  int64_t T_;
  int64_t lo_, hi_;  // window starts drawn from [lo_, hi_)
  at::Generator gen_;
};

// Sequential evaluation windows: non-overlapping T-token windows in file order (a packed eval file is
// a whole number of windows); `rank`/`world` take every world-th window starting at rank.
std::vector<int64_t> eval_window_starts(const TokenFile& file, int64_t T, int rank = 0, int world = 1);

}  // namespace aobench
