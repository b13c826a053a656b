// Implements: packed token files in the llm.c style. Header = 256 little-endian int32:
//   [0] magic 20240520   [1] version (1 = uint16 tokens, 2 = uint32 tokens)   [2] token count
//   [3] vocab size (aobench extension; 0 = unknown)   [4] window length the file was packed for (0 = none)
//   [5] EOS id (−1 = none)   [6..13] the tokenizer's name, ASCII, NUL-padded (32 bytes; all zero = unknown)
//   [14..255] zero
// followed by the tokens. Raw nanoGPT `.bin` files (uint16, no header) are read too: count = bytes / 2.
// The reader memory-maps the file and validates the header against the file size before use.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace aobench {

inline constexpr int32_t kTokenFileMagic = 20240520;

struct TokenFileHeader {
  int32_t version = 1;
  int64_t count = 0;
  int32_t vocab_size = 0;
  int32_t window = 0;
  int32_t eos = -1;
  std::string tokenizer;  // "gpt2", "bytes"; "" in files written before it was recorded
};

// Writes header + tokens atomically (tmp + fsync + rename). Picks uint16 when every id < 65536.
void write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, int32_t vocab_size,
                      int32_t window = 0, int32_t eos = -1, const std::string& tokenizer = "");

class TokenFile {
 public:
  // Opens and validates. `allow_raw` accepts header-less nanoGPT uint16 files (detected by the
  // absence of the magic). Throws DataError naming the file and what is wrong, with a hint.
  explicit TokenFile(const std::string& path, bool allow_raw = true);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  const TokenFileHeader& header() const { return header_; }
  bool raw() const { return raw_; }
  int64_t size() const { return header_.count; }
  uint32_t at(int64_t i) const;
  // tokens [start, start+len) as int64 (len,) CPU tensor.
  torch::Tensor slice(int64_t start, int64_t len) const;

 private:
  std::string path_;
  TokenFileHeader header_;
  bool raw_ = false;
  const uint8_t* data_ = nullptr;  // first token
  void* map_ = nullptr;
  size_t map_size_ = 0;
  int width_ = 2;  // bytes per token
};

// Every id of `file` must be < vocab_size (the model's) and < the header's vocab_size when it has one;
// else a DataError naming the file, the token and byte offset of the first bad id, the id and `owner`
// (e.g. "model gpt/debug"). Run when a file is opened for training or evaluation, so a bad file fails
// at once, not mid-run inside an embedding lookup.
void check_token_ids(const TokenFile& file, int64_t vocab_size, const std::string& owner);
// A file tokenized with another tokenizer than `expected` (the model's, e.g. a run's data.tokenizer) is a
// DataError naming both and `owner`: ids below the vocabulary can still mean other text (a byte file under a GPT-2
// model). A file or model whose tokenizer is unknown ("") passes.
void check_tokenizer(const TokenFile& file, const std::string& expected, const std::string& owner);

// Seeded training sampler: random windows of `T` tokens; rank r of W draws only windows starting in
// its disjoint shard [r·N/W, (r+1)·N/W). State (the generator) is saved in checkpoints for exact resume.
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
