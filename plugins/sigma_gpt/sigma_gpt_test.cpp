// Implements: σ-GPT plugin tests (spec-ao-gpt §1.2, §1.3, §4.2): identity-order loss equals the exact L2R
// chain for both variants, the idiap variant leaves the first token unscored (T−1 predictions), tied head
// and parameter layout, and the KV-cache sampler equals a full-recomputation sampler with one token per step.
#include <cmath>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/plugin_api.h"
#include "plugins/common/any_order_sampler.h"
#include "plugins/common/sampling.h"
#include "plugins/common/slots.h"

extern "C" aobench::ModelPlugin* aobench_create_plugin();

namespace aobench {
namespace {

std::unique_ptr<ModelPlugin> make(const std::string& variant) {
  std::unique_ptr<ModelPlugin> m(aobench_create_plugin());
  auto cfg = aobench::plugin_default_config()["flavours"]["debug"];
  cfg["variant"] = variant;
  m->configure(cfg);
  torch::manual_seed(0);
  m->build(torch::kCPU);
  m->module().eval();
  return m;
}

torch::Tensor identity(int64_t B, int64_t T) {
  return torch::arange(T, torch::kLong).unsqueeze(0).expand({B, T}).contiguous();
}

TEST(SigmaGpt, IdentityLossEqualsL2RChain) {
  for (const char* variant : {"aogpt_repo", "idiap"}) {
    auto m = make(variant);
    const bool idiap = std::string(variant) == "idiap";
    auto g = at::make_generator<at::CPUGeneratorImpl>(1);
    auto tokens = torch::randint(257, {3, 32}, g, torch::kLong);
    TrainBatch b{tokens, identity(3, 32)};
    const double loss = m->loss(b, g).loss.item<double>();
    auto lp = m->log_prob(tokens, identity(3, 32), g);
    EXPECT_EQ(lp.scored.select(1, 0).any().item<bool>(), !idiap) << variant;
    EXPECT_TRUE(lp.scored.narrow(1, 1, 31).all().item<bool>()) << variant;
    auto mean = (lp.nll * lp.scored).sum() / lp.scored.sum();
    EXPECT_NEAR(loss, mean.item<double>(), 1e-5) << variant;
    EXPECT_NEAR(loss, std::log(257.0), 0.3) << variant;
    // Causality: earlier terms ignore later tokens.
    auto changed = tokens.clone();
    changed.narrow(1, 20, 12).fill_(7);
    auto lp2 = m->log_prob(changed, identity(3, 32), g).nll;
    EXPECT_TRUE(torch::allclose(lp2.narrow(1, 0, 20), lp.nll.narrow(1, 0, 20), 1e-5, 1e-5)) << variant;
    // chain_log_probs agrees with log_prob under a random order (row 0 is NaN for idiap: no start slot).
    auto order = torch::rand({3, 32}, g, torch::kFloat64).argsort(int64_t{1});
    auto xs = tokens.gather(1, order);
    auto chain = -m->chain_log_probs(xs, order, order).gather(2, xs.unsqueeze(-1)).squeeze(-1).to(torch::kFloat64);
    auto exact = m->log_prob(tokens, order, g);
    const int64_t skip = idiap ? 1 : 0;
    EXPECT_EQ(chain.select(1, 0).isnan().all().item<bool>(), idiap) << variant;
    EXPECT_TRUE(torch::allclose(chain.narrow(1, skip, 32 - skip), exact.nll.narrow(1, skip, 32 - skip), 1e-5, 1e-5))
        << variant;
  }
}

TEST(SigmaGpt, TargetPositionsChangeTheLogits) {
  // Same context tokens and positions, only the target positions of slots k and k+1 swapped: the
  // prediction of slot k must change (the model knows WHERE it predicts), earlier slots must not (causal).
  for (const char* variant : {"aogpt_repo", "idiap"}) {
    auto m = make(variant);
    auto g = at::make_generator<at::CPUGeneratorImpl>(4);
    auto tokens = torch::randint(257, {2, 16}, g, torch::kLong);
    auto order = torch::rand({2, 16}, g, torch::kFloat64).argsort(int64_t{1});
    auto xs = tokens.gather(1, order);
    const int64_t k = 6;
    auto swapped = order.clone();
    swapped.select(1, k).copy_(order.select(1, k + 1));
    swapped.select(1, k + 1).copy_(order.select(1, k));
    auto a = m->chain_log_probs(xs, order, order), b = m->chain_log_probs(xs, order, swapped);  // (2, 16, V)
    const int64_t first = std::string(variant) == "idiap" ? 1 : 0;  // idiap row 0 is NaN (no start slot)
    EXPECT_TRUE(torch::allclose(a.narrow(1, first, k - first), b.narrow(1, first, k - first), 1e-6, 1e-6)) << variant;
    for (int64_t r = 0; r < 2; ++r)
      EXPECT_GT((a[r][k] - b[r][k]).abs().max().item<double>(), 1e-3) << variant << " row " << r;
  }
}

TEST(SigmaGpt, ParameterLayout) {
  auto repo = make("aogpt_repo");
  auto p = repo->module().named_parameters();
  EXPECT_EQ(p["wpe.weight"].sizes(), (std::vector<int64_t>{129, 64}));   // T+1 rows
  EXPECT_EQ(p["wtpe.weight"].sizes(), (std::vector<int64_t>{128, 64}));  // full width, added at the input
  EXPECT_EQ(p["wnonee"].sizes(), (std::vector<int64_t>{1, 64}));
  EXPECT_FALSE(p.contains("lm_head.weight"));  // tied to wte
  EXPECT_FALSE(p.contains("ln_f.bias"));       // bias = false by default
  auto idiap = make("idiap");
  auto q = idiap->module().named_parameters();
  EXPECT_EQ(q["wpe.weight"].sizes(), (std::vector<int64_t>{128, 32}));  // one shared half-width table
  EXPECT_FALSE(q.contains("wtpe.weight"));
  EXPECT_FALSE(q.contains("wnonee"));
  std::unique_ptr<ModelPlugin> m(aobench_create_plugin());
  auto cfg = aobench::plugin_default_config()["flavours"]["debug"];
  cfg["variant"] = "original";
  EXPECT_THROW(m->configure(cfg), ConfigError);
}

// One token per step, each a fresh causal forward (chain_log_probs) over everything generated so far.
torch::Tensor reference_sample(ModelPlugin& m, const SampleRequest& r, bool idiap) {
  auto cpu_gen = at::make_generator<at::CPUGeneratorImpl>(r.seed);
  int64_t n_prompt = 0;
  auto order = common::sampling_orders(r, cpu_gen, &n_prompt);
  auto dev_gen = common::make_generator(r.device, r.seed + 1);
  auto gen = torch::zeros({r.batch_size, r.length}, torch::kLong);
  int64_t start = 0;
  if (idiap) {
    gen.select(1, 0).fill_(m.vocab_size() - 1);  // the given first token (EOS)
    start = 1;
  }
  for (int64_t k = start; k < r.length; ++k) {
    auto lp = m.chain_log_probs(gen.narrow(1, 0, k + 1), order.narrow(1, 0, k + 1), order.narrow(1, 0, k + 1));
    gen.narrow(1, k, 1).copy_(
        common::draw_tokens(lp.narrow(1, k, 1), common::gumbel_max(r.temperature, r.top_p, true), dev_gen));
  }
  return torch::empty_like(gen).scatter_(1, order, gen);
}

TEST(SigmaGpt, KVCacheSamplerEqualsFullRecomputation) {
  for (const char* variant : {"aogpt_repo", "idiap"}) {
    auto m = make(variant);
    const bool idiap = std::string(variant) == "idiap";
    SampleRequest r;
    r.batch_size = 2;
    r.length = 20;
    r.steps = idiap ? 19 : 20;  // idiap's first token is given
    r.seed = 5;
    r.top_p = 0.9;
    auto out = m->sample(r);
    EXPECT_EQ(out.network_calls, r.steps) << variant;
    EXPECT_TRUE(out.tokens.equal(reference_sample(*m, r, idiap))) << variant;
    EXPECT_LT(out.tokens.max().item<int64_t>(), 257);
  }
}

}  // namespace
}  // namespace aobench
