// Implements: datasets/prepare.h.
#include "datasets/prepare.h"

#include <glob.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include <lzma.h>
#include <zstd.h>

#include "core/config.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/progress.h"
#include "datasets/detokenizers.h"
#include "datasets/encode_rows.h"
#include "datasets/packing.h"
#include "datasets/token_file.h"
#include "datasets/tokenizer.h"

namespace aobench {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kMaxThreads = 1024;       // --threads
constexpr size_t kReadBytes = 1 << 20;  // one read of a compressed or plain input

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// ---------------------------------------------------------------------------------------------------------------
// Input bytes: a plain file, or .xz (liblzma) / .zst (libzstd) decompressed in process (no subprocess, no shell),
// in 1 MiB pieces, so an input of any size is read in bounded memory.

class ByteSource {
 public:
  explicit ByteSource(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "rb")) {
    if (!f_) throw DataError("cannot open input " + path + ": " + std::strerror(errno), "check the --input path");
  }
  virtual ~ByteSource() { std::fclose(f_); }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;
  // Up to `cap` bytes into `out`; 0 at the end.
  virtual size_t read(char* out, size_t cap) { return read_raw(out, cap); }

 protected:
  size_t read_raw(char* out, size_t cap) {
    const size_t n = std::fread(out, 1, cap, f_);
    if (n == 0 && std::ferror(f_))
      throw DataError("cannot read input " + path_ + ": " + std::strerror(errno), "check the disk and the file");
    raw_bytes_ += n;
    return n;
  }
  std::string path_;
  FILE* f_;
  uint64_t raw_bytes_ = 0;  // compressed bytes read so far (error positions)
};

// .xz: concatenated streams are read as `xz -dc` reads them.
class XzSource : public ByteSource {
 public:
  explicit XzSource(const std::string& path) : ByteSource(path), in_(kReadBytes) {
    if (lzma_stream_decoder(&strm_, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK)
      throw DataError("cannot start the .xz decoder for " + path, "out of memory?");
  }
  ~XzSource() override { lzma_end(&strm_); }
  size_t read(char* out, size_t cap) override {
    strm_.next_out = reinterpret_cast<uint8_t*>(out);
    strm_.avail_out = cap;
    while (strm_.avail_out == cap && !done_) {
      if (strm_.avail_in == 0 && !eof_) {
        strm_.avail_in = read_raw(in_.data(), in_.size());
        strm_.next_in = reinterpret_cast<const uint8_t*>(in_.data());
        eof_ = strm_.avail_in == 0;
      }
      const lzma_ret ret = lzma_code(&strm_, eof_ ? LZMA_FINISH : LZMA_RUN);
      if (ret == LZMA_STREAM_END) {
        done_ = true;
      } else if (ret != LZMA_OK) {
        const char* why = ret == LZMA_FORMAT_ERROR ? "not an .xz file"
                          : ret == LZMA_DATA_ERROR ? "corrupt data"
                          : ret == LZMA_BUF_ERROR  ? "truncated"
                          : ret == LZMA_MEM_ERROR  ? "out of memory"
                                                   : "unsupported or damaged .xz stream";
        throw DataError(
            "cannot decompress " + path_ + ": " + why + " (at compressed byte " + std::to_string(strm_.total_in) + ")",
            "check the file is a complete .xz stream (xz -t FILE)");
      }
    }
    return cap - strm_.avail_out;
  }

 private:
  lzma_stream strm_ = LZMA_STREAM_INIT;
  std::vector<char> in_;
  bool eof_ = false, done_ = false;
};

// .zst: one or more concatenated frames (zstd -dc).
class ZstdSource : public ByteSource {
 public:
  explicit ZstdSource(const std::string& path)
      : ByteSource(path), in_(ZSTD_DStreamInSize()), ds_(ZSTD_createDStream()) {
    if (!ds_) throw DataError("cannot start the .zst decoder for " + path, "out of memory?");
  }
  ~ZstdSource() override { ZSTD_freeDStream(ds_); }
  size_t read(char* out, size_t cap) override {
    ZSTD_outBuffer ob{out, cap, 0};
    while (ob.pos == 0) {
      if (ib_.pos == ib_.size) {
        ib_ = {in_.data(), read_raw(in_.data(), in_.size()), 0};
        if (ib_.size == 0) {
          if (!frame_done_)  // the last frame never ended
            throw DataError("cannot decompress " + path_ + ": truncated (the input ends inside a frame, at byte " +
                                std::to_string(raw_bytes_) + ")",
                            "check the file is a complete .zst file (zstd -t FILE)");
          return 0;
        }
      }
      const size_t ret = ZSTD_decompressStream(ds_, &ob, &ib_);
      if (ZSTD_isError(ret))
        throw DataError("cannot decompress " + path_ + ": " + ZSTD_getErrorName(ret) + " (near compressed byte " +
                            std::to_string(raw_bytes_ - (ib_.size - ib_.pos)) + ")",
                        "check the file is a complete .zst file (zstd -t FILE)");
      frame_done_ = ret == 0;
    }
    return ob.pos;
  }

