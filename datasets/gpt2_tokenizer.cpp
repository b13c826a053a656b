// Implements: tokenizer.h — GPT-2 byte-level BPE (spec-sedd-radd.md §4.3 step 1) byte-exact with tiktoken's
// "gpt2" encoding, and the byte tokenizer (ids 0..255 = bytes, 256 = EOS) for the CPU quickstart.
// Pre-tokenizer: PCRE2 (UTF + UCP, PCRE2_MATCH_INVALID_UTF so arbitrary bytes never crash) with the GPT-2
// pattern; BPE merges follow tiktoken: repeatedly merge the leftmost adjacent pair whose concatenation has
// the lowest rank (for GPT-2 the rank of a byte string is its encoder.json id).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <queue>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "datasets/data_dir.h"
#include "datasets/tokenizer.h"

namespace aobench {

namespace {

// GPT-2's bytes_to_unicode(): printable bytes map to themselves, the rest to U+0100 + n.
std::vector<std::string> byte_to_unicode_table() {
  std::vector<int> cps(256, -1);
  auto keep = [&](int lo, int hi) {
    for (int b = lo; b <= hi; ++b) cps[b] = b;
  };
  keep('!', '~');
  keep(0xA1, 0xAC);
  keep(0xAE, 0xFF);
  int n = 0;
  for (int b = 0; b < 256; ++b)
    if (cps[b] < 0) cps[b] = 256 + n++;
  std::vector<std::string> out(256);
  for (int b = 0; b < 256; ++b) {
    int cp = cps[b];
    std::string s;
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {  // all code points here are < 0x800: two UTF-8 bytes
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    out[b] = s;
  }
  return out;
}

// Inverse of the table above: the byte-level unicode spelling of a token → its raw bytes.
std::string unicode_to_bytes(const std::string& s, const std::unordered_map<std::string, uint8_t>& inv,
                             const std::string& file) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t len = (static_cast<uint8_t>(s[i]) < 0x80) ? 1 : 2;
    auto it = inv.find(s.substr(i, len));
    if (it == inv.end())
      throw DataError(file + ": token '" + s + "' is not in GPT-2's byte-level alphabet",
                      "use the original OpenAI GPT-2 encoder.json / vocab.bpe files");
    out.push_back(static_cast<char>(it->second));
    i += len;
  }
  return out;
}

const char* kGpt2Pattern = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

std::atomic<uint64_t> g_tokenizer_serial{1};

class Gpt2Tokenizer : public Tokenizer {
 public:
  explicit Gpt2Tokenizer(const std::string& dir) : serial_(g_tokenizer_serial++) {
    const std::string enc_path = (std::filesystem::path(dir) / "encoder.json").string();
    const std::string bpe_path = (std::filesystem::path(dir) / "vocab.bpe").string();
    const auto b2u = byte_to_unicode_table();
    std::unordered_map<std::string, uint8_t> u2b;
    for (int b = 0; b < 256; ++b) u2b[b2u[b]] = static_cast<uint8_t>(b);

    std::ifstream ef(enc_path);
    if (!ef) throw DataError("cannot open " + enc_path, "check the GPT-2 vocab directory");
    nlohmann::json enc;
    try {
      ef >> enc;
    } catch (const std::exception& e) {
      throw DataError(enc_path + ": invalid JSON (" + e.what() + ")", "re-copy encoder.json from shared/data/gpt2");
    }
    decoder_.resize(enc.size());
    for (auto it = enc.begin(); it != enc.end(); ++it) {
      const int64_t id = it.value().get<int64_t>();
      if (id < 0 || id >= static_cast<int64_t>(enc.size()))
        throw DataError(enc_path + ": id " + std::to_string(id) + " out of range", "the ids must be 0..N-1");
      std::string bytes = it.key() == "<|endoftext|>" ? it.key() : unicode_to_bytes(it.key(), u2b, enc_path);
      decoder_[id] = bytes;
      if (it.key() != "<|endoftext|>") encoder_[bytes] = static_cast<uint32_t>(id);
    }
    auto eos = enc.find("<|endoftext|>");
    if (eos == enc.end()) throw DataError(enc_path + ": no <|endoftext|> entry", "use GPT-2's encoder.json");
    eos_ = eos.value().get<int32_t>();
    for (int b = 0; b < 256; ++b) {
      auto it = encoder_.find(std::string(1, static_cast<char>(b)));
      if (it == encoder_.end())
        throw DataError(enc_path + ": byte " + std::to_string(b) + " has no token", "use GPT-2's encoder.json");
      byte_id_[b] = it->second;
    }

    // vocab.bpe is read only to check it is present and consistent: for GPT-2 a merge's rank is the id of
    // its result minus 256, so tiktoken's "lowest rank of the concatenation" rule only needs the encoder.
    std::ifstream bf(bpe_path);
    if (!bf) throw DataError("cannot open " + bpe_path, "check the GPT-2 vocab directory");
    std::string line;
    int64_t merges = 0;
    std::getline(bf, line);  // "#version: 0.2"
    while (std::getline(bf, line)) {
      if (line.empty()) continue;
      const size_t sp = line.find(' ');
      if (sp == std::string::npos)
        throw DataError(bpe_path + ": merge line " + std::to_string(merges + 2) + " has no space", "corrupt file");
      std::string a = unicode_to_bytes(line.substr(0, sp), u2b, bpe_path);
      std::string b = unicode_to_bytes(line.substr(sp + 1), u2b, bpe_path);
      auto ia = encoder_.find(a), ib = encoder_.find(b), iab = encoder_.find(a + b);
      if (ia == encoder_.end() || ib == encoder_.end() || iab == encoder_.end())
        throw DataError(bpe_path + ": merge '" + line + "' uses a token missing from encoder.json",
                        "encoder.json and vocab.bpe must come from the same GPT-2 release");
      ++merges;
    }
    // Every split of every vocab token into two vocab tokens is a candidate pair (tiktoken considers any
    // adjacent pair whose concatenation is a token). Key: (left id << 32) | right id → merged id (= rank).
    for (size_t id = 0; id < decoder_.size(); ++id) {
      if (static_cast<int32_t>(id) == eos_) continue;
      const std::string& t = decoder_[id];
      for (size_t k = 1; k < t.size(); ++k) {
        auto l = encoder_.find(t.substr(0, k));
        if (l == encoder_.end()) continue;
        auto r = encoder_.find(t.substr(k));
        if (r == encoder_.end()) continue;
        pairs_[(static_cast<uint64_t>(l->second) << 32) | r->second] = static_cast<uint32_t>(id);
      }
    }

    int err = 0;
    PCRE2_SIZE off = 0;
    re_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kGpt2Pattern), PCRE2_ZERO_TERMINATED,
                        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
    if (!re_) throw DataError("internal: cannot compile the GPT-2 pre-tokenizer regex", "PCRE2 too old?");
    pcre2_jit_compile(re_, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
  }
  ~Gpt2Tokenizer() override { pcre2_code_free(re_); }

