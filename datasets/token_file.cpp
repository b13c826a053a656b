// Implements: token_file.h — llm.c-style packed token files (256 × int32 header + uint16/uint32 tokens),
// raw nanoGPT uint16 `.bin` files, the seeded per-rank BatchSampler and sequential eval windows
// (DESIGN.md data layer; spec-sedd-radd.md §4.3–4.4 for the packed eval blocks).
#include "datasets/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <ATen/CPUGeneratorImpl.h>

#include "core/errors.h"

namespace aobench {

namespace {

constexpr size_t kHeaderInts = 256;
constexpr size_t kHeaderBytes = kHeaderInts * sizeof(int32_t);
constexpr size_t kTokenizerNameAt = 6, kTokenizerNameBytes = 32;  // header ints [6..13]
const char* kRegenHint =
    "re-create it with `aobench prepare` (an interrupted copy or a different tool may have "
    "written it)";

}  // namespace

void write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, int32_t vocab_size, int32_t window,
                      int32_t eos, const std::string& tokenizer) {
  bool small = true;
  for (uint32_t t : tokens)
    if (t >= 65536) {
      small = false;
      break;
    }
  int32_t header[kHeaderInts] = {};
  header[0] = kTokenFileMagic;
  header[1] = small ? 1 : 2;
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    throw DataError(path + ": " + std::to_string(tokens.size()) + " tokens do not fit the int32 count field",
                    "split the data into several files");
  header[2] = static_cast<int32_t>(tokens.size());
  header[3] = vocab_size;
  header[4] = window;
  header[5] = eos;
  if (tokenizer.size() >= kTokenizerNameBytes)
    throw ConfigError("tokenizer name '" + tokenizer + "' is longer than the token file's " +
                      std::to_string(kTokenizerNameBytes - 1) + "-byte field");
  std::memcpy(&header[kTokenizerNameAt], tokenizer.data(), tokenizer.size());

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    throw DataError("cannot create " + tmp + ": " + std::strerror(errno),
                    "check the output directory exists "
                    "and is writable");
  bool ok = std::fwrite(header, sizeof(int32_t), kHeaderInts, f) == kHeaderInts;
  if (small) {
    std::vector<uint16_t> buf(tokens.begin(), tokens.end());
    ok = ok && std::fwrite(buf.data(), 2, buf.size(), f) == buf.size();
  } else {
    ok = ok && std::fwrite(tokens.data(), 4, tokens.size(), f) == tokens.size();
  }
  ok = ok && std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw DataError("cannot write " + path + ": " + std::strerror(errno), "check free disk space and permissions");
  }
}

