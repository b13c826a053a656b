// Implements: datasets/prepare.h.
#include "datasets/prepare.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include <lzma.h>

#include "core/config.h"
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

constexpr int kMaxThreads = 1024;  // --threads

// .xz bytes → the decompressed bytes, in process with liblzma (no `xz` subprocess, no shell). Concatenated
// streams are read as `xz -dc` reads them.
std::string decompress_xz(const std::string& packed, const std::string& path) {
  lzma_stream strm = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&strm, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK)
    throw DataError("cannot start the .xz decoder for " + path, "out of memory?");
  strm.next_in = reinterpret_cast<const uint8_t*>(packed.data());
  strm.avail_in = packed.size();
  std::string out;
  uint8_t buf[1 << 16];
  lzma_ret ret = LZMA_OK;
  while (ret == LZMA_OK) {
    strm.next_out = buf;
    strm.avail_out = sizeof buf;
    ret = lzma_code(&strm, LZMA_FINISH);
    out.append(reinterpret_cast<const char*>(buf), sizeof buf - strm.avail_out);
  }
  const uint64_t at = strm.total_in;
  lzma_end(&strm);
  if (ret != LZMA_STREAM_END) {
    const char* why = ret == LZMA_FORMAT_ERROR ? "not an .xz file"
                      : ret == LZMA_DATA_ERROR ? "corrupt data"
                      : ret == LZMA_BUF_ERROR  ? "truncated"
                      : ret == LZMA_MEM_ERROR  ? "out of memory"
                                               : "unsupported or damaged .xz stream";
    throw DataError("cannot decompress " + path + ": " + why + " (at compressed byte " + std::to_string(at) + ")",
                    "check the file is a complete .xz stream (xz -t FILE)");
  }
  return out;
}

// Whole file as bytes; `.xz` files are decompressed.
std::string read_input(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot open input " + path, "check the --input path");
  std::stringstream ss;
  ss << in.rdbuf();
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".xz") == 0) return decompress_xz(ss.str(), path);
  return ss.str();
}

// Lines without their "\n"; a final line without "\n" counts too.
std::vector<std::string> split_lines(const std::string& text, bool keep_newline) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      out.push_back(text.substr(pos));
      break;
    }
    out.push_back(text.substr(pos, nl - pos + (keep_newline ? 1 : 0)));
    pos = nl + 1;
  }
  return out;
}

bool only_space(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

// Documents separated by lines that are exactly `sep`. The newline before a separator belongs to it
// (README of shared/data: split on "\n<|endoftext|>\n"); empty trailing documents are dropped.
std::vector<std::string> split_docs(const std::string& text, const std::string& sep) {
  std::vector<std::string> out;
  std::string cur;
  bool any_sep = false, first = true;
  for (auto& line : split_lines(text, false)) {
    if (line == sep) {
      any_sep = true;
      out.push_back(cur);
      cur.clear();
      first = true;
      continue;
    }
    if (!first) cur += "\n";
    cur += line;
    first = false;
  }
  if (!any_sep) return {text};  // a file without separators is one document
  if (!cur.empty()) out.push_back(cur);
  return out;
}

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

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, const std::string& format) {
  std::vector<std::string> files;
  for (const auto& in : inputs) {
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
  return files;
}

// Rows of one file for `format`, before detokenization.
std::vector<std::string> read_rows(const std::string& path, const std::string& format) {
  const std::string text = read_input(path);
  if (format == "text") return split_docs(text, "<|endoftext|>");
  if (format == "fortune") {
    std::vector<std::string> rows;
    for (auto& d : split_docs(text, "%"))
      if (!d.empty()) rows.push_back(d);
    return rows;
  }
  if (format == "lines" || format == "lm1b") return split_lines(text, false);
  if (format == "ptb") {  // HF ptb_text_only: each line stripped
    std::vector<std::string> rows;
    for (auto& l : split_lines(text, false)) {
      size_t b = l.find_first_not_of(" \t\r"), e = l.find_last_not_of(" \t\r");
      rows.push_back(b == std::string::npos ? "" : l.substr(b, e - b + 1));
    }
    return rows;
  }
  if (format == "wikitext") {  // HF wikitext loader: lines keep "\n"; whitespace-only lines become ""
    auto rows = split_lines(text, true);
    for (auto& r : rows)
      if (only_space(r)) r.clear();
    return rows;
  }
  if (format == "jsonl" || format == "lambada") {
    std::vector<std::string> rows;
    int64_t lineno = 0;
    for (auto& l : split_lines(text, false)) {
      ++lineno;
      if (only_space(l)) continue;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(l);
      } catch (const std::exception& e) {
        throw DataError(path + ":" + std::to_string(lineno) + ": invalid JSON (" + e.what() + ")",
                        "each line must be one JSON object with a \"text\" field");
      }
      if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
        throw DataError(path + ":" + std::to_string(lineno) + ": no string field \"text\"",
                        "each line must be one JSON object with a \"text\" field");
      rows.push_back(j["text"].get<std::string>());
    }
    return rows;
  }
  throw ConfigError("unknown --format '" + format + "'", std::string("choose one of: ") + kPrepareFormats);
}

