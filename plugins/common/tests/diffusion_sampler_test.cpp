// Implements: tests of the masked-diffusion draws of plugins/common (diffusion_common.h, sampling.h): one
// Lemma-1 step's marginals against q on both precision paths (χ²), the float64 inverse CDF against the legacy
// float32 Gumbel on a peaked distribution, and the HF top-p rule (crossing token kept, mask never drawn).
#include <cmath>

#include <gtest/gtest.h>

#include "plugins/common/diffusion_common.h"
#include "plugins/common/sampling.h"

namespace aobench {
namespace {

TEST(DiffusionSampler, OneStepMarginalsMatchQ) {
  // One step t → s from all-mask with a fixed p: q(stay) = 1 − Δt/t, q(y) = (Δt/t)·p_y. Pearson χ²
  // over 5 cells (df = 4): critical value 18.47 at α = 1e-3. Checked for both precision paths.
  const int64_t N = 200000, V = 4;
  const double t = 0.5, s = 0.4, rate = (t - s) / t;
  auto probs = torch::tensor({0.1, 0.2, 0.3, 0.4}, torch::kFloat64);
  auto logits = torch::cat({probs.log(), torch::zeros({1}, torch::kFloat64)})
                    .to(torch::kFloat32)
                    .view({1, 1, V + 1})
                    .expand({1, N, V + 1});
  for (bool f64 : {true, false}) {
    auto gen = common::make_generator(torch::kCPU, 11);
    common::DrawOptions opt;
    opt.rule = common::DrawRule::kInverseCdf;
    opt.float64 = f64;
    auto x = torch::full({1, N}, V, torch::kLong);
    auto [y, changed] = common::unmask_step(x, logits, rate, opt, gen);
    EXPECT_TRUE(changed[0].item<bool>());
    auto counts = torch::bincount(y.view(-1), {}, V + 1).to(torch::kFloat64);  // tokens 0..3, mask = 4
    auto expected = torch::cat({rate * probs, torch::full({1}, 1 - rate, torch::kFloat64)}) * N;
    const double chi2 = ((counts - expected).pow(2) / expected).sum().item<double>();
    EXPECT_LT(chi2, 18.47) << (f64 ? "float64" : "legacy float32") << " counts " << counts;
  }
}

TEST(DiffusionSampler, Float64AndLegacyFloat32DifferOnPeakedDistribution) {
  // Legacy float32 Gumbel: E = 1e-10 − log(U + 1e-10) lies in [5.96e-8, 23.03], so an outcome with
  // p = 1e-9 would need p/E_small > 1/E_big, i.e. a ratio 1e-9/5.96e-8 = 0.017 > 1/23.03 = 0.043 — never.
  const int64_t N = 1000000;
  auto peaked = [](double tiny, int64_t n) {
    return torch::tensor({std::log1p(-tiny), std::log(tiny)}, torch::kFloat64).view({1, 2}).expand({n, 2});
  };
  common::DrawOptions legacy;
  legacy.rule = common::DrawRule::kInverseCdf;
  legacy.float64 = false;
  auto gen = common::make_generator(torch::kCPU, 5);
  EXPECT_EQ(common::draw_tokens(peaked(1e-9, N), legacy, gen).sum().item<int64_t>(), 0);
  // float64 inverse CDF: p = 5e-6 over 4e6 draws, expected 20, binomial sd 4.47: accept 20 ± 4.5 sd.
  common::DrawOptions f64;
  f64.rule = common::DrawRule::kInverseCdf;
  const int64_t M = 4000000;
  const int64_t hits = common::draw_tokens(peaked(5e-6, M), f64, gen).sum().item<int64_t>();
  EXPECT_GE(hits, 0 + 1);
  EXPECT_NEAR(double(hits), 20.0, 4.5 * std::sqrt(20.0));
}

TEST(DiffusionSampler, TopPKeepsCrossingTokenAndNeverTheMask) {
  auto logits = torch::tensor({0.5, 0.3, 0.15, 0.05}, torch::kFloat64).log().view({1, 4});
  common::DrawOptions opt;
  opt.rule = common::DrawRule::kInverseCdf;
  opt.top_p = 0.7;  // 0.5 < 0.7, 0.5 + 0.3 crosses → keep {0, 1}
  auto p = common::filtered_probs(logits, opt);
  EXPECT_NEAR(p[0][0].item<double>(), 0.5 / 0.8, 1e-12);
  EXPECT_NEAR(p[0][1].item<double>(), 0.3 / 0.8, 1e-12);
  EXPECT_EQ(p[0][2].item<double>(), 0.0);
  EXPECT_EQ(p[0][3].item<double>(), 0.0);
}

}  // namespace
}  // namespace aobench
