// Implements: token_file.h — llm.c-style packed token files (256 × int32 header + uint16/uint32 tokens),
// raw nanoGPT uint16 `.bin` files, sharded datasets (a folder of them + index.json, read as one stream), the
// seeded per-rank BatchSampler and sequential eval windows (DESIGN.md data layer; spec-sedd-radd.md §4.3–4.4
// for the packed eval blocks).
#include "datasets/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <system_error>

#include <ATen/CPUGeneratorImpl.h>

#include "core/config.h"
#include "core/errors.h"
#include "core/sha256.h"

namespace aobench {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kHeaderInts = 256;
constexpr size_t kHeaderBytes = kHeaderInts * sizeof(int32_t);
constexpr size_t kTokenizerNameAt = 6, kTokenizerNameBytes = 32;  // header ints [6..13]
constexpr int kIndexFormatVersion = 1;
constexpr int64_t kMaxIndexBytes = int64_t(256) << 20;  // ~2 M shards; a bigger "index" is not one
const char* kRegenHint =
    "re-create it with `aobench prepare` (an interrupted copy or a different tool may have "
    "written it)";

std::string shard_name(size_t k) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shard_%06zu.bin", k);
  return buf;
}

// A name index.json may give a shard: a plain file name in the dataset's folder (no path, no dot file).
bool plain_name(const std::string& s) {
  return !s.empty() && s[0] != '.' && s.find('/') == std::string::npos && s.find('\0') == std::string::npos;
}

}  // namespace

// One memory-mapped token file: a single .bin, or one shard of a sharded dataset.
struct TokenFile::Segment {
  std::string path;
  void* map = nullptr;
  size_t map_size = 0;
  const uint8_t* data = nullptr;  // first token
  int width = 2;                  // bytes per token
  int64_t count = 0;
  std::string sha256;              // from the index ("" = a single file: nothing to check)
  mutable std::once_flag checked;  // the checksum is compared once, at the first read that touches the shard
  // Maps the file at `p` and validates its header against its size; fills `hdr` and `raw`. DataError naming `p`.
  void open(const std::string& p, bool allow_raw, TokenFileHeader& hdr, bool& raw);
  ~Segment() {
    if (map) ::munmap(map, map_size);
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Writers

TokenFileWriter::TokenFileWriter(std::string path, int32_t vocab_size, int32_t window, int32_t eos,
                                 const std::string& tokenizer, bool wide)
    : path_(std::move(path)), tmp_(path_ + ".tmp." + std::to_string(::getpid())), wide_(wide) {
  header_[0] = kTokenFileMagic;
  header_[1] = wide ? 2 : 1;
  header_[3] = vocab_size;
  header_[4] = window;
  header_[5] = eos;
  if (tokenizer.size() >= kTokenizerNameBytes)
    throw ConfigError("tokenizer name '" + tokenizer + "' is longer than the token file's " +
                      std::to_string(kTokenizerNameBytes - 1) + "-byte field");
  std::memcpy(&header_[kTokenizerNameAt], tokenizer.data(), tokenizer.size());
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_)
    throw DataError("cannot create " + tmp_ + ": " + std::strerror(errno),
                    "check the output directory exists and is writable");
  // The header's place; its count is known at commit().
  if (std::fwrite(header_, sizeof(int32_t), kHeaderInts, f_) != kHeaderInts) fail("cannot write the header");
}

TokenFileWriter::~TokenFileWriter() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

void TokenFileWriter::fail(const std::string& what) {
  const std::string why = errno ? std::string(": ") + std::strerror(errno) : "";
  if (f_) std::fclose(f_), f_ = nullptr;
  std::remove(tmp_.c_str());
  throw DataError("cannot write " + path_ + " (" + what + why + ")", "check free disk space and permissions");
}

void TokenFileWriter::append(const uint32_t* ids, size_t n) {
  if (!f_)
    throw DataError("token file " + path_ + " is already committed", "a programming error: append before commit");
  if (count_ + static_cast<int64_t>(n) > INT32_MAX)
    throw DataError(path_ + ": " + std::to_string(count_ + static_cast<int64_t>(n)) +
                        " tokens do not fit the int32 count field of one token file",
                    "write a sharded dataset (prepare --shard-tokens N) or split the input");
  errno = 0;
  if (wide_) {
    if (std::fwrite(ids, 4, n, f_) != n) fail("cannot write tokens");
  } else {
    narrow_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (ids[i] >= 65536)
        throw DataError(path_ + ": id " + std::to_string(ids[i]) + " does not fit a uint16 token file",
                        "a tokenizer with more than 65536 ids needs uint32 files");
      narrow_[i] = static_cast<uint16_t>(ids[i]);
    }
    if (std::fwrite(narrow_.data(), 2, n, f_) != n) fail("cannot write tokens");
  }
  count_ += static_cast<int64_t>(n);
}

