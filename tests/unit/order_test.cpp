// Implements: tests of the harness's order distributions, OrderSpec (core/order.h; spec-ao-gpt §2.1,
// §2.6): valid permutations for every kind, the mixture's identity fraction, uniform first-position
// marginal of random orders, fixed/blockwise structure, seeded reproducibility and config errors.
#include <cmath>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/order.h"

namespace aobench {
namespace {

OrderSpec spec(const std::string& json) { return OrderSpec::from_json(nlohmann::json::parse(json)); }

at::Generator gen(uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

bool is_permutation_rows(const torch::Tensor& o) {
  auto sorted = std::get<0>(o.sort(1));
  return sorted.equal(torch::arange(o.size(1), torch::kLong).unsqueeze(0).expand_as(o));
}

TEST(OrderSpec, EveryKindGivesPermutations) {
  for (const char* j : {R"({"kind": "l2r"})", R"({"kind": "random"})", R"({"kind": "fixed_random", "seed": 3})",
                        R"({"kind": "blockwise", "block": 4, "seed": 5})", R"({"kind": "mixture", "p_l2r": 0.3})"}) {
    auto g = gen(1);
    auto o = spec(j).draw(64, 16, g);
    ASSERT_EQ(o.sizes(), (std::vector<int64_t>{64, 16})) << j;
    EXPECT_EQ(o.scalar_type(), torch::kLong) << j;
    EXPECT_TRUE(is_permutation_rows(o)) << j;
  }
}

TEST(OrderSpec, L2RIsIdentity) {
  auto g = gen(0);
  auto o = spec(R"("l2r")").draw(3, 10, g);
  EXPECT_TRUE(o.equal(torch::arange(10, torch::kLong).unsqueeze(0).expand({3, 10})));
}

TEST(OrderSpec, MixtureIdentityFractionMatchesP) {
  const int64_t B = 20000, T = 8;
  for (double p : {0.0, 0.1, 0.5, 1.0}) {
    OrderSpec s;
    s.kind = OrderSpec::Kind::kMixture;
    s.p_l2r = p;
    auto g = gen(42);
    auto o = s.draw(B, T, g);
    auto ident = o.eq(torch::arange(T, torch::kLong).unsqueeze(0)).all(1);
    const double count = ident.sum().item<double>();
    // A random row is the identity with probability 1/T! as well.
    const double q = p + (1.0 - p) / 40320.0;
    const double sd = std::sqrt(B * q * (1.0 - q));
    EXPECT_NEAR(count, B * q, 5.0 * sd + 1.0) << "p_l2r=" << p;
  }
}

TEST(OrderSpec, RandomFirstPositionIsUniform) {
  const int64_t B = 40000, T = 10;
  auto g = gen(7);
  auto o = spec(R"({"kind": "random"})").draw(B, T, g);
  for (int64_t col : {int64_t{0}, T - 1}) {
    auto counts = torch::bincount(o.select(1, col), {}, T).to(torch::kFloat64);
    const double e = static_cast<double>(B) / T;
    const double chi2 = ((counts - e).pow(2) / e).sum().item<double>();
    EXPECT_LT(chi2, 33.7) << "chi-square with 9 dof above its 0.9999 quantile (column " << col << ")";
  }
  // Different rows differ: not a single permutation repeated.
  EXPECT_FALSE(o[0].equal(o[1]) && o[1].equal(o[2]));
}

TEST(OrderSpec, FixedRandomIdenticalAcrossRowsAndDraws) {
  auto s = spec(R"({"kind": "fixed_random", "seed": 11})");
  auto g1 = gen(1), g2 = gen(999);
  auto a = s.draw(5, 32, g1), b = s.draw(3, 32, g2), c = s.draw(2, 32, g1);
  for (int64_t i = 1; i < 5; ++i) EXPECT_TRUE(a[i].equal(a[0]));
  EXPECT_TRUE(b[0].equal(a[0]));
  EXPECT_TRUE(c[0].equal(a[0]));
  EXPECT_FALSE(a[0].equal(torch::arange(32, torch::kLong)));  // not the identity
  auto other = spec(R"({"kind": "fixed_random", "seed": 12})").draw(1, 32, g1);
  EXPECT_FALSE(other[0].equal(a[0]));
}

TEST(OrderSpec, BlockwiseStructure) {
  const int64_t T = 24, b = 4;
  auto g = gen(0);
  auto o = spec(R"({"kind": "blockwise", "block": 4, "seed": 9})").draw(2, T, g);
  EXPECT_TRUE(o[0].equal(o[1]));
  auto inner = o[0].narrow(0, 0, b);
  for (int64_t blk = 0; blk < T / b; ++blk) {
    auto part = o[0].narrow(0, blk * b, b);
    // Block blk generates exactly positions [blk·b, (blk+1)·b), with the same inner pattern every block.
    EXPECT_TRUE(std::get<0>(part.sort()).equal(torch::arange(blk * b, (blk + 1) * b, torch::kLong)));
    EXPECT_TRUE((part - blk * b).equal(inner));
  }
  EXPECT_THROW(spec(R"({"kind": "blockwise", "block": 5})").draw(1, T, g), ConfigError);
  // block 1 degenerates to left-to-right.
  EXPECT_TRUE(spec(R"({"kind": "blockwise", "block": 1})").draw(1, 8, g)[0].equal(torch::arange(8, torch::kLong)));
}

TEST(OrderSpec, SameSeedSameDraws) {
  for (const char* j : {R"({"kind": "random"})", R"({"kind": "mixture", "p_l2r": 0.5})"}) {
    auto s = spec(j);
    auto g1 = gen(123), g2 = gen(123), g3 = gen(124);
    auto a = s.draw(16, 20, g1), b = s.draw(16, 20, g2), c = s.draw(16, 20, g3);
    EXPECT_TRUE(a.equal(b)) << j;
    EXPECT_FALSE(a.equal(c)) << j;
    EXPECT_FALSE(s.draw(16, 20, g1).equal(a)) << j << ": the generator advances between draws";
  }
}

TEST(OrderSpec, JsonRoundTripAndErrors) {
  auto s = spec(R"({"kind": "blockwise", "block": 8, "seed": 3})");
  auto back = OrderSpec::from_json(s.to_json());
  EXPECT_EQ(back.kind, OrderSpec::Kind::kBlockwise);
  EXPECT_EQ(back.block, 8);
  EXPECT_EQ(back.seed, 3u);
  EXPECT_EQ(spec(R"({"kind": "mixture", "p_l2r": 0.1})").describe(), "mixture(p_l2r=0.1)");
  EXPECT_THROW(spec(R"({"kind": "zigzag"})"), ConfigError);
  EXPECT_THROW(spec(R"({"kind": "mixture", "p_l2r": 1.5})"), ConfigError);
  EXPECT_THROW(spec(R"({"kind": "blockwise", "block": 0})"), ConfigError);
  EXPECT_THROW(spec(R"({"kind": "random", "p_l2": 0.2})"), ConfigError);    // misspelt key
  EXPECT_THROW(spec(R"({"kind": "random", "seed": "one"})"), ConfigError);  // wrong type
  EXPECT_THROW(spec(R"(42)"), ConfigError);
}

}  // namespace
}  // namespace aobench