struct Written {
  int64_t rows = 0, bytes = 0, tokens = 0, windows = 0;
};

Written write_split(const std::string& out_path, const std::vector<std::string>& rows,
                    const std::vector<std::vector<uint32_t>>& ids, const Tokenizer& tok, const PackOptions& pack,
                    const std::string& format, const std::vector<std::string>& inputs) {
  Written w;
  w.rows = static_cast<int64_t>(rows.size());
  for (const auto& r : rows) w.bytes += static_cast<int64_t>(r.size());
  PackResult res = pack_rows(ids, static_cast<uint32_t>(tok.eos_id()), pack);
  w.tokens = static_cast<int64_t>(res.tokens.size());
  w.windows = res.windows;
  if (res.tokens.empty())
    throw DataError("packing " + std::to_string(w.rows) + " rows for " + out_path + " with --packing " + pack.mode +
                        " --window " + std::to_string(pack.window) + " leaves 0 tokens (" +
                        std::to_string(res.dropped) + " dropped: fewer than one window)",
                    "use a smaller --window, more input, or --packing none");
  const int32_t window = pack.mode == "none" ? 0 : static_cast<int32_t>(pack.window);
  write_token_file(out_path, res.tokens, tok.vocab_size(), window, tok.eos_id(), tok.name());
  nlohmann::json side = {{"format", format},
                         {"tokenizer", tok.name()},
                         {"vocab_size", tok.vocab_size()},
                         {"packing", pack.mode},
                         {"window", window},
                         {"rows", w.rows},
                         {"bytes", w.bytes},
                         {"tokens", w.tokens},
                         {"windows", w.windows},
                         {"dropped_tokens", res.dropped},
                         {"inputs", inputs}};
  const std::string side_path = out_path + ".json";
  std::ofstream sf(side_path);
  sf << side.dump(2) << "\n";
  if (!sf) throw DataError("cannot write " + side_path, "check the output directory is writable");
  return w;
}

}  // namespace

PrepareSpec PrepareSpec::from_json(const json& entry, const std::string& where) {
  if (!entry.is_object()) throw ConfigError(where + " must be an object", "see the comment in configs/quickstart.json");
  PrepareSpec spec;
  std::set<std::string> seen;  // keys as flags: "val_output" and "val-output" are one
  const char* keys =
      "name, format, input, output, tokenizer, vocab-dir, packing, window, val-output, val-fraction, "
      "max-rows, threads";
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
    } else if (key == "threads") {
      const int64_t t = whole(it.key(), v);
      if (t < INT_MIN || t > INT_MAX)
        throw ConfigError(where + "." + it.key() + " = " + std::to_string(t) + " is out of range");
      spec.threads = static_cast<int>(t);
    } else {
      const std::string near =
          closest_name(key, {"name", "format", "input", "output", "tokenizer", "vocab-dir", "packing", "window",
                             "val-output", "val-fraction", "max-rows", "threads"});
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
  return line + (threads > 0 ? " --threads " + std::to_string(threads) : "");
}