 private:
  std::vector<char> in_;
  ZSTD_DStream* ds_;
  ZSTD_inBuffer ib_{nullptr, 0, 0};
  bool frame_done_ = true;  // an empty file holds no frame, and no text
};

// The reader for `path`, by its extension; compressions and formats aobench cannot read are refused by name.
std::unique_ptr<ByteSource> open_input(const std::string& path) {
  if (ends_with(path, ".xz")) return std::make_unique<XzSource>(path);
  if (ends_with(path, ".zst") || ends_with(path, ".zstd")) return std::make_unique<ZstdSource>(path);
  for (const char* ext : {".gz", ".tgz", ".bz2", ".lz4", ".lzma", ".br", ".7z", ".zip", ".tar"})
    if (ends_with(path, ext))
      throw DataError("input " + path + ": " + std::string(ext) + " compression is not supported",
                      "prepare reads plain, .xz and .zst files; recompress it, e.g. `zcat F.gz | zstd -o F.zst`");
  for (const char* ext : {".parquet", ".arrow"})
    if (ends_with(path, ext))
      throw DataError("input " + path + ": " + std::string(ext) + " files cannot be read (no C++ reader is packaged)",
                      "convert them to JSONL with Hugging Face datasets (ds.to_json(\"part.jsonl\")) and use "
                      "--format jsonl");
  return std::make_unique<ByteSource>(path);
}

// Lines of a ByteSource without their "\n"; a final line without "\n" counts too.
class LineReader {
 public:
  explicit LineReader(std::unique_ptr<ByteSource> src) : src_(std::move(src)), buf_(kReadBytes) {}
  // The next line into `line`; `newline`: whether a "\n" ended it. false at the end.
  bool next(std::string& line, bool& newline) {
    line.clear();
    for (;;) {
      if (pos_ == end_) {
        pos_ = 0;
        end_ = src_->read(buf_.data(), buf_.size());
        if (end_ == 0) {
          newline = false;
          return !line.empty();
        }
      }
      const char* b = buf_.data() + pos_;
      const void* nl = std::memchr(b, '\n', end_ - pos_);
      if (nl) {
        const size_t n = static_cast<const char*>(nl) - b;
        line.append(b, n);
        pos_ += n + 1;
        newline = true;
        return true;
      }
      line.append(b, end_ - pos_);
      pos_ = end_;
    }
  }

