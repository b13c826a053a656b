// Implements: tests of the shared KV-cache any-order sampler (plugins/common/any_order_sampler.h;
// spec-ao-gpt §4.1–4.4) on a small attention network written here: a query's logits do not move when the
// other queries of its step change; n tokens cost O(n) slot forwards whatever the step count; Lemma 1's
// two-stage draw equals the direct (V+1)-way categorical; top-p / temperature edge cases of draw_tokens.
// Its tests on a real model (exact enumeration, recomputation) are in plugins/ao_gpt.
#include <algorithm>
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "core/plugin_api.h"
#include "plugins/common/any_order_sampler.h"
#include "plugins/common/attention.h"
#include "plugins/common/sampling.h"
#include "plugins/common/tests/chi2.h"

namespace aobench {
namespace {

using testing_stats::chi2;
using testing_stats::chi2_critical;

// A one-layer attention network over the slot layout (token, current position, target position embeddings
// summed), driven through common::attend like the plugins, for the sampler's structural properties.
struct TinyNet : torch::nn::Module {
  torch::nn::Embedding tok{nullptr}, pos{nullptr}, tgt{nullptr};
  torch::nn::Linear qkv{nullptr}, head{nullptr};
  int64_t d = 16;
  TinyNet(int64_t V, int64_t L) {
    tok = register_module("tok", torch::nn::Embedding(V + 1, d));
    pos = register_module("pos", torch::nn::Embedding(L + 1, d));
    tgt = register_module("tgt", torch::nn::Embedding(L + 1, d));
    qkv = register_module("qkv", torch::nn::Linear(d, 3 * d));
    head = register_module("head", torch::nn::Linear(d, V));
  }
  torch::Tensor forward(const common::Slots& s, common::KVCache* cache, const std::optional<torch::Tensor>& mask,
                        int64_t n_last) {
    auto x = tok(s.tokens + 1) + pos(s.positions + 1) + tgt(s.targets + 1);          // (B, S, d); −1 → row 0
    auto h = qkv(x).view({x.size(0), x.size(1), 3, 1, d}).permute({2, 0, 3, 1, 4});  // (3, B, 1, S, d)
    auto a = common::attend(h[0], h[1], h[2], cache, 0, mask).squeeze(1);            // (B, S, d)
    return head(x + a).narrow(1, x.size(1) - n_last, n_last);
  }
};

TEST(AnyOrderSampler, AQueryIgnoresTheOtherQueriesOfItsStep) {
  const int64_t V = 11, L = 40;
  torch::manual_seed(3);
  auto net = std::make_shared<TinyNet>(V, L);
  int64_t checked = 0;
  common::SlotForward fwd = [&](const common::Slots& s, common::KVCache* cache,
                                const std::optional<torch::Tensor>& mask, int64_t n) {
    common::KVCache before = *cache;  // the cache as it was before this step
    auto logits = net->forward(s, cache, mask, n);
    if (n >= 3) {
      // Change every query but query j (its target and its input token), rerun from the same cache.
      const int64_t j = n / 2, S = s.tokens.size(1);
      common::Slots t{s.tokens.clone(), s.positions.clone(), s.targets.clone()};
      for (int64_t i = 0; i < n; ++i) {
        if (i == j) continue;
        t.targets.select(1, S - n + i).fill_((s.targets[0][S - n + i].item<int64_t>() + 7) % L);
        t.tokens.select(1, S - n + i).fill_(5);
      }
      common::KVCache c2 = before;
      auto other = net->forward(t, &c2, mask, n);
      EXPECT_TRUE(torch::allclose(other.select(1, j), logits.select(1, j), 0.0, 1e-6));
      // ... while changing query j's own target does change its logits.
      t.targets.select(1, S - n + j).fill_((s.targets[0][S - n + j].item<int64_t>() + 1) % L);
      common::KVCache c3 = before;
      EXPECT_FALSE(torch::allclose(net->forward(t, &c3, mask, n).select(1, j), logits.select(1, j)));
      ++checked;
    }
    return logits;
  };
  SampleRequest r;
  r.batch_size = 2;
  r.length = L;
  r.steps = 6;
  auto out = common::sample_any_order(*net, fwd, r, V, L, /*start_slot=*/true);
  EXPECT_EQ(out.network_calls, 6);
  EXPECT_EQ(checked, 6);
}

TEST(AnyOrderSampler, LinearCostInSlotsWhateverTheSteps) {
  // Step k feeds the previous step's real tokens plus its own queries: Σ_k (n_prev + n_new − 1) =
  // 1 + (L − n_last) + L − steps slots, never more than 2L, for any step count and either count rule.
  const int64_t V = 7, L = 64;
  torch::manual_seed(4);
  auto net = std::make_shared<TinyNet>(V, L);
  for (const char* counts : {"deterministic", "bernoulli"})
    for (int64_t steps : {1, 2, 7, 16, 64}) {
      int64_t slots = 0, last = 0, calls = 0;
      common::SlotForward fwd = [&](const common::Slots& s, common::KVCache* cache,
                                    const std::optional<torch::Tensor>& mask, int64_t n) {
        slots += s.tokens.size(1);
        last = n;
        ++calls;
        return net->forward(s, cache, mask, n);
      };
      SampleRequest r;
      r.batch_size = 1;
      r.length = L;
      r.steps = steps;
      r.counts = counts;
      r.seed = static_cast<uint64_t>(steps);
      auto out = common::sample_any_order(*net, fwd, r, V, L, true);
      EXPECT_EQ(out.network_calls, calls);
      EXPECT_EQ(slots, 1 + (L - last) + L - calls) << counts << " steps " << steps;
      EXPECT_LE(slots, 2 * L) << counts << " steps " << steps;
      if (std::string(counts) == "deterministic")
        EXPECT_EQ(calls, steps);
      else
        EXPECT_LE(calls, steps);
      EXPECT_TRUE(out.tokens.ge(0).all().item<bool>() && out.tokens.lt(V).all().item<bool>());
    }
}

TEST(AnyOrderSampler, BernoulliCountsAreBinomial) {
  // Stage 1 of Lemma 1 at step 0 of 4 (linear): each of 8 masked positions unmasks w.p. (1 − 3/4)/1 = 1/4,
  // so the count is Binomial(8, 1/4); with cosine, p = 1 − cos(π/8).
  const int64_t N = 20000, L = 8;
  for (const char* schedule : {"linear", "cosine"}) {
    const double p = std::string(schedule) == "linear" ? 0.25 : 1.0 - std::cos(M_PI / 8);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
    std::vector<double> observed(L + 1, 0.0), probs(L + 1);
    for (int64_t i = 0; i < N; ++i) {
      auto c = common::bernoulli_counts(L, 4, schedule, gen);
      ASSERT_EQ(c.back(), L);
      ASSERT_TRUE(std::is_sorted(c.begin(), c.end()));
      observed[c[0]] += 1;
    }
    for (int64_t k = 0; k <= L; ++k)
      probs[k] = std::tgamma(L + 1.0) / (std::tgamma(k + 1.0) * std::tgamma(L - k + 1.0)) * std::pow(p, k) *
                 std::pow(1 - p, L - k);
    const auto [stat, df] = chi2(observed, probs, N);
    EXPECT_LT(stat, chi2_critical(df)) << schedule;
  }
  EXPECT_DOUBLE_EQ(common::masked_fraction("linear", 0, 4), 1.0);
  EXPECT_DOUBLE_EQ(common::masked_fraction("cosine", 4, 4), 0.0);
}

TEST(AnyOrderSampler, Lemma1TwoStageEqualsTheDirectCategorical) {
  // One masked position, step 1 of 4 (linear): direct law over {mask, 0..V−1} = [1 − p, p·q] with
  // p = (3/4 − 1/2)/(3/4) = 1/3. Two-stage: Bernoulli (bernoulli_counts' stage 1 on the step) then
  // draw_tokens over q for the unmasked rows.
  const int64_t N = 30000, V = 4;
  const double p = 1.0 / 3.0;
  auto q = torch::tensor({0.1, 0.2, 0.3, 0.4}, torch::kFloat64);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  std::vector<double> observed(V + 1, 0.0);
  std::vector<int64_t> unmasked;
  for (int64_t i = 0; i < N; ++i) {
    // The step-1 count of a row whose step 0 unmasked nothing: condition by drawing until c[0] == 0.
    std::vector<int64_t> c;
    do c = common::bernoulli_counts(1, 4, "linear", gen);
    while (c[0] != 0);
    if (c[1] == 1)
      unmasked.push_back(i);
    else
      observed[0] += 1;
  }
  auto logits = q.log().view({1, 1, V}).expand({static_cast<int64_t>(unmasked.size()), 1, V});
  auto x = common::draw_tokens(logits, common::gumbel_max(1.0, 1.0, true), gen);
  for (int64_t i = 0; i < x.size(0); ++i) observed[1 + x[i][0].item<int64_t>()] += 1;
  std::vector<double> probs = {1 - p};
  for (int64_t v = 0; v < V; ++v) probs.push_back(p * q[v].item<double>());
  const auto [stat, df] = chi2(observed, probs, N);
  EXPECT_LT(stat, chi2_critical(df));
}

TEST(AnyOrderSampler, TopPAndTemperatureEdgeCases) {
  auto probs = torch::tensor({0.5, 0.3, 0.15, 0.04, 0.01}, torch::kFloat64);
  const int64_t N = 40000, V = 5;
  auto logits = probs.log().view({1, 1, V}).expand({N, 1, V});
  auto gen = at::make_generator<at::CPUGeneratorImpl>(17);
  auto freq = [&](const torch::Tensor& x) {
    std::vector<double> f(V, 0.0);
    auto b = torch::bincount(x.view(-1), {}, V);
    for (int64_t v = 0; v < V; ++v) f[v] = b[v].item<double>();
    return f;
  };
  std::vector<double> p(probs.data_ptr<double>(), probs.data_ptr<double>() + V);
  // p = 1: nothing is cut, the 1% tail token included.
  auto [s1, df1] = chi2(freq(common::draw_tokens(logits, common::gumbel_max(1.0, 1.0, true), gen)), p, N);
  EXPECT_LT(s1, chi2_critical(df1));
  // p = 0.7: {0.5, 0.3} reach it (the crossing token kept), renormalised to {5/8, 3/8}; the rest never.
  auto x2 = common::draw_tokens(logits, common::gumbel_max(1.0, 0.7, true), gen);
  EXPECT_TRUE(x2.lt(2).all().item<bool>());
  auto [s2, df2] = chi2(freq(x2), {0.625, 0.375, 0, 0, 0}, N);
  EXPECT_LT(s2, chi2_critical(df2));
  // Tiny p and temperature → 0: always the top token.
  EXPECT_TRUE(common::draw_tokens(logits, common::gumbel_max(1.0, 1e-9, true), gen).eq(0).all().item<bool>());
  EXPECT_TRUE(common::draw_tokens(logits, common::gumbel_max(1e-6, 1.0, true), gen).eq(0).all().item<bool>());
  EXPECT_TRUE(common::draw_tokens(logits, common::gumbel_max(1e-6, 1.0, false), gen).eq(0).all().item<bool>());
  // Temperature 2 flattens: p^(1/2) renormalised.
  auto flat = probs.sqrt() / probs.sqrt().sum();
  std::vector<double> pf(flat.data_ptr<double>(), flat.data_ptr<double>() + V);
  auto [s3, df3] = chi2(freq(common::draw_tokens(logits, common::gumbel_max(2.0, 1.0, true), gen)), pf, N);
  EXPECT_LT(s3, chi2_critical(df3));
  EXPECT_ANY_THROW(common::draw_tokens(logits, common::gumbel_max(0.0, 1.0, true), gen));
  EXPECT_ANY_THROW(common::draw_tokens(logits, common::gumbel_max(1.0, 0.0, true), gen));
}

}  // namespace
}  // namespace aobench