TokenFile::TokenFile(const std::string& path, bool allow_raw) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait forever for a writer; it is refused below.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    throw DataError("cannot open token file " + path + ": " + std::strerror(errno),
                    "create it with `aobench prepare` or check the path");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw DataError(path + " is not a regular file (a FIFO, device or directory)",
                    "give the path of a .bin token file");
  }
  const size_t fsize = static_cast<size_t>(st.st_size);
  if (fsize == 0) {
    ::close(fd);
    throw DataError("token file " + path + " is empty", kRegenHint);
  }
  map_ = ::mmap(nullptr, fsize, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw DataError("cannot mmap " + path + ": " + std::strerror(errno), "check the file is readable");
  }
  map_size_ = fsize;
  const auto* bytes = static_cast<const uint8_t*>(map_);

  auto fail = [&](const std::string& what, const std::string& hint) {
    ::munmap(map_, map_size_);
    map_ = nullptr;
    throw DataError("token file " + path + ": " + what, hint);
  };

  int32_t magic = 0;
  if (fsize >= sizeof(int32_t)) std::memcpy(&magic, bytes, sizeof(int32_t));
  if (magic != kTokenFileMagic) {
    if (!allow_raw)
      fail("wrong magic " + std::to_string(magic) + " (expected " + std::to_string(kTokenFileMagic) + ")",
           "this is not an aobench/llm.c token file; raw nanoGPT uint16 files need allow_raw");
    if (fsize % 2 != 0)
      fail("no header and an odd size (" + std::to_string(fsize) + " bytes), so not a raw uint16 file either",
           kRegenHint);
    raw_ = true;
    width_ = 2;
    header_.version = 1;
    header_.count = static_cast<int64_t>(fsize / 2);
    data_ = bytes;
    return;
  }
  if (fsize < kHeaderBytes)
    fail("truncated header (" + std::to_string(fsize) + " bytes, need " + std::to_string(kHeaderBytes) + ")",
         kRegenHint);
  int32_t h[kHeaderInts];
  std::memcpy(h, bytes, kHeaderBytes);
  if (h[1] != 1 && h[1] != 2)
    fail("unsupported version " + std::to_string(h[1]) + " (1 = uint16 tokens, 2 = uint32 tokens)",
         "this file was written by a newer or different tool; " + std::string(kRegenHint));
  if (h[2] < 0) fail("negative token count " + std::to_string(h[2]), kRegenHint);
  if (h[3] < 0) fail("negative vocab size " + std::to_string(h[3]) + " in the header", kRegenHint);
  if (h[4] < 0) fail("negative window length " + std::to_string(h[4]) + " in the header", kRegenHint);
  header_.version = h[1];
  header_.count = h[2];
  header_.vocab_size = h[3];
  header_.window = h[4];
  header_.eos = h[5];
  const char* name = reinterpret_cast<const char*>(&h[kTokenizerNameAt]);
  header_.tokenizer.assign(name, strnlen(name, kTokenizerNameBytes));
  for (unsigned char ch : header_.tokenizer)
    if (ch < 0x21 || ch > 0x7e) fail("the tokenizer name in the header is not printable ASCII", kRegenHint);
  width_ = h[1] == 1 ? 2 : 4;
  const size_t expect = kHeaderBytes + static_cast<size_t>(header_.count) * width_;
  if (fsize != expect)
    fail("header says " + std::to_string(header_.count) + " tokens (" + std::to_string(expect) +
             " bytes) but the file has " + std::to_string(fsize) + " bytes" +
             (fsize < expect ? " (truncated)" : " (trailing garbage)"),
         kRegenHint);
  data_ = bytes + kHeaderBytes;
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(map_, map_size_);
}

uint32_t TokenFile::at(int64_t i) const {
  if (i < 0 || i >= header_.count)
    throw DataError("token file " + path_ + ": index " + std::to_string(i) + " out of range [0, " +
                        std::to_string(header_.count) + ")",
                    "the window or batch does not fit the file");
  if (width_ == 2) {
    uint16_t v;
    std::memcpy(&v, data_ + 2 * i, 2);
    return v;
  }
  uint32_t v;
  std::memcpy(&v, data_ + 4 * i, 4);
  return v;
}

torch::Tensor TokenFile::slice(int64_t start, int64_t len) const {
  if (start < 0 || len < 0 || start + len > header_.count)
    throw DataError("token file " + path_ + ": slice [" + std::to_string(start) + ", " + std::to_string(start + len) +
                        ") is outside the " + std::to_string(header_.count) + " tokens",
                    "use a shorter window or a larger file");
  auto out = torch::empty({len}, torch::kInt64);
  int64_t* o = out.data_ptr<int64_t>();
  if (width_ == 2) {
    const uint8_t* p = data_ + 2 * start;
    for (int64_t i = 0; i < len; ++i) {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      o[i] = v;
    }
  } else {
    const uint8_t* p = data_ + 4 * start;
    for (int64_t i = 0; i < len; ++i) {
      uint32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      o[i] = v;
    }
  }
  return out;
}