  std::string name() const override { return "gpt2"; }
  int32_t vocab_size() const override { return static_cast<int32_t>(decoder_.size()); }
  int32_t eos_id() const override { return eos_; }

  std::vector<uint32_t> encode(const std::string& text) const override {
    std::vector<uint32_t> out;
    out.reserve(text.size() / 3 + 8);
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re_, nullptr);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    const size_t n = text.size();
    size_t pos = 0;
    while (pos < n) {
      int rc = pcre2_match(re_, subject, n, pos, 0, md, nullptr);
      if (rc < 0) {  // nothing more matches: the rest is invalid UTF-8; encode its bytes as one piece
        encode_piece(text.data() + pos, n - pos, out);
        break;
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      if (ov[0] > pos) encode_piece(text.data() + pos, ov[0] - pos, out);  // skipped invalid bytes
      if (ov[1] == ov[0]) {  // cannot happen with this pattern, but never loop forever
        pos = ov[0] + 1;
        continue;
      }
      encode_piece(text.data() + ov[0], ov[1] - ov[0], out);
      pos = ov[1];
    }
    pcre2_match_data_free(md);
    return out;
  }

  std::string decode(const std::vector<uint32_t>& ids) const override {
    std::string out;
    for (uint32_t id : ids) {
      if (id >= decoder_.size())
        throw DataError("gpt2 decode: token id " + std::to_string(id) + " is out of range",
                        "GPT-2 ids are 0.." + std::to_string(decoder_.size() - 1));
      out += decoder_[id];
    }
    return out;
  }

