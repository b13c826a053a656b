// Implements: tests of the shared KV-cache any-order sampler (plugins/common/any_order.h; spec-ao-gpt §4.1–4.4)
// on AO-GPT and on a small attention network written here: one token per step equals ancestral sampling
// under the same order (exact enumeration, χ²); parallel steps equal a full recomputation in which every
// query sees only the tokens generated so far; a query's logits do not move when the other queries of its
// step change; n tokens cost O(n) slot forwards whatever the step count; Lemma 1's two-stage draw equals
// the direct (V+1)-way categorical; top-p / temperature edge cases of draw_tokens.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <gtest/gtest.h>

#include "core/plugin_api.h"
#include "plugins/common/any_order.h"

extern "C" aobench::ModelPlugin* aobench_create_plugin();

namespace aobench {
namespace {

std::unique_ptr<ModelPlugin> make(nlohmann::json overrides) {
  std::unique_ptr<ModelPlugin> m(aobench_create_plugin());
  auto cfg = m->default_config()["flavours"]["debug"];
  cfg.update(overrides);
  m->configure(cfg);
  torch::manual_seed(0);
  m->build(torch::kCPU);
  m->module().eval();
  return m;
}

// Upper α quantile of χ²(df) by Wilson–Hilferty (accurate to < 1% for df ≥ 3); z = 3.09 is α = 1e-3.
double chi2_critical(double df, double z = 3.0902) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3);
}

// Pearson χ² of observed counts against expected probabilities (cells with expectation < 5 pooled).
std::pair<double, double> chi2(const std::vector<double>& observed, const std::vector<double>& probs, double n) {
  double stat = 0, pooled_o = 0, pooled_e = 0;
  int64_t cells = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    const double e = probs[i] * n;
    if (e < 5) {
      pooled_o += observed[i];
      pooled_e += e;
      continue;
    }
    stat += (observed[i] - e) * (observed[i] - e) / e;
    ++cells;
  }
  if (pooled_e > 0) {
    stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
    ++cells;
  }
  return {stat, static_cast<double>(cells - 1)};
}

TEST(AnyOrderSampler, OneTokenPerStepEqualsAncestralSamplingUnderItsOrder) {
  // V = 3, L = 3: 6 orders × 27 sequences. The head is scaled so the conditionals are far from uniform
  // and depend on the context; temperature 0.7 is applied to the exact chain as the sampler applies it.
  const int64_t V = 3, L = 3, N = 60000;
  const double T = 0.7;
  auto m = make({{"vocab_size", V}, {"block_size", L}});
  {
    torch::NoGradGuard ng;
    for (auto& p : m->module().named_parameters())
      if (p.key().find("lm_head") != std::string::npos) p.value().mul_(20.0);
  }
  SampleRequest r;
  r.batch_size = N;
  r.length = L;
  r.steps = L;
  r.temperature = T;
  r.seed = 21;
  auto out = m->sample(r);
  ASSERT_TRUE(out.order.defined());
  EXPECT_EQ(out.network_calls, L);
  // Every permutation of {0, 1, 2} and every sequence: p(σ, x) = 1/6 · Π_k softmax(log p / T)[x_σ(k)].
  std::vector<std::vector<int64_t>> perms;
  std::vector<int64_t> s = {0, 1, 2};
  do perms.push_back(s); while (std::next_permutation(s.begin(), s.end()));
  std::vector<double> probs, observed(perms.size() * 27, 0.0);
  for (const auto& perm : perms) {
    auto order = torch::tensor(perm, torch::kLong).view({1, L}).expand({27, L}).contiguous();
    auto x = torch::empty({27, L}, torch::kLong);
    for (int64_t i = 0; i < 27; ++i)
      for (int64_t j = 0; j < L; ++j) x[i][j].fill_((i / static_cast<int64_t>(std::pow(3, j))) % 3);
    auto x_sigma = x.gather(1, order);
    torch::NoGradGuard ng;
    auto lp = torch::log_softmax(m->chain_log_probs(x_sigma, order, order).to(torch::kFloat64) / T, -1);
    auto chain = lp.gather(2, x_sigma.unsqueeze(2)).squeeze(2).sum(1).exp();  // (27)
    for (int64_t i = 0; i < 27; ++i) probs.push_back(chain[i].item<double>() / perms.size());
  }
  EXPECT_NEAR(std::accumulate(probs.begin(), probs.end(), 0.0), 1.0, 1e-9);
  auto order_a = out.order.accessor<int64_t, 2>();
  auto tokens_a = out.tokens.accessor<int64_t, 2>();
  for (int64_t b = 0; b < N; ++b) {
    std::vector<int64_t> perm(L);
    int64_t code = 0;
    for (int64_t j = 0; j < L; ++j) {
      perm[j] = order_a[b][j];
      code += tokens_a[b][j] * static_cast<int64_t>(std::pow(3, j));
    }
    const size_t pi = std::find(perms.begin(), perms.end(), perm) - perms.begin();
    ASSERT_LT(pi, perms.size());
    observed[pi * 27 + code] += 1;
  }
  const auto [stat, df] = chi2(observed, probs, N);
  EXPECT_LT(stat, chi2_critical(df)) << "df " << df;
  // The scaled head makes the law far from uniform: a uniform expectation must be rejected.
  const auto [uniform_stat, udf] = chi2(observed, std::vector<double>(probs.size(), 1.0 / probs.size()), N);
  EXPECT_GT(uniform_stat, chi2_critical(udf));
}