 private:
  std::unique_ptr<ByteSource> src_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
};

bool only_space(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

// The rows of one input file for `format`, before detokenization, one at a time (the rules of the Hugging Face
// loaders each format stands for; spec-sedd-radd.md §4.2).
//   text, fortune: documents separated by lines that are exactly "<|endoftext|>" / "%"; the newline before a
//     separator belongs to it (README of shared/data: split on "\n<|endoftext|>\n"); an empty trailing document is
//     dropped; a file without separators is one document, its text unchanged; fortune drops empty documents.
//   lines, lm1b: every line; ptb: every line stripped; wikitext: lines keeping "\n", whitespace-only ones "";
//   jsonl, lambada: the "text" field of every line that is not blank.
// `count_only`: rows are counted, not kept (jsonl lines are not parsed: each non-blank one is a row or an error).
class RowReader {
 public:
  RowReader(const std::string& path, const std::string& format, bool count_only)
      : path_(path), format_(format), count_only_(count_only), lines_(open_input(path)) {
    if (format == "text") sep_ = "<|endoftext|>";
    if (format == "fortune") sep_ = "%";
  }
  bool next(std::string& row) {
    if (!sep_.empty()) return next_doc(row);
    while (lines_.next(line_, newline_)) {
      ++lineno_;
      if (format_ == "lines" || format_ == "lm1b") {
        row.swap(line_);
      } else if (format_ == "ptb") {  // HF ptb_text_only: each line stripped
        const size_t b = line_.find_first_not_of(" \t\r"), e = line_.find_last_not_of(" \t\r");
        row = b == std::string::npos ? "" : line_.substr(b, e - b + 1);
      } else if (format_ == "wikitext") {  // HF wikitext loader: lines keep "\n"; whitespace-only lines become ""
        if (newline_) line_ += '\n';
        if (only_space(line_)) line_.clear();
        row.swap(line_);
      } else {  // jsonl, lambada
        if (only_space(line_)) continue;
        if (!count_only_) row = json_text();
      }
      return true;
    }
    return false;
  }

 private:
  bool next_doc(std::string& row) {
    while (lines_.next(line_, newline_)) {
      last_newline_ = newline_;
      if (line_ == sep_) {
        any_sep_ = true;
        first_ = true;
        row.swap(cur_);
        cur_.clear();
        if (format_ == "fortune" && row.empty()) continue;
        return true;
      }
      if (!first_) cur_ += '\n';
      cur_ += line_;
      first_ = false;
    }
    if (ended_) return false;
    ended_ = true;
    if (!any_sep_) {  // one document: the file's text as it is, its final newline included
      if (last_newline_) cur_ += '\n';
      if (format_ == "fortune" && cur_.empty()) return false;
      row.swap(cur_);
      return true;
    }
    if (cur_.empty()) return false;
    row.swap(cur_);
    return true;
  }

  std::string json_text() {
    json j;
    try {
      j = json::parse(line_);
    } catch (const std::exception& e) {
      throw DataError(path_ + ":" + std::to_string(lineno_) + ": invalid JSON (" + e.what() + ")",
                      "each line must be one JSON object with a \"text\" field");
    }
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
      throw DataError(path_ + ":" + std::to_string(lineno_) + ": no string field \"text\"",
                      "each line must be one JSON object with a \"text\" field");
    return j["text"].get<std::string>();
  }

  std::string path_, format_, sep_;
  bool count_only_;
  LineReader lines_;
  std::string line_, cur_;
  bool newline_ = false, last_newline_ = false, any_sep_ = false, first_ = true, ended_ = false;
  int64_t lineno_ = 0;
};

// Do two paths name one file? Existing files by identity (hard and symbolic links), others by their
// absolute, normalised path.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;
  const fs::path ca = fs::weakly_canonical(fs::absolute(a, ec), ec);
  if (ec) return false;
  const fs::path cb = fs::weakly_canonical(fs::absolute(b, ec), ec);
  return !ec && ca == cb;
}

// Is `file` inside the folder `dir` (after resolving links)?
bool inside(const std::string& file, const std::string& dir) {
  std::error_code ec;
  const fs::path f = fs::weakly_canonical(fs::absolute(file, ec), ec);
  const fs::path d = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  if (ec) return false;
  auto fi = f.begin();
  for (auto di = d.begin(); di != d.end(); ++di, ++fi)
    if (di->empty())
      continue;  // the trailing "" of "dir/"
    else if (fi == f.end() || *fi != *di)
      return false;
  return true;
}

bool has_glob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// The files of `pattern` (POSIX glob(3): *, ?, [..]; no shell, no ~ or $ expansion), sorted.
std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);  // a folder it cannot read holds no match
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (rc == GLOB_NOMATCH || (rc == 0 && out.empty()))
    throw DataError("input pattern " + pattern + " matches no file",
                    "check the folder and the pattern, e.g. --input 'owt/*.jsonl.zst' (quoted, so prepare expands it)");
  if (rc != 0)
    throw DataError("cannot expand the input pattern " + pattern + ": " + std::strerror(errno),
                    "check the folders it names are readable");
  return out;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, const std::string& format) {
  std::vector<std::string> files;
  for (const auto& given : inputs) {
    // A pattern's matches, unless a file is literally called so.
    std::error_code ec;
    const std::vector<std::string> paths =
        has_glob(given) && !fs::exists(given, ec) ? glob_files(given) : std::vector<std::string>{given};
    for (const auto& in : paths) {
      if (fs::is_directory(in)) {
        std::vector<std::string> sub;
        for (const auto& e : fs::directory_iterator(in)) {
          if (!e.is_regular_file()) continue;
          const std::string name = e.path().filename().string();
          if (name.empty() || name[0] == '.') continue;
          if (format == "fortune" && name.find('.') != std::string::npos) continue;  // skip *.dat, *.u8
          sub.push_back(e.path().string());
        }
        std::sort(sub.begin(), sub.end());
        if (sub.empty())
          throw DataError("input directory " + in + " holds no usable files",
                          format == "fortune" ? "fortune reads files whose names have no '.'" : "check --input");
        files.insert(files.end(), sub.begin(), sub.end());
      } else if (fs::is_regular_file(in)) {
        files.push_back(in);
      } else if (fs::exists(in)) {  // a FIFO or device would block or never end
        throw DataError("input " + in + " is not a regular file or directory", "give a file or a folder of files");
      } else {
        throw DataError("input " + in + " does not exist", "check the --input path");
      }
    }
  }
  return files;
}