 private:
  // A per-thread cache of the pieces BPE had to merge: pieces repeat a lot in natural text, so BPE runs about
  // once per distinct rare word. A piece that is one vocabulary entry needs no cache (one lookup either way), and
  // the cache is emptied at kCacheWords entries, so each encoding thread holds at most ~10 MB (prepare's memory
  // must not grow with the input or, much, with --threads: 500 k entries of every piece cost ~66 MB a thread).
  static constexpr size_t kCacheWords = size_t(1) << 16;
  struct Cache {
    uint64_t serial = 0;
    std::unordered_map<std::string, std::vector<uint32_t>> words;
  };

  void encode_piece(const char* p, size_t len, std::vector<uint32_t>& out) const {
    if (len == 1) {
      out.push_back(byte_id_[static_cast<uint8_t>(p[0])]);
      return;
    }
    std::string key(p, len);
    if (auto whole = encoder_.find(key); whole != encoder_.end()) {
      out.push_back(whole->second);
      return;
    }
    thread_local Cache cache;
    if (cache.serial != serial_) {
      cache.words.clear();
      cache.serial = serial_;
    }
    auto it = cache.words.find(key);
    if (it != cache.words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
    std::vector<uint32_t> ids = bpe(p, len);
    out.insert(out.end(), ids.begin(), ids.end());
    if (cache.words.size() >= kCacheWords) cache.words.clear();
    cache.words.emplace(std::move(key), std::move(ids));
  }

  // tiktoken's byte_pair_merge: merge the adjacent pair of lowest rank (leftmost on ties) until none is
  // left. O(n log n) in the piece length: the parts form a linked list (indexed by their first byte), and a
  // min-heap holds (rank << 32 | left) for adjacent pairs, whose order is exactly "lowest rank, then
  // leftmost". pair_rank[left] is the rank of the pair starting at `left` now; a merge changes the pairs on
  // both sides of the merged part, so their older heap entries no longer match pair_rank and are skipped.
  // (A merged part's next pair never has the same rank again: its token is longer than the merged one.)
  std::vector<uint32_t> bpe(const char* p, size_t len) const {
    if (len >= 0xFFFFFFFFu)
      throw DataError("gpt2 tokenizer: one pre-token of " + std::to_string(len) + " bytes (4 GiB or more)",
                      "split the input into smaller rows");
    constexpr uint32_t kNone = 0xFFFFFFFFu, kEnd = 0xFFFFFFFFu;
    const uint32_t n = static_cast<uint32_t>(len);
    std::vector<uint32_t> id(n), next(n), prev(n), pair_rank(n, kNone);
    for (uint32_t i = 0; i < n; ++i) {
      id[i] = byte_id_[static_cast<uint8_t>(p[i])];
      next[i] = i + 1 < n ? i + 1 : kEnd;
      prev[i] = i > 0 ? i - 1 : kEnd;
    }
    auto rank_of = [&](uint32_t left) -> uint32_t {
      if (left == kEnd || next[left] == kEnd) return kNone;
      auto it = pairs_.find((static_cast<uint64_t>(id[left]) << 32) | id[next[left]]);
      return it == pairs_.end() ? kNone : it->second;
    };
    std::vector<uint64_t> initial;  // every adjacent byte pair that merges, heapified at once (O(n))
    initial.reserve(n);
    for (uint32_t i = 0; i + 1 < n; ++i)
      if ((pair_rank[i] = rank_of(i)) != kNone) initial.push_back(static_cast<uint64_t>(pair_rank[i]) << 32 | i);
    std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<uint64_t>> heap(std::greater<uint64_t>(),
                                                                                      std::move(initial));
    auto update = [&](uint32_t left) {
      if (left == kEnd) return;
      pair_rank[left] = rank_of(left);
      if (pair_rank[left] != kNone) heap.push(static_cast<uint64_t>(pair_rank[left]) << 32 | left);
    };
    while (!heap.empty()) {
      const uint64_t top = heap.top();
      heap.pop();
      const uint32_t rank = static_cast<uint32_t>(top >> 32), left = static_cast<uint32_t>(top);
      if (pair_rank[left] != rank) continue;  // stale: that pair has changed (or its left part is gone)
      const uint32_t right = next[left];
      id[left] = rank;           // the rank is the merged token's id
      pair_rank[right] = kNone;  // `right` is gone
      next[left] = next[right];
      if (next[right] != kEnd) prev[next[right]] = left;
      update(prev[left]);
      update(left);
    }
    std::vector<uint32_t> out;
    for (uint32_t i = 0; i != kEnd; i = next[i]) out.push_back(id[i]);
    return out;
  }

  uint64_t serial_;
  std::unordered_map<std::string, uint32_t> encoder_;  // raw bytes → id (EOS excluded: never parsed)
  std::vector<std::string> decoder_;                   // id → raw bytes; EOS → "<|endoftext|>"
  std::unordered_map<uint64_t, uint32_t> pairs_;
  uint32_t byte_id_[256] = {};
  int32_t eos_ = -1;
  pcre2_code* re_ = nullptr;
};

class ByteTokenizer : public Tokenizer {
 public:
  std::string name() const override { return "bytes"; }
  int32_t vocab_size() const override { return 257; }
  int32_t eos_id() const override { return 256; }
  std::vector<uint32_t> encode(const std::string& text) const override {
    std::vector<uint32_t> out(text.size());
    for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<uint8_t>(text[i]);
    return out;
  }
  std::string decode(const std::vector<uint32_t>& ids) const override {
    std::string out;
    out.reserve(ids.size());
    for (uint32_t id : ids) {
      if (id < 256)
        out.push_back(static_cast<char>(id));
      else if (id == 256)
        out += "<|endoftext|>";
      else
        throw DataError("bytes decode: token id " + std::to_string(id) + " is out of range",
                        "byte tokenizer ids are 0..256 (256 = EOS)");
    }
    return out;
  }
};

std::string find_gpt2_dir(const std::string& vocab_dir) {
  namespace fs = std::filesystem;
  auto has = [](const fs::path& d) {
    return fs::is_regular_file(d / "encoder.json") && fs::is_regular_file(d / "vocab.bpe");
  };
  std::vector<std::string> tried;
  if (!vocab_dir.empty()) {  // asked for by name: never a silent fallback to another vocabulary
    if (has(vocab_dir)) return vocab_dir;
    throw DataError("--vocab-dir " + vocab_dir + " lacks encoder.json or vocab.bpe",
                    "point --vocab-dir at the folder holding both GPT-2 files (e.g. ../shared/data/gpt2), or drop it");
  }
  if (const char* g = std::getenv("AOBENCH_GPT2_DIR"); g && *g) {
    if (has(g)) return g;
    tried.push_back(std::string(g) + " ($AOBENCH_GPT2_DIR)");
  }
  if (const std::string d = shared_data_dir(); !d.empty()) {  // data_dir.h: one rule for binary and tests
    fs::path p = fs::path(d) / "gpt2";
    if (has(p)) return p.string();
    tried.push_back(p.string() + " (gpt2/ of the shared data folder " + shared_data_dir_rule() + ")");
  }
  std::string where;
  for (const auto& t : tried) where += (where.empty() ? "" : ", ") + t;
  throw DataError("gpt2 tokenizer: encoder.json / vocab.bpe not found" +
                      (where.empty() ? " (no --vocab-dir, no $AOBENCH_GPT2_DIR, and no shared data folder at " +
                                           shared_data_dir_rule() + ")"
                                     : " in " + where),
                  "set AOBENCH_GPT2_DIR to the folder holding encoder.json and vocab.bpe, or AOBENCH_DATA_DIR "
                  "to ../shared/data");
}

}  // namespace

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name, const std::string& vocab_dir) {
  if (name == "bytes") return std::make_unique<ByteTokenizer>();
  if (name == "gpt2") return std::make_unique<Gpt2Tokenizer>(find_gpt2_dir(vocab_dir));
  throw ConfigError("unknown tokenizer '" + name + "'", "choose one of: gpt2, bytes");
}

}  // namespace aobench
