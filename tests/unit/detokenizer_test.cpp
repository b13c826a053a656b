// Implements: tests of the spec-sedd-radd.md §4.2 detokenizers against Python `re` goldens
// (tests/data/make_detok_golden.py): real rows of each dataset and hand-made edge cases, byte for byte.
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "datasets/detokenizers.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

nlohmann::json load(const std::string& name) {
  std::ifstream f(std::string(AOBENCH_TEST_DATA) + "/detok/" + name);
  EXPECT_TRUE(f) << "missing tests/data/detok/" << name;
  return nlohmann::json::parse(f);
}

void check_cases(const std::string& dataset, const nlohmann::json& cases, size_t min_cases) {
  ASSERT_GE(cases.size(), min_cases) << dataset;
  size_t changed = 0;
  for (const auto& c : cases) {
    const std::string in = c["in"].get<std::string>(), want = c["out"].get<std::string>();
    const std::string got = detokenize(dataset, in);
    EXPECT_EQ(got, want) << dataset << " input: [" << in << "]";
    changed += (want != in);
  }
  EXPECT_GT(changed, 0u) << dataset << ": golden never changes the text";
}

TEST(Detokenizer, HandMadeCases) {
  auto hand = load("hand.json");
  for (const char* ds : {"wikitext", "ptb", "lm1b", "lambada"}) check_cases(ds, hand[ds], 5);
}

TEST(Detokenizer, WikitextRealRows) { check_cases("wikitext", load("wikitext_real.json"), 100); }
TEST(Detokenizer, PtbRealRows) { check_cases("ptb", load("ptb_real.json"), 100); }
TEST(Detokenizer, Lm1bRealRows) { check_cases("lm1b", load("lm1b_real.json"), 100); }
TEST(Detokenizer, LambadaRealRows) { check_cases("lambada", load("lambada_real.json"), 50); }

TEST(Detokenizer, SpotChecksAndErrors) {
  EXPECT_EQ(wikitext_detokenize(" = = Career = = \n"), " == Career ==\n");
  EXPECT_EQ(wikitext_detokenize("1 @,@ 000 ( a )"), "1,000 (a)");
  EXPECT_EQ(ptb_detokenize("it does n't cost $ N N"), "it doesn't cost $1 N");
  EXPECT_EQ(lm1b_detokenize("It 's done ."), "It's done.");
  EXPECT_EQ(lambada_detokenize("  \xE2\x80\x9Chi\xE2\x80\x9D  "), "\n\"hi\"");
  EXPECT_EQ(replace_all("aaa", "aa", "b"), "ba");
  EXPECT_THROW(detokenize("owt", "x"), ConfigError);
  // Invalid UTF-8 must not crash the regex rules.
  EXPECT_NO_THROW(wikitext_detokenize("( \xff\xfe )"));
  EXPECT_NO_THROW(lm1b_detokenize(" '\xc3 x ."));
}

}  // namespace
}  // namespace aobench
