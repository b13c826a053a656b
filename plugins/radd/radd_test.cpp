// Implements: tests of the RADD plugin and of the shared masked-diffusion pieces (spec-sedd-radd §2.1,
// §2.4 RADD Thm 2, §3.4 exact chain, §5.4 sampler step, §5.6 sampling precision), and the σ-conditioned
// ablation (time_cond). Every expected value is computed here independently: by enumeration of mask sets, by
// per-input network calls, by quadrature or in closed form.
#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "core/plugin_api.h"
#include "plugins/common/ddit_backbone.h"
#include "plugins/common/diffusion_common.h"

extern "C" aobench::ModelPlugin* aobench_create_plugin();

namespace aobench {
namespace {

// A tiny RADD with random (non-zero-init) weights so that p_θ is far from uniform. T = 3, V = 3.
std::unique_ptr<ModelPlugin> tiny_radd(nlohmann::json overrides = {}) {
  std::unique_ptr<ModelPlugin> p(aobench_create_plugin());
  auto cfg = aobench::plugin_default_config()["flavours"]["debug"];
  cfg.update(nlohmann::json{{"n_layer", 1}, {"n_head", 2}, {"n_embd", 8}, {"vocab_size", 3}, {"block_size", 3}});
  if (!overrides.is_null()) cfg.update(overrides);
  p->configure(cfg);
  p->build(torch::kCPU);
  torch::manual_seed(7);
  torch::NoGradGuard ng;
  for (auto& t : p->module().parameters()) t.normal_(0, 0.8);
  return p;
}

common::DDiTImpl& net_of(ModelPlugin& p) { return dynamic_cast<common::DDiTImpl&>(p.module()); }

// −log p(x_i | x with positions in `mask_set` masked), by one network call on that single input.
double brute_nll(ModelPlugin& p, const std::vector<int64_t>& x, unsigned mask_set, int64_t i) {
  const int64_t T = int64_t(x.size()), V = p.vocab_size();
  auto in = torch::tensor(x).view({1, T});
  for (int64_t j = 0; j < T; ++j)
    if (mask_set & (1u << j)) in.index_put_({0, j}, V);
  torch::NoGradGuard ng;
  auto logits = net_of(p).forward(in).to(torch::kFloat64);  // (1, T, V+1)
  auto lp = torch::log_softmax(logits[0][i].narrow(0, 0, V), 0);
  return -lp[x[i]].item<double>();
}

// Closed-form E_λ of the λ-DCE (λ ~ U(0,1), each token masked w.p. λ, weight 1/λ):
//   Σ_M ∫ λ^{|M|−1} (1−λ)^{T−|M|} dλ · Σ_{i∈M} nll_i(M) = Σ_M B(|M|, T−|M|+1) Σ_{i∈M} nll_i(M).
double lambda_dce_expectation(ModelPlugin& p, const std::vector<int64_t>& x) {
  const int64_t T = int64_t(x.size());
  double total = 0;
  for (unsigned M = 1; M < (1u << T); ++M) {
    const int m = __builtin_popcount(M);
    const double beta = std::exp(std::lgamma(m) + std::lgamma(T - m + 1) - std::lgamma(T + 1));
    for (int64_t i = 0; i < T; ++i)
      if (M & (1u << i)) total += beta * brute_nll(p, x, M, i);
  }
  return total;
}

TEST(RaddSchedule, WeightAndUnmaskIdentities) {
  // σ'(t)/(e^σ−1) = 1/t and (α_s−α_t)/(1−α_t) = Δt/t for the log-linear schedule (§2.1).
  auto t = torch::linspace(1e-4, 1.0, 997, torch::kFloat64);
  auto sigma = common::loglinear_sigma(t), dsigma = common::loglinear_dsigma(t);
  EXPECT_TRUE(torch::allclose(dsigma / torch::expm1(sigma), 1 / t, 1e-12, 0));
  auto s = t * 0.83;
  auto alpha_t = torch::exp(-sigma), alpha_s = torch::exp(-common::loglinear_sigma(s));
  EXPECT_TRUE(torch::allclose((alpha_s - alpha_t) / (1 - alpha_t), (t - s) / t, 1e-9, 0));
  EXPECT_NEAR(common::loglinear_sigma(torch::ones({1}, torch::kFloat64)).item<double>(), -std::log(1e-3), 1e-12);
}

TEST(RaddLikelihood, ExactL2RLogProbEqualsBruteForceChain) {
  auto p = tiny_radd();
  std::vector<int64_t> x = {2, 0, 1};
  auto tokens = torch::tensor(x).view({1, 3});
  at::Generator gen = at::detail::createCPUGenerator(1);
  auto out = p->log_prob(tokens, torch::arange(3).view({1, 3}), gen);
  EXPECT_FALSE(out.is_bound);
  ASSERT_EQ(out.nll.sizes(), torch::IntArrayRef({1, 3}));
  // L2R: step k masks positions k.. (including k itself).
  const unsigned masks[3] = {0b111, 0b110, 0b100};
  for (int64_t k = 0; k < 3; ++k) EXPECT_NEAR(out.nll[0][k].item<double>(), brute_nll(*p, x, masks[k], k), 1e-5);
  EXPECT_GT(out.nll.sum().item<double>(), 0.1);  // a random network is far from certain
}

TEST(RaddLikelihood, LambdaDceExpectationEqualsOrderAveragedChainNll) {
  // RADD Thm 2, deterministic part: E_λ[λ-DCE] = mean over all T! orders of the exact chain NLL.
  auto p = tiny_radd();
  std::vector<int64_t> x = {1, 2, 2};
  at::Generator gen = at::detail::createCPUGenerator(2);
  std::vector<int64_t> perm = {0, 1, 2};
  double sum = 0;
  int n = 0;
  do {
    sum += p->log_prob(torch::tensor(x).view({1, 3}), torch::tensor(perm).view({1, 3}), gen).nll.sum().item<double>();
    ++n;
  } while (std::next_permutation(perm.begin(), perm.end()));
  EXPECT_EQ(n, 6);
  EXPECT_NEAR(sum / n, lambda_dce_expectation(*p, x), 1e-5);
}

// MC ELBO of many independent draws vs the closed form, within 4.5 standard errors.
// keep (3) bool, when defined: positions never masked (the conditional ELBO).
void check_elbo_unbiased(ModelPlugin& p, const std::vector<int64_t>& x, double expected,
                         const torch::Tensor& keep = torch::Tensor()) {
  const int64_t rows = 4000, steps = 5;
  auto tokens = torch::tensor(x).view({1, 3}).repeat({rows, 1});
  at::Generator gen = at::detail::createCPUGenerator(3);
  std::vector<double> draws;
  for (int64_t s = 0; s < steps; ++s) {
    auto out = p.elbo(tokens, 1, gen, keep.defined() ? keep.view({1, 3}).repeat({rows, 1}) : keep);
    EXPECT_TRUE(out.is_bound);
    auto per_seq = out.nll.sum(1);
    for (int64_t r = 0; r < rows; ++r) draws.push_back(per_seq[r].item<double>());
  }
  double mean = 0, var = 0;
  for (double d : draws) mean += d;
  mean /= draws.size();
  for (double d : draws) var += (d - mean) * (d - mean);
  const double se = std::sqrt(var / (draws.size() - 1) / draws.size());
  EXPECT_NEAR(mean, expected, 4.5 * se) << "se " << se;
  EXPECT_LT(se, 0.05 * expected);  // the test has power
}

TEST(RaddLikelihood, ConditionalLambdaDceIsUnbiasedForTheOrdersThatSeeTheKeptTokenFirst) {
  // Infilling: position 0 kept, 1 and 2 hidden. E_λ[λ-DCE over the hidden ones] = the mean over their 2!
  // orders of the exact chain NLL of x_1, x_2 given x_0 (Thm 2 with the kept token always unmasked).
  auto p = tiny_radd();
  std::vector<int64_t> x = {2, 1, 0};
  at::Generator gen = at::detail::createCPUGenerator(4);
  double sum = 0;
  for (const auto& order : {std::vector<int64_t>{0, 1, 2}, std::vector<int64_t>{0, 2, 1}}) {
    auto nll = p->log_prob(torch::tensor(x).view({1, 3}), torch::tensor(order).view({1, 3}), gen).nll;
    sum += nll[0][1].item<double>() + nll[0][2].item<double>();
  }
  check_elbo_unbiased(*p, x, sum / 2, torch::tensor({true, false, false}));
}

TEST(RaddLikelihood, LambdaDceElboIsUnbiased) {
  // λ-DCE has no ε, so its expectation is exactly the closed form (Thm 2); rows are i.i.d. draws.
  auto p = tiny_radd();
  std::vector<int64_t> x = {0, 2, 1};
  check_elbo_unbiased(*p, x, lambda_dce_expectation(*p, x));
}

TEST(RaddLikelihood, StratifiedTDceElboIsUnbiased) {
  // t-DCE: t = (1−ε)u + ε, mask w.p. (1−ε)t, weight 1/t. Its expectation, by the same enumeration over
  // mask sets, is Σ_M Σ_{i∈M} nll_i(M)·∫ (1/t)·q^{|M|}(1−q)^{T−|M|} du with q = (1−ε)t, done here by
  // midpoint quadrature (4000 nodes; the integrand is smooth, error ≪ the MC standard error).
  auto p = tiny_radd({{"loss", "t_dce"}, {"t_sampling", "stratified"}});
  std::vector<int64_t> x = {2, 1, 0};
  const double eps = 1e-3;
  double expected = 0;
  for (unsigned M = 1; M < 8; ++M) {
    const int m = __builtin_popcount(M);
    double w = 0;
    for (int k = 0; k < 4000; ++k) {
      const double u = (k + 0.5) / 4000, t = (1 - eps) * u + eps, q = (1 - eps) * t;
      w += std::pow(q, m) * std::pow(1 - q, 3 - m) / t / 4000;
    }
    for (int64_t i = 0; i < 3; ++i)
      if (M & (1u << i)) expected += w * brute_nll(*p, x, M, i);
  }
  check_elbo_unbiased(*p, x, expected);
}

// σ of the log-linear schedule at masking probability `rate`, written out: −log(1 − rate), capped at the
// schedule's end σ(1) = −log ε (rate 1 − ε).
double rate_sigma(double rate) { return rate < 1 - 1e-3 ? -std::log1p(-rate) : -std::log(1e-3); }

// Logits (N, T, V+1) in float64 of a time-conditioned network for inputs (N, T) at σ (N).
torch::Tensor run_sigma(ModelPlugin& p, const torch::Tensor& inputs, const std::vector<double>& sigma) {
  torch::NoGradGuard ng;
  return net_of(p).forward(inputs, torch::tensor(sigma, torch::kFloat64).to(torch::kFloat32)).to(torch::kFloat64);
}

TEST(RaddTimeCond, SigmaAtMaskRateIsTheScheduleTime) {
  // σ masks a token w.p. `rate` (1 − e^{−σ} = rate), and it is the schedule's σ(t) at the time t whose
  // masking probability (1−ε)t equals the rate; rate 1 (all masked) gets the schedule's end σ(1).
  auto rate = torch::linspace(0, 0.998, 101, torch::kFloat64);
  auto sigma = common::sigma_at_mask_rate(rate);
  EXPECT_TRUE(torch::allclose(-torch::expm1(-sigma), rate, 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(sigma, common::loglinear_sigma(rate / (1 - 1e-3)), 1e-12, 1e-12));
  auto ends = common::sigma_at_mask_rate(torch::tensor({1.0, 1 - 1e-4}, torch::kFloat64));
  EXPECT_NEAR(ends[0].item<double>(), -std::log(1e-3), 1e-12);
  EXPECT_NEAR(ends[1].item<double>(), -std::log(1e-3), 1e-12);
}

TEST(RaddTimeCond, ExactChainConditionsOnTheMaskedFraction) {
  // time_cond: step k of the L2R chain (3 − k of 3 tokens masked) runs the network at σ = −log(1 − (3−k)/3),
  // all masked at σ(1); the σ input must matter.
  auto p = tiny_radd({{"time_cond", true}});
  std::vector<int64_t> x = {2, 0, 1};
  at::Generator gen = at::detail::createCPUGenerator(1);
  auto out = p->log_prob(torch::tensor(x).view({1, 3}), torch::arange(3).view({1, 3}), gen);
  EXPECT_FALSE(out.is_bound);
  for (int64_t k = 0; k < 3; ++k) {
    auto in = torch::tensor(x).view({1, 3});
    for (int64_t j = k; j < 3; ++j) in.index_put_({0, j}, 3);
    auto logits = run_sigma(*p, in, {rate_sigma(double(3 - k) / 3)});
    const double expected = -torch::log_softmax(logits[0][k].narrow(0, 0, 3), 0)[x[k]].item<double>();
    // Relative: the random adaLN weights make logits of O(10³), and the plugin's log-softmax is float32.
    EXPECT_NEAR(out.nll[0][k].item<double>(), expected, 1e-5 * std::max(1.0, std::abs(expected))) << "step " << k;
  }
  auto in = torch::full({1, 3}, 3, torch::kLong);
  EXPECT_GT((run_sigma(*p, in, {0.3}) - run_sigma(*p, in, {3.0})).abs().max().item<double>(), 1e-3);
}

TEST(RaddTimeCond, LambdaDceElboIsUnbiased) {
  // λ-DCE with the network at σ(λ) = −log(1 − λ): its expectation is
  //   Σ_M Σ_{i∈M} ∫ λ^{|M|−1}(1−λ)^{T−|M|} nll_i(M, σ(λ)) dλ,
  // here by enumeration of mask sets M and midpoint quadrature over λ (4000 nodes; σ(λ) is capped at σ(1),
  // so the integrand is bounded and the quadrature error ≪ the MC standard error).
  auto p = tiny_radd({{"time_cond", true}});
  const std::vector<int64_t> x = {0, 2, 1};
  const int64_t K = 4000, T = 3, V = 3;
  std::vector<torch::Tensor> ins;
  std::vector<double> sig, weight;
  std::vector<unsigned> msets;
  for (int64_t k = 0; k < K; ++k) {
    const double lambda = (k + 0.5) / K;
    for (unsigned M = 1; M < 8; ++M) {
      auto in = torch::tensor(x);
      for (int64_t j = 0; j < T; ++j)
        if (M & (1u << j)) in.index_put_({j}, V);
      ins.push_back(in);
      const int m = __builtin_popcount(M);
      sig.push_back(rate_sigma(lambda));
      weight.push_back(std::pow(lambda, m - 1) * std::pow(1 - lambda, T - m) / K);
      msets.push_back(M);
    }
  }
  auto lp = torch::log_softmax(run_sigma(*p, torch::stack(ins), sig).narrow(-1, 0, V), -1);  // (N, T, V)
  auto la = lp.accessor<double, 3>();
  double expected = 0;
  for (size_t n = 0; n < ins.size(); ++n)
    for (int64_t i = 0; i < T; ++i)
      if (msets[n] & (1u << i)) expected -= weight[n] * la[n][i][x[i]];
  check_elbo_unbiased(*p, x, expected);
}

TEST(RaddTimeCond, SamplerCallsTheNetworkEveryStep) {
  // A σ-conditioned network cannot be cached across steps: one call per step until no mask is left. With
  // 64 steps and 2 × 8 positions the cache would allow at most 1 + 16 calls (one per unmasking event);
  // the last mask goes at the smallest of 16 uniform unmask times, so about 60 steps run.
  auto p = tiny_radd({{"block_size", 8}, {"time_cond", true}});
  SampleRequest req;
  req.batch_size = 2;
  req.length = 8;
  req.steps = 64;
  auto out = p->sample(req);
  EXPECT_TRUE(out.tokens.ge(0).all().item<bool>());
  EXPECT_TRUE(out.tokens.lt(3).all().item<bool>());
  EXPECT_GT(out.network_calls, 1 + 2 * 8);
  EXPECT_LE(out.network_calls, 64);
  EXPECT_TRUE(torch::equal(p->sample(req).tokens, out.tokens));
}

TEST(RaddLoss, InitialLossIsLogV) {
  // Zero-init head: p_θ is uniform over the V real tokens, so every masked token costs log V and the
  // λ-DCE per token is (1/λ)·(#masked)·log V / T, whose expectation is log V.
  std::unique_ptr<ModelPlugin> p(aobench_create_plugin());
  p->configure(aobench::plugin_default_config()["flavours"]["debug"]);
  p->build(torch::kCPU);
  at::Generator gen = at::detail::createCPUGenerator(4);
  TrainBatch batch;
  batch.tokens = torch::randint(0, 257, {64, 128});
  double mean = 0;
  for (int i = 0; i < 4; ++i) mean += p->loss(batch, gen).loss.item<double>() / 4;
  EXPECT_NEAR(mean, std::log(257.0), 0.05 * std::log(257.0));
}

TEST(RaddSample, CachingPromptsAndRange) {
  auto p = tiny_radd({{"block_size", 8}});
  SampleRequest req;
  req.batch_size = 3;
  req.length = 8;
  req.steps = 64;  // ≫ L: most steps change nothing, so most calls are skipped
  req.prompt = torch::full({3, 8}, -1, torch::kLong);
  req.prompt.index_put_({torch::indexing::Slice(), 0}, 2);
  req.prompt.index_put_({1, 7}, 1);
  auto out = p->sample(req);
  ASSERT_EQ(out.tokens.sizes(), torch::IntArrayRef({3, 8}));
  EXPECT_TRUE(out.tokens.ge(0).all().item<bool>());
  EXPECT_TRUE(out.tokens.lt(3).all().item<bool>());
  EXPECT_TRUE(out.tokens.select(1, 0).eq(2).all().item<bool>());
  EXPECT_EQ(out.tokens[1][7].item<int64_t>(), 1);
  EXPECT_GE(out.network_calls, 1);
  EXPECT_LE(out.network_calls, 1 + 3 * 7);  // the first call, then at most one per unmasking event
  // Same seed, same samples; fewer steps than positions still fills everything (last step rate 1).
  EXPECT_TRUE(torch::equal(p->sample(req).tokens, out.tokens));
  req.steps = 2;
  req.float64_sampling = false;
  EXPECT_TRUE(p->sample(req).tokens.lt(3).all().item<bool>());
}

}  // namespace
}  // namespace aobench