void TokenFileWriter::commit() {
  header_[2] = static_cast<int32_t>(count_);
  errno = 0;
  if (std::fseek(f_, 0, SEEK_SET) != 0 || std::fwrite(header_, sizeof(int32_t), kHeaderInts, f_) != kHeaderInts)
    fail("cannot write the header");
  if (std::fflush(f_) != 0 || ::fsync(::fileno(f_)) != 0) fail("cannot flush");
  const int closed = std::fclose(f_);
  f_ = nullptr;
  if (closed != 0 || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::remove(tmp_.c_str());
    throw DataError("cannot write " + path_ + ": " + std::strerror(errno), "check free disk space and permissions");
  }
}

void write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, int32_t vocab_size, int32_t window,
                      int32_t eos, const std::string& tokenizer) {
  const bool small = std::all_of(tokens.begin(), tokens.end(), [](uint32_t t) { return t < 65536; });
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    throw DataError(path + ": " + std::to_string(tokens.size()) + " tokens do not fit the int32 count field",
                    "split the data into several files");
  TokenFileWriter w(path, vocab_size, window, eos, tokenizer, /*wide=*/!small);
  w.append(tokens.data(), tokens.size());
  w.commit();
}

void check_sharded_target(const std::string& dir) {
  std::error_code ec;
  const auto st = fs::symlink_status(dir, ec);
  if (ec || !fs::exists(st)) return;
  if (!fs::is_directory(st))
    throw ConfigError("the sharded output " + dir + " exists and is not a folder",
                      "give --output a new folder name (a sharded dataset is a folder of shards + index.json)");
  bool has_index = false;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == kShardIndexName) {
      has_index = true;
      continue;
    }
    if (name.rfind("shard_", 0) == 0 && e.path().extension() == ".bin") continue;
    throw ConfigError("the sharded output " + dir + " exists and holds " + e.path().string() +
                          ", which is not part of a sharded dataset",
                      "give --output a new folder; prepare replaces only a folder written by prepare --shard-tokens");
  }
  if (!has_index && !fs::is_empty(dir))
    throw ConfigError("the sharded output " + dir + " holds shard files but no " + kShardIndexName,
                      "remove it or give --output a new folder");
}

ShardedTokenWriter::ShardedTokenWriter(std::string dir, int64_t shard_tokens, int32_t vocab_size, int32_t window,
                                       int32_t eos, std::string tokenizer)
    : dir_(std::move(dir)),
      tmp_(fs::path(dir_).lexically_normal().string() + ".tmp." + std::to_string(::getpid())),
      shard_tokens_(shard_tokens),
      vocab_size_(vocab_size),
      window_(window),
      eos_(eos),
      tokenizer_(std::move(tokenizer)) {
  if (shard_tokens <= 0 || shard_tokens > INT32_MAX)
    throw ConfigError(
        "--shard-tokens " + std::to_string(shard_tokens) + " must be in [1, " + std::to_string(INT32_MAX) + "]",
        "e.g. --shard-tokens 100000000 (200 MB uint16 shards)");
  check_sharded_target(dir_);
  std::error_code ec;
  fs::remove_all(tmp_, ec);  // this process's own scratch name: left only by a killed run with the same pid
  if (!fs::create_directories(tmp_, ec) || ec)
    throw DataError("cannot create " + tmp_ + (ec ? ": " + ec.message() : ""),
                    "check the output's parent folder exists and is writable");
}

ShardedTokenWriter::~ShardedTokenWriter() {
  open_.reset();  // its temporary file first
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
}

void ShardedTokenWriter::close_shard() {
  if (!open_) return;
  open_->commit();
  const std::string name = shard_name(shards_.size());
  const fs::path p = fs::path(tmp_) / name;
  // Hash what is on disk (from the page cache): the checksum then covers the header and every byte written.
  std::string digest;
  try {
    digest = sha256_file_hex(p.string());
  } catch (const std::system_error& e) {
    throw DataError("cannot read back " + p.string() + ": " + e.code().message(), "check the disk");
  }
  shards_.push_back({{"file", name}, {"tokens", open_->count()}, {"sha256", digest}});
  open_.reset();
}

