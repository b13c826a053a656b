// Implements: spec-sedd-radd.md §4.2 detokenizers, byte-for-byte equal to SEDD's Python functions
// (tests/data/make_detok_golden.py is the oracle). Regex rules use PCRE2 (UTF, UCP: Unicode \s and \w as
// in Python 3 `re`); `$` keeps Python's default meaning (end of string or before a final newline).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

#include "core/errors.h"
#include "datasets/detokenizers.h"

namespace aobench {

namespace {

// One compiled pattern + its replacement (PCRE2 `$1` syntax); compiled once, shared by all threads
// (pcre2_code is read-only after compilation).
class Rule {
 public:
  Rule(const char* pattern, const char* replacement) : replacement_(replacement) {
    int err = 0;
    PCRE2_SIZE off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
    if (!code_) throw DataError(std::string("internal: bad detokenizer regex ") + pattern, "report a bug");
  }
  ~Rule() { pcre2_code_free(code_); }

  std::string apply(const std::string& text) const {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    PCRE2_SIZE out_len = text.size() * 2 + 64;
    std::string out(out_len, '\0');
    const uint32_t opts = PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH;
    auto run = [&]() {
      return pcre2_substitute(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, opts, md, nullptr,
                              reinterpret_cast<PCRE2_SPTR>(replacement_.data()), replacement_.size(),
                              reinterpret_cast<PCRE2_UCHAR*>(&out[0]), &out_len);
    };
    int rc = run();
    if (rc == PCRE2_ERROR_NOMEMORY) {  // out_len now holds the size needed
      out.assign(out_len, '\0');
      rc = run();
    }
    pcre2_match_data_free(md);
    if (rc < 0) {
      // Invalid UTF-8 in a replacement region is the only realistic cause; leave the row unchanged.
      return text;
    }
    out.resize(out_len);
    return out;
  }

