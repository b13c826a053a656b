// Implements: tests of the conditional counts of finding 5 (metrics/conditionals.h): brute-force
// enumeration of (target, context set) and (target, context sequence) pairs for small n, the big-integer
// arithmetic, and the Markdown table.
#include <algorithm>
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "metrics/conditionals.h"

namespace aobench {
namespace {

// (target, subset of the other positions) pairs: every bitmask over n−1 others.
uint64_t brute_sets(int n) {
  uint64_t count = 0;
  for (int target = 0; target < n; ++target)
    for (uint32_t mask = 0; mask < (1u << n); ++mask)
      if (!(mask & (1u << target))) ++count;
  return count;
}

// (target, ordered sequence of distinct other positions) pairs, by depth-first enumeration.
uint64_t brute_sequences(int n) {
  uint64_t count = 0;
  std::vector<bool> used(n);
  std::function<void()> extend = [&]() {
    ++count;  // the current sequence (possibly empty) is one context
    for (int i = 0; i < n; ++i)
      if (!used[i]) {
        used[i] = true;
        extend();
        used[i] = false;
      }
  };
  for (int target = 0; target < n; ++target) {
    used.assign(n, false);
    used[target] = true;
    extend();
  }
  return count;
}

TEST(Conditionals, MatchBruteForceForSmallN) {
  for (int n = 1; n <= 8; ++n) {
    EXPECT_EQ(order_invariant_conditionals(n).str(), std::to_string(brute_sets(n))) << "n=" << n;
    EXPECT_EQ(order_dependent_conditionals(n).str(), std::to_string(brute_sequences(n))) << "n=" << n;
  }
  // Hand values: n = 3 → 3·4 = 12 sets; sequences: 3·(1 + 2 + 2) = 15.
  EXPECT_EQ(order_invariant_conditionals(3).str(), "12");
  EXPECT_EQ(order_dependent_conditionals(3).str(), "15");
}

TEST(Conditionals, BigIntegerArithmetic) {
  BigUInt b(999999999);
  b.add_small(1);
  EXPECT_EQ(b.str(), "1000000000");
  b.mul_small(1000000);
  EXPECT_EQ(b.str(), "1000000000000000");
  // 2^100 exactly.
  BigUInt p(1);
  for (int i = 0; i < 100; ++i) p.mul_small(2);
  EXPECT_EQ(p.str(), "1267650600228229401496703205376");
  EXPECT_NEAR(p.log10(), 100 * std::log10(2.0), 1e-9);
  // n = 64: 64·2^63 = 2^69.
  EXPECT_EQ(order_invariant_conditionals(64).str(), "590295810358705651712");
  // Order-dependent counts agree with n!·e asymptotically: log10 within 1e-9 of log10(n!) + log10(e).
  const double log10_fact = std::lgamma(1025.0) / std::log(10.0);
  EXPECT_NEAR(order_dependent_conditionals(1024).log10(), log10_fact + std::log10(std::exp(1.0)), 1e-6);
  EXPECT_EQ(order_invariant_conditionals(1024).digits(), 311u);  // 1024·2^1023 = 2^1033 ≈ 1.4e310
}

TEST(Conditionals, MarkdownTable) {
  const std::string md = conditionals_table_markdown();
  EXPECT_NE(md.find("| n |"), std::string::npos);
  EXPECT_NE(md.find("| 3 | 12 | 15 |"), std::string::npos);
  EXPECT_NE(md.find("| 1024 |"), std::string::npos);
  EXPECT_NE(md.find("10^"), std::string::npos);  // large values in scientific form
  EXPECT_EQ(std::count(md.begin(), md.end(), '\n'), 2 + 11);
}

}  // namespace
}  // namespace aobench