// Full recomputation of a multi-token-per-step schedule: each query of a step is scored by a fresh forward
// over [None] + the tokens generated BEFORE the step, the last slot targeting that query alone
// (chain_log_probs_last), then the step's queries are drawn together as the sampler draws them.
torch::Tensor reference_parallel(ModelPlugin& m, const SampleRequest& r) {
  auto cpu_gen = at::make_generator<at::CPUGeneratorImpl>(r.seed);
  int64_t n_prompt = 0;
  auto order = common::sampling_orders(r, cpu_gen, &n_prompt);
  auto dev_gen = common::make_generator(r.device, r.seed + 1);
  const int64_t B = r.batch_size, L = r.length;
  auto gen = torch::zeros({B, L}, torch::kLong);
  if (n_prompt > 0) gen.narrow(1, 0, n_prompt).copy_(r.prompt.gather(1, order.narrow(1, 0, n_prompt)));
  int64_t done = n_prompt, prev = 0;
  torch::NoGradGuard ng;
  for (int64_t n_cum : common::schedule_counts(L - n_prompt, r.steps, r.schedule)) {
    const int64_t n_new = n_cum - prev;
    std::vector<torch::Tensor> rows;
    for (int64_t i = 0; i < n_new; ++i) {
      auto q = order.narrow(1, done + i, 1);
      auto ctx_tok = torch::cat({gen.narrow(1, 0, done), torch::zeros({B, 1}, torch::kLong)}, 1);
      auto ctx_pos = torch::cat({order.narrow(1, 0, done), q}, 1);
      auto targets = torch::cat({order.narrow(1, 0, done), q}, 1);
      rows.push_back(m.chain_log_probs_last(ctx_tok, ctx_pos, targets));  // (B, V)
    }
    auto x = common::draw_tokens(torch::stack(rows, 1), r.temperature, r.top_p, r.float64_sampling, dev_gen);
    gen.narrow(1, done, n_new).copy_(x);
    done += n_new;
    prev = n_cum;
  }
  return torch::empty_like(gen).scatter_(1, order, gen);
}