// Streaming pack_rows (datasets/packing.h), token for token: rows arrive in order and whole windows leave as soon
// as they are final. "reference" needs the split's row count up front (its 8 shards and 1000-row groups).
class StreamPacker {
 public:
  StreamPacker(const PackOptions& opt, uint32_t eos, int64_t n_rows) : opt_(opt), eos_(eos), n_(n_rows) {
    if (opt_.mode == "reference") start_group();
  }
  // Appends one row + EOS; `emit(ids, n)` receives the packed stream.
  template <class Emit>
  void add(const std::vector<uint32_t>& row, Emit&& emit) {
    buf_.insert(buf_.end(), row.begin(), row.end());
    buf_.push_back(eos_);
    ++row_;
    if (opt_.mode == "none") {
      emit(buf_.data(), buf_.size());
      buf_.clear();
    } else if (opt_.mode == "simple") {  // every whole window is final; the tail waits for more rows
      const size_t keep = buf_.size() / opt_.window * opt_.window;
      if (keep == 0) return;
      emit(buf_.data(), keep);
      windows_ += static_cast<int64_t>(keep) / opt_.window;
      buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(keep));
    } else if (row_ == group_end_) {  // reference: a group's remainder is dropped
      const size_t keep = buf_.size() / opt_.window * opt_.window;
      emit(buf_.data(), keep);
      windows_ += static_cast<int64_t>(keep) / opt_.window;
      dropped_ += static_cast<int64_t>(buf_.size() - keep);
      buf_.clear();
      start_group();
    }
  }
  // After the last row: the tail that is not a whole window is dropped.
  void finish() {
    dropped_ += static_cast<int64_t>(buf_.size());
    buf_.clear();
  }
  int64_t windows() const { return windows_; }
  int64_t dropped() const { return dropped_; }

 private:
  // The group that starts at row_ ends at the next 1000-row step of its contiguous shard, or at the shard's end.
  void start_group() {
    for (int64_t s = 0; s < opt_.num_shards; ++s) {
      int64_t sb, se;
      contiguous_shard(n_, opt_.num_shards, s, &sb, &se);
      if (row_ >= sb && row_ < se) {
        group_end_ = std::min(se, sb + ((row_ - sb) / opt_.group_rows + 1) * opt_.group_rows);
        return;
      }
    }
    group_end_ = -1;  // past the last row
  }
  PackOptions opt_;
  uint32_t eos_;
  int64_t n_, row_ = 0, group_end_ = -1, windows_ = 0, dropped_ = 0;
  std::vector<uint32_t> buf_;
};

// One output split: its token file (+ .json sidecar) or sharded folder, the packer in front of it and what it got.
struct Split {
  std::string path;
  std::unique_ptr<TokenFileWriter> file;
  std::unique_ptr<ShardedTokenWriter> shards;
  StreamPacker packer;
  int64_t rows = 0, bytes = 0;