void ShardedTokenWriter::append(const uint32_t* ids, size_t n) {
  while (n > 0) {
    if (!open_)
      open_ = std::make_unique<TokenFileWriter>((fs::path(tmp_) / shard_name(shards_.size())).string(), vocab_size_,
                                                window_, eos_, tokenizer_, /*wide=*/vocab_size_ > 65536);
    const size_t take = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(n), shard_tokens_ - open_->count()));
    open_->append(ids, take);
    ids += take, n -= take, count_ += static_cast<int64_t>(take);
    if (open_->count() == shard_tokens_) close_shard();
  }
}

void ShardedTokenWriter::commit(const json& meta) {
  close_shard();
  json index = meta;
  index["kind"] = kShardIndexKind;
  index["format_version"] = kIndexFormatVersion;
  index["tokenizer"] = tokenizer_;
  index["vocab_size"] = vocab_size_;
  index["eos"] = eos_;
  index["window"] = window_;
  index["tokens"] = count_;
  index["shard_tokens"] = shard_tokens_;
  index["checksum"] = "sha256 of each shard file's bytes, header included";
  index["shards"] = shards_;
  const std::string index_path = (fs::path(tmp_) / kShardIndexName).string();
  {
    std::ofstream f(index_path);
    f << index.dump(2) << "\n";
    if (!f.flush()) throw DataError("cannot write " + index_path, "check free disk space and permissions");
  }
  // Swap the new folder in: the old dataset (checked again: it may have appeared meanwhile) moves aside first.
  check_sharded_target(dir_);
  std::error_code ec;
  const std::string old = tmp_ + ".old";
  const bool replace = fs::exists(dir_, ec);
  if (replace) fs::rename(dir_, old, ec);
  if (!ec) fs::rename(tmp_, dir_, ec);
  committed_ = true;  // from here the finished dataset is kept, in place or under its temporary name
  if (ec) {
    std::error_code back;
    if (replace && !fs::exists(dir_, back)) fs::rename(old, dir_, back);  // the previous dataset goes back
    throw DataError("cannot move " + tmp_ + " to " + dir_ + ": " + ec.message(),
                    "check permissions; the finished dataset is left in " + tmp_);
  }
  if (replace) fs::remove_all(old, ec);
}

bool is_sharded_dataset(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) || fs::path(path).filename() == kShardIndexName;
}

std::string token_dataset_meta_path(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return (fs::path(path) / kShardIndexName).string();
  if (fs::path(path).filename() == kShardIndexName) return path;
  return path + ".json";
}

// ---------------------------------------------------------------------------------------------------------------
// Reader