 private:
  pcre2_code* code_ = nullptr;
  std::string replacement_;
};

// Python str.strip(): code points with str.isspace() at either end.
bool is_py_space(uint32_t cp) {
  return (cp >= 9 && cp <= 13) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Decodes the code point starting at byte i (valid UTF-8 assumed; an invalid byte counts as itself).
uint32_t cp_at(const std::string& s, size_t i, size_t* len) {
  const auto c = static_cast<uint8_t>(s[i]);
  int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (i + n > s.size()) n = 1;
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  *len = n;
  return cp;
}

std::string py_strip(const std::string& s) {
  size_t b = 0, len = 0;
  while (b < s.size() && is_py_space(cp_at(s, b, &len))) b += len;
  size_t e = s.size();
  while (e > b) {  // step back to the start of the previous code point
    size_t k = e - 1;
    while (k > b && (static_cast<uint8_t>(s[k]) & 0xC0) == 0x80) --k;
    if (!is_py_space(cp_at(s, k, &len)) || k + len != e) break;
    e = k;
  }
  return s.substr(b, e - b);
}

}  // namespace

std::string replace_all(const std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (true) {
    size_t hit = text.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(text, pos, hit - pos);
    out += to;
    pos = hit + from.size();
  }
  out.append(text, pos, std::string::npos);
  return out;
}

std::string wikitext_detokenize(const std::string& text) {
  static const Rule r_slash("/' [0-9]/", "/'[0-9]/");  // upstream bug, kept literally (§4.2 rule 2)
  static const Rule r_paren("\\(\\s*([^\\)]*?)\\s*\\)", "($1)");
  static const Rule r_brack("\\[\\s*([^\\]]*?)\\s*\\]", "[$1]");
  static const Rule r_brace("\\{\\s*([^}]*?)\\s*\\}", "{$1}");
  static const Rule r_dquote("\"\\s*([^\"]*?)\\s*\"", "\"$1\"");
  static const Rule r_squote("'\\s*([^']*?)\\s*'", "'$1'");
  std::string s = replace_all(text, "s '", "s'");
  s = r_slash.apply(s);
  s = replace_all(s, " @-@ ", "-");
  s = replace_all(s, " @,@ ", ",");
  s = replace_all(s, " @.@ ", ".");
  s = replace_all(s, " : ", ": ");
  s = replace_all(s, " ; ", "; ");
  s = replace_all(s, " . ", ". ");
  s = replace_all(s, " ! ", "! ");
  s = replace_all(s, " ? ", "? ");
  s = replace_all(s, " , ", ", ");
  s = r_paren.apply(s);
  s = r_brack.apply(s);
  s = r_brace.apply(s);
  s = r_dquote.apply(s);
  s = r_squote.apply(s);
  s = replace_all(s, "= = = =", "====");
  s = replace_all(s, "= = =", "===");
  s = replace_all(s, "= =", "==");
  s = replace_all(s, " \xC2\xB0 ", "\xC2\xB0");  // " ° " → "°"
  s = replace_all(s, " \n", "\n");
  s = replace_all(s, "\n ", "\n");
  s = replace_all(s, " N ", " 1 ");
  s = replace_all(s, " 's", "'s");
  return s;
}

std::string ptb_detokenize(const std::string& text) {
  std::string s = replace_all(text, " 's", "'s");
  s = replace_all(s, "s ' ", "s' ");
  s = replace_all(s, " n't", "n't");
  s = replace_all(s, " \n ", "\n");
  s = replace_all(s, "\\/", "/");
  for (int i = 0; i < 10; ++i) s = replace_all(s, " N ", " 1 ");
  s = replace_all(s, "$ 1", "$1");
  s = replace_all(s, "# 1", "#1");
  s = replace_all(s, "<unk>", "?");
  return s;
}

std::string lm1b_detokenize(const std::string& text) {
  static const Rule r_apos(" '(\\w+)", "'$1");
  static const Rule r_period(" (\\w+) \\. ", " $1. ");
  static const Rule r_period_end(" (\\w+) \\.$", " $1.");
  static const Rule r_q_end(" \\?$", "?");
  static const Rule r_ex_end(" \\!$", "!");
  static const Rule r_dq("\" ([^\"]+) \"", "\"$1\"");
  static const Rule r_sq("' ([^']+) '", "'$1'");
  static const Rule r_paren("\\( ([^\\(\\)]+) \\)", "($1)");
  static const Rule r_brack("\\[ ([^\\[\\]]+) \\]", "[$1]");
  std::string s = replace_all(text, "http : / / ", "http://");
  s = replace_all(s, "https : / / ", "https://");
  s = r_apos.apply(s);
  s = r_period.apply(s);
  s = r_period_end.apply(s);
  s = replace_all(s, " ? ", "? ");
  s = r_q_end.apply(s);
  s = replace_all(s, " ! ", "! ");
  s = r_ex_end.apply(s);
  s = replace_all(s, " , ", ", ");
  s = replace_all(s, " : ", ": ");
  s = replace_all(s, " ; ", "; ");
  s = replace_all(s, " / ", "/");
  s = r_dq.apply(s);
  s = r_sq.apply(s);
  s = r_paren.apply(s);
  s = r_brack.apply(s);
  s = replace_all(s, "$ ", "$");
  s = replace_all(s, "\xC2\xA3 ", "\xC2\xA3");  // "£ " → "£"
  return s;
}

std::string lambada_detokenize(const std::string& text) {
  std::string s = replace_all(text, "\xE2\x80\x9C", "\"");  // “
  s = replace_all(s, "\xE2\x80\x9D", "\"");                 // ”
  return "\n" + py_strip(s);
}

std::string detokenize(const std::string& dataset, const std::string& text) {
  if (dataset == "wikitext") return wikitext_detokenize(text);
  if (dataset == "ptb") return ptb_detokenize(text);
  if (dataset == "lm1b") return lm1b_detokenize(text);
  if (dataset == "lambada") return lambada_detokenize(text);
  throw ConfigError("no detokenizer for dataset '" + dataset + "'", "choose one of: wikitext, ptb, lm1b, lambada");
}

}  // namespace aobench
