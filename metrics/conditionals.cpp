// Implements: conditional counts of finding 5 (see conditionals.h).
#include "metrics/conditionals.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "core/errors.h"

namespace aobench {

static constexpr uint32_t kBase = 1000000000u;

BigUInt::BigUInt(uint64_t v) {
  do {
    limbs_.push_back(static_cast<uint32_t>(v % kBase));
    v /= kBase;
  } while (v);
}

BigUInt& BigUInt::mul_small(uint32_t m) {
  uint64_t carry = 0;
  for (auto& l : limbs_) {
    const uint64_t cur = static_cast<uint64_t>(l) * m + carry;
    l = static_cast<uint32_t>(cur % kBase);
    carry = cur / kBase;
  }
  while (carry) {
    limbs_.push_back(static_cast<uint32_t>(carry % kBase));
    carry /= kBase;
  }
  while (limbs_.size() > 1 && limbs_.back() == 0) limbs_.pop_back();
  return *this;
}

BigUInt& BigUInt::add_small(uint32_t a) {
  uint64_t carry = a;
  for (size_t i = 0; carry && i < limbs_.size(); ++i) {
    const uint64_t cur = limbs_[i] + carry;
    limbs_[i] = static_cast<uint32_t>(cur % kBase);
    carry = cur / kBase;
  }
  if (carry) limbs_.push_back(static_cast<uint32_t>(carry));
  return *this;
}

std::string BigUInt::str() const {
  std::string s = std::to_string(limbs_.back());
  char buf[16];
  for (size_t i = limbs_.size() - 1; i-- > 0;) {
    std::snprintf(buf, sizeof(buf), "%09u", limbs_[i]);
    s += buf;
  }
  return s;
}

double BigUInt::log10() const {
  // The top two limbs carry ≥ 10 significant digits, plenty for a double's log10.
  const size_t n = limbs_.size();
  double top = limbs_[n - 1];
  int64_t exp9 = static_cast<int64_t>(n) - 1;
  if (n >= 2) {
    top = top * kBase + limbs_[n - 2];
    exp9 -= 1;
  }
  if (top == 0) return -std::numeric_limits<double>::infinity();
  return std::log10(top) + 9.0 * static_cast<double>(exp9);
}

static void check_n(int64_t n) {
  if (n < 1 || n >= kBase) throw ConfigError("conditional counts need 1 <= n < 10^9, got " + std::to_string(n));
}

BigUInt order_invariant_conditionals(int64_t n) {
  check_n(n);
  BigUInt r(static_cast<uint64_t>(n));
  for (int64_t i = 0; i < n - 1; ++i) r.mul_small(2);
  return r;
}

BigUInt order_dependent_conditionals(int64_t n) {
  check_n(n);
  // A(m) = Σ_{j=0}^{m} m!/(m−j)! counts ordered selections from m items: A(0) = 1, A(m) = m·A(m−1) + 1.
  BigUInt a(1);
  for (int64_t m = 1; m <= n - 1; ++m) a.mul_small(static_cast<uint32_t>(m)).add_small(1);
  return a.mul_small(static_cast<uint32_t>(n));  // n targets × A(n−1) context sequences
}

std::string conditionals_table_markdown(const std::vector<int64_t>& ns) {
  auto show = [](const BigUInt& b) {
    const std::string s = b.str();
    if (s.size() <= 30) return s;
    char buf[64];
    std::snprintf(buf, sizeof(buf), "≈ 10^%.2f", b.log10());
    return std::string(buf);
  };
  std::ostringstream out;
  out << "| n | order-invariant n·2^(n−1) | order-dependent n!·Σ_{i<n} 1/i! | log10 invariant | log10 "
         "dependent | "
         "log10 ratio |\n|---:|---:|---:|---:|---:|---:|\n";
  char buf[128];
  for (int64_t n : ns) {
    const auto inv = order_invariant_conditionals(n), dep = order_dependent_conditionals(n);
    std::snprintf(buf, sizeof(buf), "| %.3f | %.3f | %.3f |", inv.log10(), dep.log10(), dep.log10() - inv.log10());
    out << "| " << n << " | " << show(inv) << " | " << show(dep) << " " << buf << "\n";
  }
  return out.str();
}

}  // namespace aobench
