// Implements: tests of the shared KV-cache any-order sampler (plugins/common/any_order_sampler.h;
// spec-ao-gpt §4.1–4.4) on AO-GPT: one token per step equals ancestral sampling under the same order (exact
// enumeration, χ²); parallel steps equal a full recomputation in which every query sees only the tokens
// generated so far. The sampler's properties that need no plugin are in plugins/common/tests.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include "core/plugin_api.h"
#include "plugins/common/any_order_sampler.h"
#include "plugins/common/cuda_graph.h"
#include "plugins/common/sampling.h"
#include "plugins/common/tests/chi2.h"

extern "C" aobench::ModelPlugin* aobench_create_plugin();

namespace aobench {
namespace {

using testing_stats::chi2;
using testing_stats::chi2_critical;

std::unique_ptr<ModelPlugin> make(nlohmann::json overrides, torch::Device device = torch::kCPU) {
  std::unique_ptr<ModelPlugin> m(aobench_create_plugin());
  auto cfg = aobench::plugin_default_config()["flavours"]["debug"];
  cfg.update(overrides);
  m->configure(cfg);
  torch::manual_seed(0);
  m->build(device);
  m->module().eval();
  return m;
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
  do perms.push_back(s);
  while (std::next_permutation(s.begin(), s.end()));
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
  auto order = common::sampling_orders(r, cpu_gen, &n_prompt).to(r.device);
  auto dev_gen = common::make_generator(r.device, r.seed + 1);
  const int64_t B = r.batch_size, L = r.length;
  auto gen = torch::zeros({B, L}, order.options());
  if (n_prompt > 0) gen.narrow(1, 0, n_prompt).copy_(r.prompt.to(r.device).gather(1, order.narrow(1, 0, n_prompt)));
  int64_t done = n_prompt, prev = 0;
  torch::NoGradGuard ng;
  for (int64_t n_cum : common::schedule_counts(L - n_prompt, r.steps, r.schedule)) {
    const int64_t n_new = n_cum - prev;
    std::vector<torch::Tensor> rows;
    for (int64_t i = 0; i < n_new; ++i) {
      auto q = order.narrow(1, done + i, 1);
      auto ctx_tok = torch::cat({gen.narrow(1, 0, done), torch::zeros({B, 1}, gen.options())}, 1);
      auto ctx_pos = torch::cat({order.narrow(1, 0, done), q}, 1);
      auto targets = torch::cat({order.narrow(1, 0, done), q}, 1);
      rows.push_back(m.chain_log_probs_last(ctx_tok, ctx_pos, targets));  // (B, V)
    }
    auto x = common::draw_tokens(torch::stack(rows, 1), common::gumbel_max(r.temperature, r.top_p, r.float64_sampling),
                                 dev_gen);
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

// On the GPU the parallel steps run on the static cache and every repeated step shape is replayed from a
// CUDA graph: in float32 the ids must be the full recomputation's, across the cache's 256-slot spans and
// with a prompt; under bf16 captured and uncaptured must give the same ids, Lemma-1 counts included.
TEST(AnyOrderSampler, CudaGraphParallelStepsEqualRecomputationAndUncaptured) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device dev(torch::kCUDA, 0);
  auto m = make(nlohmann::json{{"block_size", 300}}, dev);
  SampleRequest r;
  r.batch_size = 3;
  r.length = 300;
  r.seed = 21;
  r.temperature = 0.9;
  r.top_p = 0.95;
  r.device = dev;
  // 2 and 4 tokens a step: shapes (3 slots, 2 new) 149 times (the decode kernel), (7, 4) 74 times (the
  // masked SDPA unless AOBENCH_DECODE_SLOTS allows 7); 1, 1, 2 in turn: one- and two-query kernels; 7 a step
  // after the prompt
  for (int64_t steps : {150, 75, 225, 41}) {
    const bool prompted = steps == 41;
    r.steps = steps;
    if (prompted) {
      r.prompt = torch::full({3, 300}, -1, torch::kLong);
      r.prompt.narrow(1, 100, 13).fill_(42);
    }
    auto out = m->sample(r);
    EXPECT_EQ(out.network_calls, r.steps);
    auto want = reference_parallel(*m, r);
    EXPECT_TRUE(out.tokens.equal(want)) << "steps=" << steps << ": " << out.tokens.ne(want).sum().item<int64_t>();
    if (prompted) {
      EXPECT_TRUE(out.tokens.narrow(1, 100, 13).eq(42).all().item<bool>());
    }
  }
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  r.prompt = torch::Tensor();
  // Lemma-1 counts: each row its own cache, its step shapes in random order, so graphs captured before a
  // wider step (more queries a block, a larger workspace) are replayed after it; the rows split over blocks.
  for (const char* counts : {"deterministic", "bernoulli"})
    for (int64_t steps : {150, 75, 225}) {
      r.counts = counts;
      r.steps = steps;
      auto graphed = m->sample(r);
      common::set_cuda_graphs_enabled(false);
      auto eager = m->sample(r);
      common::set_cuda_graphs_enabled(true);
      EXPECT_TRUE(graphed.tokens.equal(eager.tokens))
          << counts << " steps=" << steps << ": " << graphed.tokens.ne(eager.tokens).sum().item<int64_t>();
    }
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  at::autocast::clear_cache();
}

}  // namespace
}  // namespace aobench
