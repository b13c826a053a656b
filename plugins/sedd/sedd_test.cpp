// Implements: tests of the SEDD plugin (spec-sedd-radd §1.2 score output, §2.3 DWDSE, §3.4 exact chain,
// §5 sampler). The DWDSE oracle below is written independently of the plugin (double precision, one
// network call per input) and its expectation over t is computed by quadrature and mask-set enumeration.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include <ATen/autocast_mode.h>

#include "core/plugin_api.h"
#include "plugins/common/ddit_backbone.h"
#include "plugins/common/diffusion_common.h"

extern "C" aobench::ModelPlugin* aobench_create_plugin();

namespace aobench {
namespace {

std::unique_ptr<ModelPlugin> make_sedd(nlohmann::json overrides, bool randomise) {
  std::unique_ptr<ModelPlugin> p(aobench_create_plugin());
  auto cfg = aobench::plugin_default_config()["flavours"]["debug"];
  if (!overrides.is_null()) cfg.update(overrides);
  p->configure(cfg);
  p->build(torch::kCPU);
  if (randomise) {
    torch::manual_seed(17);
    torch::NoGradGuard ng;
    for (auto& t : p->module().parameters()) t.normal_(0, 0.5);
  }
  return p;
}

// T = 3, V = 3 SEDD with random weights (scores far from the zero-init uniform ones).
std::unique_ptr<ModelPlugin> tiny_sedd() {
  return make_sedd(
      {{"n_layer", 1}, {"n_head", 2}, {"n_embd", 8}, {"vocab_size", 3}, {"block_size", 3}, {"cond_dim", 8}}, true);
}

common::DDiTImpl& net_of(ModelPlugin& p) { return dynamic_cast<common::DDiTImpl&>(p.module()); }

// Inputs: x with mask set M applied, one row per (M, σ). Returns logits (N, T, V+1) in float64.
torch::Tensor run(ModelPlugin& p, const torch::Tensor& inputs, const torch::Tensor& sigma) {
  torch::NoGradGuard ng;
  return net_of(p).forward(inputs, sigma.to(torch::kFloat32)).to(torch::kFloat64);
}

TEST(SeddLikelihood, ExactL2RLogProbEqualsBruteForceChain) {
  // Step k of L2R masks positions k.. and conditions on the σ at which the log-linear schedule masks a
  // token with probability f = (#masked)/T: 1 − e^{−σ} = f, σ = −log(1 − f); all masked (f = 1): the
  // schedule's end σ(1) = −log ε. p is the score normalised over the V real tokens.
  auto p = tiny_sedd();
  std::vector<int64_t> x = {1, 0, 2};
  at::Generator gen = at::detail::createCPUGenerator(1);
  auto out = p->log_prob(torch::tensor(x).view({1, 3}), torch::arange(3).view({1, 3}), gen);
  EXPECT_FALSE(out.is_bound);
  for (int64_t k = 0; k < 3; ++k) {
    auto in = torch::tensor(x).view({1, 3});
    for (int64_t j = k; j < 3; ++j) in.index_put_({0, j}, 3);
    const double f = double(3 - k) / 3;
    auto sigma = torch::full({1}, f < 1 ? -std::log(1 - f) : -std::log(1e-3), torch::kFloat64);
    auto logits = run(*p, in, sigma);
    // Scores: log s_y = z_y − log(e^σ−1) − log V; normalising over y < V is a softmax of z[:V].
    auto log_s = logits[0][k].narrow(0, 0, 3) - torch::log(torch::expm1(sigma)) - std::log(3.0);
    const double expected = -(log_s[x[k]] - torch::logsumexp(log_s, 0)).item<double>();
    EXPECT_NEAR(out.nll[0][k].item<double>(), expected, 1e-5);
  }
}

TEST(SeddLikelihood, DwdseElboIsUnbiased) {
  // E_u[σ'(t)·Σ_{i∈M} SE_i] with t = (1−ε)u + ε and each token masked w.p. q = (1−ε)t, enumerated over
  // mask sets M and integrated over u by a 2000-node midpoint rule (smooth integrand: error ≪ MC se).
  auto p = tiny_sedd();
  const std::vector<int64_t> x = {2, 0, 1};
  const int64_t K = 2000, V = 3, T = 3;
  const double eps = 1e-3;
  std::vector<torch::Tensor> ins;
  std::vector<double> sig, weight;  // σ and σ'(t)·P(M | t)/K per row
  std::vector<unsigned> msets;
  for (int64_t k = 0; k < K; ++k) {
    const double u = (k + 0.5) / K, t = (1 - eps) * u + eps, q = (1 - eps) * t;
    for (unsigned M = 1; M < 8; ++M) {
      auto in = torch::tensor(x);
      for (int64_t j = 0; j < T; ++j)
        if (M & (1u << j)) in.index_put_({j}, V);
      ins.push_back(in);
      const int m = __builtin_popcount(M);
      sig.push_back(-std::log1p(-q));
      weight.push_back((1 - eps) / (1 - q) * std::pow(q, m) * std::pow(1 - q, T - m) / K);
      msets.push_back(M);
    }
  }
  auto logits = run(*p, torch::stack(ins), torch::tensor(sig, torch::kFloat64));  // (N, T, V+1)
  auto la = logits.accessor<double, 3>();
  double expected = 0;
  for (size_t n = 0; n < ins.size(); ++n) {
    const double em1 = std::expm1(sig[n]), r = 1 / em1, off = std::log(em1) + std::log(double(V));
    for (int64_t i = 0; i < T; ++i) {
      if (!(msets[n] & (1u << i))) continue;
      double sum_s = 0;
      for (int64_t y = 0; y < V; ++y) sum_s += std::exp(la[n][i][y] - off);
      const double se = sum_s - r * (la[n][i][x[i]] - off) + r * (std::log(r) - 1);
      EXPECT_GE(se, -1e-6);
      expected += weight[n] * se;
    }
  }
  const int64_t rows = 4000, steps = 5;
  auto tokens = torch::tensor(x).view({1, 3}).repeat({rows, 1});
  at::Generator gen = at::detail::createCPUGenerator(3);
  std::vector<double> draws;
  for (int64_t s = 0; s < steps; ++s) {
    auto out = p->elbo(tokens, 1, gen);
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
  EXPECT_LT(se, 0.05 * expected);
}

TEST(SeddLoss, ZeroInitScoresGiveLogVPerMaskedToken) {
  // Zero-init head: s_y = 1/(V(e^σ−1)), so SE = r·log V and σ'(t)·SE = log V / t for each masked token;
  // E over t and masks of the per-token loss is (1−ε)·log V.
  auto p = make_sedd({}, false);
  at::Generator gen = at::detail::createCPUGenerator(4);
  TrainBatch batch;
  batch.tokens = torch::randint(0, 257, {64, 128});
  auto e = p->elbo(batch.tokens, 1, gen);
  // Within a row every masked token carries the same value log V / t ≥ log V.
  for (int64_t b = 0; b < 4; ++b) {
    auto row = e.nll[b];
    auto nz = row.index({row > 0});
    if (nz.numel() == 0) continue;
    EXPECT_NEAR((nz.max() - nz.min()).item<double>(), 0.0, 1e-3 * nz.max().item<double>());
    EXPECT_GE(nz.min().item<double>(), std::log(257.0) * (1 - 1e-5));
  }
  double mean = 0;
  for (int i = 0; i < 8; ++i) mean += p->loss(batch, gen).loss.item<double>() / 8;
  EXPECT_NEAR(mean, (1 - 1e-3) * std::log(257.0), 0.06 * std::log(257.0));
}

TEST(SeddLoss, StratifiedTimesCoverTheUnitInterval) {
  at::Generator gen = at::detail::createCPUGenerator(5);
  auto u = common::draw_uniform(8, true, gen);
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_GE(u[i].item<double>(), i / 8.0);
    EXPECT_LT(u[i].item<double>(), (i + 1) / 8.0);
  }
}

TEST(SeddSample, ShapeRangeDenoiserAndDeterminism) {
  auto p = make_sedd({{"block_size", 16}}, true);
  SampleRequest req;
  req.batch_size = 2;
  req.length = 16;
  req.steps = 4;
  req.seed = 9;
  auto out = p->sample(req);
  ASSERT_EQ(out.tokens.sizes(), torch::IntArrayRef({2, 16}));
  EXPECT_TRUE(out.tokens.ge(0).all().item<bool>());
  EXPECT_TRUE(out.tokens.lt(257).all().item<bool>());
  EXPECT_GE(out.network_calls, 4);
  EXPECT_LE(out.network_calls, 5);  // 4 steps + the Denoiser when masks remain
  EXPECT_TRUE(torch::equal(p->sample(req).tokens, out.tokens));
  req.top_p = 0.9;
  req.temperature = 0.7;
  req.float64_sampling = false;
  EXPECT_TRUE(p->sample(req).tokens.lt(257).all().item<bool>());
}

}  // namespace
}  // namespace aobench