TEST(AnyOrderSampler, ParallelStepsEqualFullRecomputation) {
  auto m = make(nlohmann::json::object());
  for (bool prompted : {false, true}) {
    SampleRequest r;
    r.batch_size = 3;
    r.length = 30;
    r.steps = 7;  // 4–5 queries per step
    r.seed = 13;
    r.temperature = 0.8;
    r.top_p = 0.9;
    if (prompted) {  // infilling: positions 3, 4 and 20 given
      r.prompt = torch::full({3, 30}, -1, torch::kLong);
      r.prompt.narrow(1, 3, 2).fill_(65);
      r.prompt.narrow(1, 20, 1).fill_(66);
    }
    auto out = m->sample(r);
    EXPECT_EQ(out.network_calls, 7);
    EXPECT_TRUE(out.tokens.equal(reference_parallel(*m, r))) << "prompted=" << prompted;
    if (prompted) {
      EXPECT_TRUE(out.tokens.narrow(1, 3, 2).eq(65).all().item<bool>());
      EXPECT_TRUE(out.tokens.narrow(1, 20, 1).eq(66).all().item<bool>());
      // Prompt positions come first in every order, left to right.
      EXPECT_TRUE(out.order.narrow(1, 0, 3).equal(torch::tensor({3, 4, 20}, torch::kLong).expand({3, 3})));
    }
  }
}

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
    auto x = tok(s.tokens + 1) + pos(s.positions + 1) + tgt(s.targets + 1);  // (B, S, d); −1 → row 0
    auto h = qkv(x).view({x.size(0), x.size(1), 3, 1, d}).permute({2, 0, 3, 1, 4});  // (3, B, 1, S, d)
    auto a = common::attend(h[0], h[1], h[2], cache, 0, mask).squeeze(1);             // (B, S, d)
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
      if (std::string(counts) == "deterministic") EXPECT_EQ(calls, steps);
      else EXPECT_LE(calls, steps);
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
    do c = common::bernoulli_counts(1, 4, "linear", gen); while (c[0] != 0);
    if (c[1] == 1) unmasked.push_back(i);
    else observed[0] += 1;
  }
  auto logits = q.log().view({1, 1, V}).expand({static_cast<int64_t>(unmasked.size()), 1, V});
  auto x = common::draw_tokens(logits, 1.0, 1.0, true, gen);
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
  auto [s1, df1] = chi2(freq(common::draw_tokens(logits, 1.0, 1.0, true, gen)), p, N);
  EXPECT_LT(s1, chi2_critical(df1));
  // p = 0.7: {0.5, 0.3} reach it (the crossing token kept), renormalised to {5/8, 3/8}; the rest never.
  auto x2 = common::draw_tokens(logits, 1.0, 0.7, true, gen);
  EXPECT_TRUE(x2.lt(2).all().item<bool>());
  auto [s2, df2] = chi2(freq(x2), {0.625, 0.375, 0, 0, 0}, N);
  EXPECT_LT(s2, chi2_critical(df2));
  // Tiny p and temperature → 0: always the top token.
  EXPECT_TRUE(common::draw_tokens(logits, 1.0, 1e-9, true, gen).eq(0).all().item<bool>());
  EXPECT_TRUE(common::draw_tokens(logits, 1e-6, 1.0, true, gen).eq(0).all().item<bool>());
  EXPECT_TRUE(common::draw_tokens(logits, 1e-6, 1.0, false, gen).eq(0).all().item<bool>());
  // Temperature 2 flattens: p^(1/2) renormalised.
  auto flat = probs.sqrt() / probs.sqrt().sum();
  std::vector<double> pf(flat.data_ptr<double>(), flat.data_ptr<double>() + V);
  auto [s3, df3] = chi2(freq(common::draw_tokens(logits, 2.0, 1.0, true, gen)), pf, N);
  EXPECT_LT(s3, chi2_critical(df3));
  EXPECT_ANY_THROW(common::draw_tokens(logits, 0.0, 1.0, true, gen));
  EXPECT_ANY_THROW(common::draw_tokens(logits, 1.0, 0.0, true, gen));
}

}  // namespace
}  // namespace aobench
