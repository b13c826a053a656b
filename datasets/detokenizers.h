// Implements: the per-row detokenizers of spec-sedd-radd.md §4.2 (SEDD/RADD evaluation pipeline):
// WikiText, PTB, LM1B and LAMBADA. Rules are applied in the listed order with Python `re` semantics
// (PCRE2 with UTF + UCP for the regex rules); everything else is plain substring replacement.
#pragma once
#include <string>

namespace aobench {

std::string wikitext_detokenize(const std::string& text);
std::string ptb_detokenize(const std::string& text);
std::string lm1b_detokenize(const std::string& text);
std::string lambada_detokenize(const std::string& text);

// Dispatch by dataset name ("wikitext" | "ptb" | "lm1b" | "lambada"); other names → ConfigError.
std::string detokenize(const std::string& dataset, const std::string& text);

// Python str.replace: every non-overlapping occurrence, left to right.
std::string replace_all(const std::string& text, const std::string& from, const std::string& to);

}  // namespace aobench