  Split(const std::string& p, const PrepareSpec& spec, const Tokenizer& tok, const PackOptions& pack, int64_t n_rows)
      : path(p), packer(pack, static_cast<uint32_t>(tok.eos_id()), n_rows) {
    const int32_t window = pack.mode == "none" ? 0 : static_cast<int32_t>(pack.window);
    if (spec.shard_tokens > 0)
      shards =
          std::make_unique<ShardedTokenWriter>(p, shard_size(spec), tok.vocab_size(), window, tok.eos_id(), tok.name());
    else  // uint16 whenever the vocabulary fits, as write_token_file picks for every id below 65536
      file = std::make_unique<TokenFileWriter>(p, tok.vocab_size(), window, tok.eos_id(), tok.name(),
                                               /*wide=*/tok.vocab_size() > 65536);
  }
  // Shards of packed data hold whole windows: --shard-tokens rounded down to a multiple of --window.
  static int64_t shard_size(const PrepareSpec& spec) {
    return spec.packing == "none" ? spec.shard_tokens : spec.shard_tokens / spec.window * spec.window;
  }
  void add(const std::string& text, const std::vector<uint32_t>& ids) {
    ++rows;
    bytes += static_cast<int64_t>(text.size());
    packer.add(ids, [this](const uint32_t* p, size_t n) { file ? file->append(p, n) : shards->append(p, n); });
  }
  int64_t tokens() const { return file ? file->count() : shards->count(); }
  // Ends the split: DataError when packing left nothing, else the data, then its sidecar / index.
  void commit(const PrepareSpec& spec, const Tokenizer& tok, const std::vector<std::string>& inputs) {
    packer.finish();
    if (tokens() == 0)
      throw DataError("packing " + std::to_string(rows) + " rows for " + path + " with --packing " + spec.packing +
                          " --window " + std::to_string(spec.window) + " leaves 0 tokens (" +
                          std::to_string(packer.dropped()) + " dropped: fewer than one window)",
                      "use a smaller --window, more input, or --packing none");
    json meta = {{"format", spec.format},
                 {"tokenizer", tok.name()},
                 {"vocab_size", tok.vocab_size()},
                 {"packing", spec.packing},
                 {"window", spec.packing == "none" ? 0 : static_cast<int32_t>(spec.window)},
                 {"rows", rows},
                 {"bytes", bytes},
                 {"tokens", tokens()},
                 {"windows", packer.windows()},
                 {"dropped_tokens", packer.dropped()},
                 {"inputs", inputs}};
    if (shards) {
      shards->commit(meta);
      return;
    }
    file->commit();
    const std::string side_path = path + ".json";
    std::ofstream sf(side_path);
    sf << meta.dump(2) << "\n";
    if (!sf) throw DataError("cannot write " + side_path, "check the output directory is writable");
  }
};

// Rows read but not yet encoded, with their names for errors ("row 12 of FILE").
struct Chunk {
  struct Start {
    size_t row;      // index in `rows` of the file's first row here
    size_t file;     // index in the input files
    int64_t row_no;  // that row's 1-based number in its file
  };
  std::vector<std::string> rows;
  std::vector<Start> starts;
  int64_t bytes = 0;  // text bytes (a count pass: rows)
};

// Reads the rows of `files` in order, a chunk at a time (at least one row, then up to `chunk_bytes` of text).
class RowStream {
 public:
  RowStream(const std::vector<std::string>& files, const std::string& format, int64_t max_rows, bool count_only)
      : files_(files), format_(format), max_rows_(max_rows), count_only_(count_only) {}
  bool next_chunk(Chunk& c, int64_t chunk_bytes) {
    c = Chunk{};
    std::string row;
    while (c.bytes < chunk_bytes && !(max_rows_ > 0 && rows_ >= max_rows_)) {
      if (!reader_) {
        if (file_ == files_.size()) break;
        reader_ = std::make_unique<RowReader>(files_[file_], format_, count_only_);
        row_no_ = 0;
      }
      if (!reader_->next(row)) {
        reader_.reset();
        ++file_;
        continue;
      }
      ++rows_, ++row_no_;
      if (count_only_) {
        ++c.bytes;  // a count pass keeps nothing: the chunk is just a row counter
        continue;
      }
      if (c.starts.empty() || c.starts.back().file != file_) c.starts.push_back({c.rows.size(), file_, row_no_});
      c.bytes += static_cast<int64_t>(row.size());
      c.rows.push_back(std::move(row));
      row.clear();
    }
    return count_only_ ? c.bytes > 0 : !c.rows.empty();
  }
  int64_t rows() const { return rows_; }

 private:
  const std::vector<std::string>& files_;
  std::string format_;
  int64_t max_rows_;
  bool count_only_;
  size_t file_ = 0;
  std::unique_ptr<RowReader> reader_;
  int64_t rows_ = 0, row_no_ = 0;
};

}  // namespace