std::string PrepareSummary::line(const PrepareSpec& spec) const {
  char buf[512];
  std::snprintf(buf, sizeof buf, "prepare: %s/%s/%s %lld rows, %.2f MB -> %lld tokens (%lld windows) in %s",
                spec.format.c_str(), tokenizer.c_str(), spec.packing.c_str(), static_cast<long long>(rows),
                static_cast<double>(bytes) / 1e6, static_cast<long long>(tokens), static_cast<long long>(windows),
                spec.output.c_str());
  std::string out = buf;
  if (!spec.val_output.empty())
    out += "; val " + std::to_string(val_rows) + " rows, " + std::to_string(val_tokens) + " tokens (" +
           std::to_string(val_windows) + " windows) in " + spec.val_output;
  std::snprintf(buf, sizeof buf, "; encode %.1f MB/s on %d threads, total %.2f s", encode_mb_s, threads, seconds);
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
  const double val_fraction = spec.val_fraction;
  const std::string& val_out = spec.val_output;
  const int64_t max_rows = spec.max_rows;
  int threads = spec.threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());

  auto tok = make_tokenizer(spec.tokenizer, spec.vocab_dir);
  const auto files = expand_inputs(spec.inputs, format);
  // The outputs are written over whatever is there: never over an input (a symlink or hard link included).
  const std::string& out = spec.output;
  for (const std::string& target : {out, out + ".json", val_out, val_out + ".json"}) {
    if (target.empty() || target == ".json") continue;
    for (const auto& f : files)
      if (same_file(target, f))
        throw ConfigError("output " + target + " is the input " + f + "; prepare would overwrite its own input",
                          "write the token file elsewhere, e.g. --output data/name.bin");
  }
  if (!val_out.empty() && same_file(out, val_out))
    throw ConfigError("--output and --val-output are the same file " + out, "give the validation split its own path");
  std::vector<std::string> rows;
  std::vector<std::pair<size_t, std::string>> file_starts;  // (index of its first row, file): names a row
  Progress reading("prepare read", static_cast<int64_t>(files.size()), "files");
  for (const auto& f : files) {
    auto r = read_rows(f, format);
    file_starts.emplace_back(rows.size(), f);
    rows.insert(rows.end(), std::make_move_iterator(r.begin()), std::make_move_iterator(r.end()));
    reading.advance();
    if (max_rows > 0 && static_cast<int64_t>(rows.size()) >= max_rows) break;
  }
  reading.finish(std::to_string(rows.size()) + " rows");
  if (max_rows > 0 && static_cast<int64_t>(rows.size()) > max_rows) rows.resize(max_rows);
  if (rows.empty())
    throw DataError("no rows read from " + files.front() + (files.size() > 1 ? " ..." : ""),
                    "check --format matches the input files");
  if (format == "wikitext" || format == "ptb" || format == "lm1b" || format == "lambada")
    for (auto& r : rows) r = detokenize(format, r);

  const auto t_read = std::chrono::steady_clock::now();
  Progress encoding("prepare encode (" + tok->name() + ", " + std::to_string(threads) + " threads)",
                    static_cast<int64_t>(rows.size()), "rows");
  const auto row_name = [&](size_t i) {
    auto it = std::upper_bound(file_starts.begin(), file_starts.end(), i,
                               [](size_t row, const std::pair<size_t, std::string>& s) { return row < s.first; });
    --it;  // the file whose first row is the last one ≤ i
    return "row " + std::to_string(i - it->first + 1) + " of " + it->second;
  };
  auto ids = encode_rows(*tok, rows, threads, &encoding, row_name);
  encoding.finish();
  const auto t_enc = std::chrono::steady_clock::now();

  // The val split takes the LAST fraction of rows.
  size_t n_val = 0;
  if (!val_out.empty()) {
    n_val = static_cast<size_t>(std::llround(val_fraction * static_cast<double>(rows.size())));
    n_val = std::max<size_t>(1, std::min(n_val, rows.size() - 1));
    if (rows.size() < 2) throw DataError("only one row: cannot split off a validation set", "drop --val-output");
  }
  const size_t n_train = rows.size() - n_val;
  std::vector<std::string> val_rows(std::make_move_iterator(rows.begin() + n_train),
                                    std::make_move_iterator(rows.end()));
  std::vector<std::vector<uint32_t>> val_ids(std::make_move_iterator(ids.begin() + n_train),
                                             std::make_move_iterator(ids.end()));
  rows.resize(n_train);
  ids.resize(n_train);

  Written w = write_split(out, rows, ids, *tok, pack, format, files);
  Written wv;
  if (!val_out.empty()) wv = write_split(val_out, val_rows, val_ids, *tok, pack, format, files);

  const double enc_s = std::chrono::duration<double>(t_enc - t_read).count();
  PrepareSummary summary;
  summary.tokenizer = tok->name();
  summary.rows = w.rows;
  summary.bytes = w.bytes;
  summary.tokens = w.tokens;
  summary.windows = w.windows;
  summary.val_rows = wv.rows;
  summary.val_tokens = wv.tokens;
  summary.val_windows = wv.windows;
  summary.threads = threads;
  const double mb = static_cast<double>(w.bytes + wv.bytes) / 1e6;
  summary.encode_mb_s = enc_s > 0 ? mb / enc_s : 0.0;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return summary;
}

}  // namespace aobench