void TokenFile::Segment::open(const std::string& p, bool allow_raw, TokenFileHeader& hdr, bool& raw) {
  path = p;
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait forever for a writer; it is refused below.
  int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    throw DataError("cannot open token file " + p + ": " + std::strerror(errno),
                    "create it with `aobench prepare` or check the path");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw DataError(p + " is not a regular file (a FIFO, device or directory)", "give the path of a .bin token file");
  }
  const size_t fsize = static_cast<size_t>(st.st_size);
  if (fsize == 0) {
    ::close(fd);
    throw DataError("token file " + p + " is empty", kRegenHint);
  }
  map = ::mmap(nullptr, fsize, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {
    map = nullptr;
    throw DataError("cannot mmap " + p + ": " + std::strerror(errno), "check the file is readable");
  }
  map_size = fsize;
  const auto* bytes = static_cast<const uint8_t*>(map);

  auto fail = [&](const std::string& what, const std::string& hint) {
    ::munmap(map, map_size);
    map = nullptr;
    throw DataError("token file " + p + ": " + what, hint);
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
    raw = true;
    width = 2;
    hdr.version = 1;
    hdr.count = count = static_cast<int64_t>(fsize / 2);
    data = bytes;
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
  hdr.version = h[1];
  hdr.count = count = h[2];
  hdr.vocab_size = h[3];
  hdr.window = h[4];
  hdr.eos = h[5];
  const char* name = reinterpret_cast<const char*>(&h[kTokenizerNameAt]);
  hdr.tokenizer.assign(name, strnlen(name, kTokenizerNameBytes));
  for (unsigned char ch : hdr.tokenizer)
    if (ch < 0x21 || ch > 0x7e) fail("the tokenizer name in the header is not printable ASCII", kRegenHint);
  width = h[1] == 1 ? 2 : 4;
  const size_t expect = kHeaderBytes + static_cast<size_t>(count) * width;
  if (fsize != expect)
    fail("header says " + std::to_string(count) + " tokens (" + std::to_string(expect) + " bytes) but the file has " +
             std::to_string(fsize) + " bytes" + (fsize < expect ? " (truncated)" : " (trailing garbage)"),
         kRegenHint);
  data = bytes + kHeaderBytes;
}

TokenFile::TokenFile(const std::string& path, bool allow_raw) : path_(path) {
  if (is_sharded_dataset(path)) {
    open_sharded(token_dataset_meta_path(path));
    return;
  }
  segs_.push_back(std::make_unique<Segment>());
  segs_[0]->open(path, allow_raw, header_, raw_);
  starts_.push_back(0);
}

void TokenFile::open_sharded(const std::string& index_path) {
  sharded_ = true;
  index_path_ = index_path;
  const std::string where = "sharded dataset " + index_path;
  const std::string hint =
      "re-create it with `aobench prepare --shard-tokens N` (an interrupted copy or a different "
      "tool may have changed it)";
  std::error_code ec;
  if (!fs::is_regular_file(index_path, ec))
    throw DataError(fs::exists(index_path, ec)
                        ? index_path + " is not a regular file"
                        : "no " + index_path + ": " + path_ + " is a folder but not a sharded token dataset",
                    "give a .bin token file, or the folder written by `aobench prepare --shard-tokens N`");
  if (static_cast<int64_t>(fs::file_size(index_path, ec)) > kMaxIndexBytes)
    throw DataError(where + ": the index is larger than " + std::to_string(kMaxIndexBytes >> 20) + " MB", hint);
  std::ifstream in(index_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) throw DataError("cannot read " + index_path, "check the file is readable");
  json index;
  try {
    index = parse_json_limited(ss.str(), index_path, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    throw DataError(where + ": the index is not valid JSON (" + e.what() + ")", hint);
  }
  auto need = [&](const json& obj, const char* key, json::value_t type, const std::string& at) -> const json& {
    const bool ok =
        obj.is_object() && obj.contains(key) &&
        (obj[key].type() == type || (type == json::value_t::number_integer && obj[key].is_number_unsigned()));
    if (!ok) throw DataError(where + ": " + at + "\"" + key + "\" is missing or of the wrong type", hint);
    return obj[key];
  };
  const auto kInt = json::value_t::number_integer, kStr = json::value_t::string;
  if (need(index, "kind", kStr, "").get<std::string>() != kShardIndexKind)
    throw DataError(where + ": \"kind\" is not \"" + std::string(kShardIndexKind) + "\"", hint);
  const int64_t version = need(index, "format_version", kInt, "").get<int64_t>();
  if (version != kIndexFormatVersion)
    throw DataError(where + ": format_version " + std::to_string(version) + " (this build reads " +
                        std::to_string(kIndexFormatVersion) + ")",
                    "it was written by a newer aobench; " + hint);
  header_.tokenizer = need(index, "tokenizer", kStr, "").get<std::string>();
  auto int32_field = [&](const char* key) {
    const int64_t v = need(index, key, kInt, "").get<int64_t>();
    if (v < INT32_MIN || v > INT32_MAX) throw DataError(where + ": \"" + key + "\" is out of range", hint);
    return static_cast<int32_t>(v);
  };
  header_.vocab_size = int32_field("vocab_size");
  header_.window = int32_field("window");
  header_.eos = int32_field("eos");
  const int64_t total = need(index, "tokens", kInt, "").get<int64_t>();
  const json& list = need(index, "shards", json::value_t::array, "");
  if (list.empty()) throw DataError(where + ": the index lists no shards", hint);
  const fs::path dir = fs::path(index_path).parent_path();
  header_.version = 1;
  int64_t sum = 0;
  for (size_t k = 0; k < list.size(); ++k) {
    const std::string at = "shards[" + std::to_string(k) + "].";
    const std::string file = need(list[k], "file", kStr, at).get<std::string>();
    if (!plain_name(file))
      throw DataError(where + ": " + at + "file '" + file + "' is not a file name in the dataset's folder", hint);
    const std::string shard = "shard " + std::to_string(k) + " (" + (dir / file).string() + ")";
    auto seg = std::make_unique<Segment>();
    seg->sha256 = need(list[k], "sha256", kStr, at).get<std::string>();
    TokenFileHeader h;
    bool raw = false;
    try {
      seg->open((dir / file).string(), /*allow_raw=*/false, h, raw);
    } catch (const DataError& e) {
      throw DataError(where + ": " + shard + ": " + e.what(), e.hint());
    }
    const int64_t listed = need(list[k], "tokens", kInt, at).get<int64_t>();
    auto differs = [&](const std::string& what, const std::string& in_shard, const std::string& in_index) {
      throw DataError(where + ": " + shard + " has " + what + " " + in_shard + " but the index says " + in_index,
                      "the shard comes from another prepare or was replaced; " + hint);
    };
    if (h.count != listed) differs("tokens", std::to_string(h.count), std::to_string(listed));
    if (h.vocab_size != header_.vocab_size)
      differs("vocab_size", std::to_string(h.vocab_size), std::to_string(header_.vocab_size));
    if (h.tokenizer != header_.tokenizer) differs("tokenizer", "'" + h.tokenizer + "'", "'" + header_.tokenizer + "'");
    if (h.window != header_.window) differs("window", std::to_string(h.window), std::to_string(header_.window));
    if (h.eos != header_.eos) differs("eos", std::to_string(h.eos), std::to_string(header_.eos));
    header_.version = std::max(header_.version, h.version);
    starts_.push_back(sum);
    sum += h.count;
    segs_.push_back(std::move(seg));
  }
  if (sum != total)
    throw DataError(
        where + ": the shards hold " + std::to_string(sum) + " tokens but the index says " + std::to_string(total),
        hint);
  header_.count = total;
}

TokenFile::~TokenFile() = default;

size_t TokenFile::segment_of(int64_t i) const {
  const size_t k = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), i) - starts_.begin()) - 1;
  const Segment& s = *segs_[k];
  if (!s.sha256.empty())
    std::call_once(s.checked, [&] {
      const std::string got = sha256_hex(s.map, s.map_size, s.path);
      if (got != s.sha256)
        throw DataError("sharded dataset " + index_path_ + ": shard " + std::to_string(k) + " (" + s.path +
                            ") does not match its sha256 in the index (the file has " + got + ", the index " +
                            s.sha256 + "): it changed after prepare wrote it",
                        "re-create the dataset with `aobench prepare --shard-tokens N`, or restore the shard");
    });
  return k;
}