void check_token_ids(const TokenFile& file, int64_t vocab_size, const std::string& owner) {
  const int64_t header_vocab = file.header().vocab_size;
  const int64_t limit = header_vocab > 0 ? std::min(vocab_size, header_vocab) : vocab_size;
  const int64_t width = file.header().version == 1 ? 2 : 4;
  if (limit >= (width == 2 ? 65536 : (int64_t(1) << 32))) return;  // no stored id can reach it
  constexpr int64_t kChunk = int64_t(1) << 20;
  for (int64_t start = 0; start < file.size(); start += kChunk) {
    const int64_t len = std::min(kChunk, file.size() - start);
    // The chunk's maximum first (a loop the compiler vectorises), the exact position only on failure.
    if (file.slice(start, len).max().item<int64_t>() < limit) continue;
    for (int64_t i = start; i < start + len; ++i) {
      const int64_t id = file.at(i);
      if (id < limit) continue;
      const std::string where = "token file " + file.path() + ": token " + std::to_string(i) + " (byte offset " +
                                std::to_string((file.raw() ? 0 : int64_t(kHeaderBytes)) + i * width) + ") is id " +
                                std::to_string(id);
      if (file.raw())
        throw DataError("token file " + file.path() + " has no token-file header (wrong magic), so it was read as " +
                            "raw uint16 tokens, but its token " + std::to_string(i) + " (byte offset " +
                            std::to_string(i * width) + ") is id " + std::to_string(id) + " >= vocab_size " +
                            std::to_string(vocab_size) + " of " + owner,
                        "is it a token file? re-create it with `aobench prepare`");
      if (id >= header_vocab && header_vocab > 0)
        throw DataError(where + ", not below the vocab_size " + std::to_string(header_vocab) + " in its own header",
                        "the file is damaged; " + std::string(kRegenHint));
      throw DataError(where + ", not below vocab_size " + std::to_string(vocab_size) + " of " + owner,
                      "tokenize the data with the tokenizer of the model (data.tokenizer), or use a model whose "
                      "vocabulary covers it");
    }
  }
}

void check_tokenizer(const TokenFile& file, const std::string& expected, const std::string& owner) {
  const std::string& got = file.header().tokenizer;
  if (got.empty() || expected.empty() || got == expected) return;
  throw DataError("token file " + file.path() + " was tokenized with '" + got + "' but " + owner + " reads '" +
                      expected + "' tokens",
                  "prepare the data with --tokenizer " + expected + " (ids of another tokenizer mean other text)");
}

BatchSampler::BatchSampler(std::shared_ptr<TokenFile> file, int64_t T, uint64_t seed, int rank, int world)
    : file_(std::move(file)), T_(T), gen_(at::make_generator<at::CPUGeneratorImpl>(seed)) {
  if (T <= 0)
    throw ConfigError("BatchSampler: window length " + std::to_string(T) + " must be > 0", "set a positive block size");
  if (world <= 0 || rank < 0 || rank >= world)
    throw ConfigError("BatchSampler: rank " + std::to_string(rank) + " of world " + std::to_string(world),
                      "rank must be in [0, world)");
  const int64_t N = file_->size();
  lo_ = N * rank / world;
  const int64_t shard_end = N * (rank + 1) / world;
  hi_ = std::min(shard_end, N - T + 1);  // a window starting at s reads [s, s+T)
  if (hi_ <= lo_)
    throw DataError("token file " + file_->path() + " has " + std::to_string(N) +
                        " tokens: too few for windows "
                        "of " +
                        std::to_string(T) + " tokens in shard " + std::to_string(rank) + " of " + std::to_string(world),
                    "use more training data, a shorter block size or fewer ranks");
}

torch::Tensor BatchSampler::next(int64_t B) {
  auto starts = torch::randint(lo_, hi_, {B}, gen_, torch::kInt64);  // (B,)
  auto out = torch::empty({B, T_}, torch::kInt64);                   // (B, T)
  const int64_t* s = starts.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) out[b].copy_(file_->slice(s[b], T_));
  return out;
}

torch::Tensor BatchSampler::get_state() const {
  at::Generator g = gen_;  // shares the generator impl; get_state() is not const-qualified
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}

void BatchSampler::set_state(const torch::Tensor& s) {
  std::lock_guard<std::mutex> lock(gen_.mutex());
  gen_.set_state(s);
}

std::vector<int64_t> eval_window_starts(const TokenFile& file, int64_t T, int rank, int world) {
  if (T <= 0 || world <= 0 || rank < 0 || rank >= world)
    throw ConfigError("eval_window_starts: bad T=" + std::to_string(T) + " rank=" + std::to_string(rank) +
                          " world=" + std::to_string(world),
                      "T > 0 and 0 <= rank < world");
  const int64_t n = file.size() / T;
  std::vector<int64_t> starts;
  for (int64_t i = rank; i < n; i += world) starts.push_back(i * T);
  return starts;
}

}  // namespace aobench