PrepareSpec PrepareSpec::from_json(const json& entry, const std::string& where) {
  if (!entry.is_object()) throw ConfigError(where + " must be an object", "see the comment in configs/quickstart.json");
  PrepareSpec spec;
  std::set<std::string> seen;  // keys as flags: "val_output" and "val-output" are one
  const char* keys =
      "name, format, input, output, tokenizer, vocab-dir, packing, window, val-output, val-fraction, "
      "max-rows, threads, shard-tokens";
  auto text = [&](const std::string& key, const json& v) {
    if (!v.is_string()) throw ConfigError(where + "." + key + " must be a string, got " + brief(v));
    return v.get<std::string>();
  };
  auto whole = [&](const std::string& key, const json& v) {
    if (!v.is_number_integer()) throw ConfigError(where + "." + key + " must be an integer, got " + brief(v));
    return v.get<int64_t>();
  };
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    std::string key = it.key();
    std::replace(key.begin(), key.end(), '_', '-');
    if (!seen.insert(key).second)
      throw ConfigError(where + ": '" + key + "' is given twice (as '" + it.key() + "' and with '-' or '_')",
                        "keep one spelling");
    const json& v = it.value();
    if (key == "name") {
      text(it.key(), v);
    } else if (key == "format") {
      spec.format = text(it.key(), v);
    } else if (key == "input") {
      for (const auto& one : v.is_array() ? v : json::array({v})) spec.inputs.push_back(text(it.key(), one));
    } else if (key == "output") {
      spec.output = text(it.key(), v);
    } else if (key == "tokenizer") {
      spec.tokenizer = text(it.key(), v);
    } else if (key == "vocab-dir") {
      spec.vocab_dir = text(it.key(), v);
    } else if (key == "packing") {
      spec.packing = text(it.key(), v);
    } else if (key == "window") {
      spec.window = whole(it.key(), v);
    } else if (key == "val-output") {
      spec.val_output = text(it.key(), v);
    } else if (key == "val-fraction") {
      if (!v.is_number()) throw ConfigError(where + "." + it.key() + " must be a number, got " + brief(v));
      spec.val_fraction = v.get<double>();
    } else if (key == "max-rows") {
      spec.max_rows = whole(it.key(), v);
    } else if (key == "shard-tokens") {
      spec.shard_tokens = whole(it.key(), v);
    } else if (key == "threads") {
      const int64_t t = whole(it.key(), v);
      if (t < INT_MIN || t > INT_MAX)
        throw ConfigError(where + "." + it.key() + " = " + std::to_string(t) + " is out of range");
      spec.threads = static_cast<int>(t);
    } else {
      const std::string near =
          closest_name(key, {"name", "format", "input", "output", "tokenizer", "vocab-dir", "packing", "window",
                             "val-output", "val-fraction", "max-rows", "threads", "shard-tokens"});
      throw ConfigError(where + ": unknown key '" + it.key() + "'",
                        near.empty() ? std::string("keys: ") + keys : "did you mean '" + near + "'?");
    }
  }
  for (const auto& [key, value] : {std::pair{"format", &spec.format}, std::pair{"output", &spec.output}})
    if (value->empty())
      throw ConfigError(where + " needs a non-empty string \"" + key + "\"", std::string("keys: ") + keys);
  if (spec.inputs.empty()) throw ConfigError(where + " needs \"input\": a path or a list of paths");
  try {
    spec.check();
  } catch (const ConfigError& e) {
    throw ConfigError(where + ": " + e.what(), e.hint());
  }
  return spec;
}

std::string PrepareSpec::command_line() const {
  std::string line = "--format " + format;
  for (const auto& in : inputs) line += " --input " + in;
  line += " --output " + output + " --tokenizer " + tokenizer;
  if (!vocab_dir.empty()) line += " --vocab-dir " + vocab_dir;
  line += " --packing " + packing + " --window " + std::to_string(window);
  if (!val_output.empty()) line += " --val-output " + val_output + " --val-fraction " + json(val_fraction).dump();
  if (max_rows > 0) line += " --max-rows " + std::to_string(max_rows);
  if (shard_tokens > 0) line += " --shard-tokens " + std::to_string(shard_tokens);
  return line + (threads > 0 ? " --threads " + std::to_string(threads) : "");
}

std::string PrepareSummary::line(const PrepareSpec& spec) const {
  char buf[512];
  std::snprintf(buf, sizeof buf, "prepare: %s/%s/%s %lld rows, %.2f MB -> %lld tokens (%lld windows) in %s",
                spec.format.c_str(), tokenizer.c_str(), spec.packing.c_str(), static_cast<long long>(rows),
                static_cast<double>(bytes) / 1e6, static_cast<long long>(tokens), static_cast<long long>(windows),
                spec.output.c_str());
  std::string out = buf;
  const auto count_shards = [](int64_t n) { return " (" + std::to_string(n) + (n == 1 ? " shard)" : " shards)"); };
  if (shards > 0) out += count_shards(shards);
  if (!spec.val_output.empty())
    out += "; val " + std::to_string(val_rows) + " rows, " + std::to_string(val_tokens) + " tokens (" +
           std::to_string(val_windows) + " windows) in " + spec.val_output +
           (val_shards > 0 ? count_shards(val_shards) : "");
  // The process's peak resident memory so far: prepare's memory bound is a claim a user can check on every run.
  std::snprintf(buf, sizeof buf, "; encode %.1f MB/s on %d threads, total %.2f s, peak RSS %.2f GiB", encode_mb_s,
                threads, seconds, max_memory_gib(torch::kCPU));
  return out + buf;
}