std::string TokenFile::locate(int64_t i) const {
  const size_t k = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), i) - starts_.begin()) - 1;
  const Segment& s = *segs_[k];
  const int64_t j = i - starts_[k];
  const std::string offset = std::to_string((raw_ ? 0 : int64_t(kHeaderBytes)) + j * s.width);
  if (!sharded_) return "token file " + path_ + ": token " + std::to_string(i) + " (byte offset " + offset + ")";
  return "sharded dataset " + index_path_ + ": token " + std::to_string(i) + " = token " + std::to_string(j) +
         " of shard " + std::to_string(k) + " (" + s.path + ", byte offset " + offset + ")";
}

void TokenFile::verify() const {
  for (const int64_t start : starts_) segment_of(start);
}

uint32_t TokenFile::at(int64_t i) const {
  if (i < 0 || i >= header_.count)
    throw DataError("token file " + path_ + ": index " + std::to_string(i) + " out of range [0, " +
                        std::to_string(header_.count) + ")",
                    "the window or batch does not fit the file");
  const size_t k = segment_of(i);
  const Segment& s = *segs_[k];
  const uint8_t* p = s.data + (i - starts_[k]) * s.width;
  if (s.width == 2) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

torch::Tensor TokenFile::slice(int64_t start, int64_t len) const {
  if (start < 0 || len < 0 || start + len > header_.count)
    throw DataError("token file " + path_ + ": slice [" + std::to_string(start) + ", " + std::to_string(start + len) +
                        ") is outside the " + std::to_string(header_.count) + " tokens",
                    "use a shorter window or a larger file");
  auto out = torch::empty({len}, torch::kInt64);  // (len,)
  int64_t* o = out.data_ptr<int64_t>();
  // One piece per segment the slice crosses (one for a single file).
  for (int64_t done = 0; done < len;) {
    const size_t k = segment_of(start + done);
    const Segment& s = *segs_[k];
    const int64_t from = start + done - starts_[k];
    const int64_t n = std::min(len - done, s.count - from);
    const uint8_t* p = s.data + from * s.width;
    if (s.width == 2) {
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        o[done + i] = v;
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        uint32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        o[done + i] = v;
      }
    }
    done += n;
  }
  return out;
}

void check_token_ids(const TokenFile& file, int64_t vocab_size, const std::string& owner) {
  const int64_t header_vocab = file.header().vocab_size;
  // prepare wrote every id of a sharded dataset below its vocab_size, and each shard's checksum is checked when
  // it is first read: a scan of billions of tokens at open would add nothing.
  if (file.sharded() && header_vocab > 0 && header_vocab <= vocab_size) return;
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
      const std::string where = file.locate(i) + " is id " + std::to_string(id);
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
