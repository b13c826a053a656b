// Implements: finding 5 of the AO-GPT paper (Xue et al.; why AO-AR is harder than MDM): how many distinct
// univariate conditionals p(x_i | x_C) a model must represent over n positions. Order-invariant (MDM, context
// is a SET): n·2^(n−1). Order-dependent (any-order AR, context is a SEQUENCE): n·Σ_{j<n} (n−1)!/(n−1−j)! =
// n!·Σ_{i=0}^{n−1} 1/i!. Exact big integers (base 10^9 limbs) plus log10 for large n.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace aobench {

// Unsigned big integer, base 10^9 limbs, little endian. Just what the counts need.
class BigUInt {
 public:
  explicit BigUInt(uint64_t v = 0);
  BigUInt& mul_small(uint32_t m);  // *= m (m < 10^9)
  BigUInt& add_small(uint32_t a);  // += a (a < 10^9)
  std::string str() const;         // decimal digits
  double log10() const;            // −inf for 0
  size_t digits() const { return str().size(); }
  bool operator==(const BigUInt& o) const { return limbs_ == o.limbs_; }

 private:
  std::vector<uint32_t> limbs_;
};

// n·2^(n−1): (target, context subset of the other n−1 positions) pairs. n ≥ 1.
BigUInt order_invariant_conditionals(int64_t n);
// n!·Σ_{i=0}^{n−1} 1/i!: (target, ordered context sequence of distinct other positions) pairs. n ≥ 1.
BigUInt order_dependent_conditionals(int64_t n);

// Markdown table for `ns` (default {1..8, 16, 64, 1024}): exact values up to 30 digits, else 10^x,
// plus log10 of both and of their ratio.
std::string conditionals_table_markdown(const std::vector<int64_t>& ns = {1, 2, 3, 4, 5, 6, 7, 8, 16, 64, 1024});

}  // namespace aobench