void PrepareSpec::check() const {
  const std::vector<std::string> known = {"text", "lines", "jsonl", "wikitext", "ptb", "lm1b", "lambada", "fortune"};
  if (std::find(known.begin(), known.end(), format) == known.end())
    throw ConfigError("unknown --format '" + format + "'", std::string("choose one of: ") + kPrepareFormats);
  if (packing != "none" && packing != "simple" && packing != "reference")
    throw ConfigError("unknown --packing '" + packing + "'", "choose one of: none, simple, reference");
  if (window <= 0 || window > INT32_MAX)
    throw ConfigError("--window " + std::to_string(window) + " must be in [1, " + std::to_string(INT32_MAX) + "]",
                      "the token-file header stores it as int32; e.g. --window 1024");
  if (!val_output.empty() && !(val_fraction > 0.0 && val_fraction < 1.0))
    throw ConfigError("--val-fraction " + std::to_string(val_fraction) + " must be in (0, 1)", "e.g. 0.05");
  if (max_rows < 0) throw ConfigError("--max-rows must be >= 0", "0 means all rows");
  if (shard_tokens < 0 || shard_tokens > INT32_MAX)
    throw ConfigError(
        "--shard-tokens " + std::to_string(shard_tokens) + " must be in [0, " + std::to_string(INT32_MAX) + "]",
        "0 writes one token file; e.g. --shard-tokens 100000000 (200 MB uint16 shards)");
  if (shard_tokens > 0 && packing != "none" && shard_tokens < window)
    throw ConfigError("--shard-tokens " + std::to_string(shard_tokens) + " is less than one --window of " +
                          std::to_string(window) + " tokens",
                      "a shard of packed data holds whole windows; e.g. --shard-tokens 100000000");
  if (chunk_bytes <= 0) throw ConfigError("prepare chunk_bytes " + std::to_string(chunk_bytes) + " must be > 0");
  // Bounded: when a thread cannot be created, libgomp ends the process ("Thread creation failed") instead
  // of throwing.
  if (threads < 0 || threads > kMaxThreads)
    throw ConfigError("--threads " + std::to_string(threads) + " must be in [0, " + std::to_string(kMaxThreads) + "]",
                      "0 means all cores");
}

PrepareSummary prepare_dataset(const PrepareSpec& spec) {
  const auto t0 = std::chrono::steady_clock::now();
  spec.check();
  const std::string& format = spec.format;
  PackOptions pack;
  pack.mode = spec.packing;
  pack.window = spec.window;
  const std::string& out = spec.output;
  const std::string& val_out = spec.val_output;
  const bool sharded = spec.shard_tokens > 0;
  int threads = spec.threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());

  auto tok = make_tokenizer(spec.tokenizer, spec.vocab_dir);
  const auto files = expand_inputs(spec.inputs, format);
  // The outputs are written over whatever is there (a sharded one only over a sharded dataset or an empty folder):
  // never over an input (a symlink or hard link included), and a sharded folder never holds one.
  for (const std::string& target : {out, val_out}) {
    if (target.empty()) continue;
    for (const std::string& t : {target, target + ".json"})
      for (const auto& f : files)
        if (same_file(t, f) || (sharded && inside(f, target)))
          throw ConfigError("output " + t + (same_file(t, f) ? " is the input " : " would hold the input ") + f +
                                "; prepare would overwrite its own input",
                            "write the token file elsewhere, e.g. --output data/name.bin");
    std::error_code ec;
    if (sharded)
      check_sharded_target(target);
    else if (fs::is_directory(target, ec))
      throw ConfigError("output " + target + " is a folder (a sharded dataset?); a single token file cannot go there",
                        "give a file name, or add --shard-tokens N to write a sharded dataset");
  }
  if (!val_out.empty() && same_file(out, val_out))
    throw ConfigError("--output and --val-output are the same file " + out, "give the validation split its own path");

  // The split and reference packing need the row count before the first row is written: a first pass counts the
  // rows (decompressing and splitting, no encoding), the second streams them.
  const bool count_first = !val_out.empty() || spec.packing == "reference";
  int64_t total = -1, n_train = -1, n_val = 0;
  if (count_first) {
    Progress counting("prepare count", 0, "rows");
    RowStream counter(files, format, spec.max_rows, /*count_only=*/true);
    Chunk c;
    while (counter.next_chunk(c, int64_t(1) << 20)) counting.advance(c.bytes);
    total = counter.rows();
    counting.finish();
    if (total == 0)
      throw DataError("no rows read from " + files.front() + (files.size() > 1 ? " ..." : ""),
                      "check --format matches the input files");
    if (!val_out.empty()) {  // the val split takes the LAST fraction of rows
      if (total < 2) throw DataError("only one row: cannot split off a validation set", "drop --val-output");
      n_val = std::llround(spec.val_fraction * static_cast<double>(total));
      n_val = std::max<int64_t>(1, std::min(n_val, total - 1));
    }
    n_train = total - n_val;
  }
  Split train(out, spec, *tok, pack, n_train);
  std::unique_ptr<Split> val = val_out.empty() ? nullptr : std::make_unique<Split>(val_out, spec, *tok, pack, n_val);

  // Read chunk k+1 on another thread while chunk k is encoded: the reader (decompression, splitting) and the
  // encoder pool overlap, and at most two chunks of text are held.
  const bool detok = format == "wikitext" || format == "ptb" || format == "lm1b" || format == "lambada";
  RowStream rows(files, format, spec.max_rows, /*count_only=*/false);
  auto read_next = [&] {
    auto c = std::make_unique<Chunk>();
    if (!rows.next_chunk(*c, spec.chunk_bytes)) c.reset();
    return c;
  };
  Progress encoding("prepare encode (" + tok->name() + ", " + std::to_string(threads) + " threads)",
                    std::max<int64_t>(total, 0), "rows");
  double encode_s = 0;
  int64_t done = 0;
  std::future<std::unique_ptr<Chunk>> next = std::async(std::launch::async, read_next);
  for (std::unique_ptr<Chunk> chunk = next.get(); chunk; chunk = next.get()) {
    next = std::async(std::launch::async, read_next);
    if (detok)
      for (auto& r : chunk->rows) r = detokenize(format, r);
    const auto row_name = [&](size_t i) {
      auto it = std::upper_bound(chunk->starts.begin(), chunk->starts.end(), i,
                                 [](size_t row, const Chunk::Start& s) { return row < s.row; });
      --it;  // the file whose first row here is the last one ≤ i
      return "row " + std::to_string(it->row_no + static_cast<int64_t>(i - it->row)) + " of " + files[it->file];
    };
    const auto te = std::chrono::steady_clock::now();
    const auto ids = encode_rows(*tok, chunk->rows, threads, &encoding, row_name);
    encode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - te).count();
    for (size_t i = 0; i < ids.size(); ++i, ++done)
      (n_train < 0 || done < n_train ? train : *val).add(chunk->rows[i], ids[i]);
  }
  encoding.finish();
  if (done == 0)
    throw DataError("no rows read from " + files.front() + (files.size() > 1 ? " ..." : ""),
                    "check --format matches the input files");
  if (total >= 0 && done != total)
    throw DataError("the inputs gave " + std::to_string(total) + " rows when counted and " + std::to_string(done) +
                        " when read (" + files.front() + (files.size() > 1 ? " ..." : "") + ")",
                    "an input changed while prepare read it; run prepare again when nothing writes to the inputs");

  train.commit(spec, *tok, files);
  if (val) val->commit(spec, *tok, files);

  PrepareSummary summary;
  summary.tokenizer = tok->name();
  summary.rows = train.rows;
  summary.bytes = train.bytes;
  summary.tokens = train.tokens();
  summary.windows = train.packer.windows();
  summary.shards = train.shards ? train.shards->shards() : 0;
  if (val) {
    summary.val_rows = val->rows;
    summary.val_tokens = val->tokens();
    summary.val_windows = val->packer.windows();
    summary.val_shards = val->shards ? val->shards->shards() : 0;
  }
  summary.threads = threads;
  const double mb = static_cast<double>(train.bytes + (val ? val->bytes : 0)) / 1e6;
  summary.encode_mb_s = encode_s > 0 ? mb / encode_s : 0.0;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return summary;
}

}  // namespace aobench
