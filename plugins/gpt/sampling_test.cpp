// Implements: tests of the decoders' token draw (plugins/common/sampling.h) and of the GPT's captured decode
// step: the fused CUDA draw against its LibTorch reference given the same uniforms (identical ids), its own
// Philox draws against the exact filtered distribution (chi-square), top-p edge cases (ties, tiny p, p = 1),
// and CUDA-graph decoding against the same static-cache step uncaptured. GPU tests skip without a GPU.
#include <gtest/gtest.h>

#include <ATen/autocast_mode.h>

#include "gpt.h"
#include "plugins/common/any_order.h"
#include "plugins/common/cuda_graph.h"
#include "plugins/common/sampling.h"

namespace aobench::gpt {
namespace {

// The reference's exact per-token probabilities after temperature and top-p: (N, V) float64.
torch::Tensor filtered(const torch::Tensor& logits, double temperature, double top_p) {
  auto p = torch::softmax(logits.to(torch::kFloat64) / temperature, -1);
  if (top_p < 1.0) p = p * common::top_p_keep(p, top_p);
  return p / p.sum(-1, true);
}

TEST(Sampling, TopPTiesAreKeptLowestIdFirst) {
  // Ten equal tokens, p = 0.1 each: the j-th (by id) has mass 0.1·j before it, kept while that is < 0.45.
  auto logits = torch::zeros({1, 10});
  auto keep = common::top_p_keep(torch::softmax(logits.to(torch::kFloat64), -1), 0.45);
  EXPECT_TRUE(torch::equal(keep[0], torch::arange(10).lt(5))) << keep;
  // Tiny p keeps only the top-1 (the crossing token); p = 1 keeps everything.
  auto p = torch::softmax(torch::randn({4, 50}, torch::kFloat64), -1);
  EXPECT_TRUE(torch::equal(common::top_p_keep(p, 1e-9).sum(-1), torch::ones({4}, torch::kLong)));
  EXPECT_TRUE(common::top_p_keep(p, 1.0).all().item<bool>());
}

TEST(Sampling, ReferenceDrawFollowsTheFilteredDistribution) {
  // 40k CPU draws over 6 tokens at T = 0.9, top-p 0.8 against the exact filtered probabilities.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  auto logits = torch::tensor({2.0, 1.5, 1.0, 0.2, -1.0, -3.0}).unsqueeze(0);
  const int64_t n = 40000;
  auto ids = common::draw_tokens(logits.expand({n, 1, 6}).contiguous(), 0.9, 0.8, true, gen).view({n});
  auto counts = torch::bincount(ids, {}, 6).to(torch::kFloat64);
  auto expect = filtered(logits, 0.9, 0.8)[0] * n;
  auto kept = expect > 0;
  EXPECT_EQ(counts.masked_select(kept.logical_not()).sum().item<double>(), 0.0);  // filtered: never drawn
  const double chi2 = ((counts - expect).pow(2) / expect).masked_select(kept).sum().item<double>();
  EXPECT_LT(chi2, 20.5) << "chi-square over the kept tokens (≤ 5 dof, p = 0.001): " << chi2;
}

TEST(FusedDraw, SameIdsAsReferenceGivenTheSameUniforms) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(0);
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (int64_t V : {7, 1000, 50257}) {
      // A padded head narrowed to V columns, logits of a peaked and a flat row family.
      auto full = (torch::randn({48, V + 47}) * 3.0).to(torch::kCUDA, dtype);
      full.narrow(0, 0, 16).mul_(0.05);  // near-uniform rows: nuclei of thousands of tokens
      auto logits = full.narrow(1, 0, V);
      auto u = torch::rand({48, V}, torch::TensorOptions().dtype(torch::kFloat64).device(torch::kCUDA));
      u.index_put_({0, 0}, 0.0);  // u = 0 is never chosen
      for (double temperature : {1.0, 0.9, 0.7}) {
        for (double top_p : {1.0, 0.95, 0.5, 1e-6}) {
          auto ours = common::fused_draw(logits, temperature, top_p, nullptr, u);
          auto ref = common::gumbel_draw_reference(logits, temperature, top_p, u);
          EXPECT_TRUE(torch::equal(ours, ref))
              << dtype << " V=" << V << " T=" << temperature << " top_p=" << top_p << ": "
              << ours.ne(ref).sum().item<int64_t>() << " of 48 rows differ";
        }
      }
    }
  }
}

TEST(FusedDraw, PhiloxDrawsFollowTheFilteredDistribution) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // bf16 logits with ties (1.0 twice) straddling the nucleus boundary; 400k rows in one call.
  auto logits = torch::tensor({2.0, 1.0, 1.0, 0.5, -0.5, -2.0, 1.75, 0.0}).to(torch::kBFloat16);
  const int64_t n = 400000, V = 8;
  auto gen = common::make_generator(torch::Device(torch::kCUDA, 0), 11);
  for (double top_p : {1.0, 0.9, 0.7}) {  // 0.7 keeps token 1 of the tie {1, 2} and drops token 2
    auto rows = logits.unsqueeze(0).expand({n, V}).contiguous().to(torch::kCUDA);
    auto ids = common::fused_draw(rows, 0.9, top_p, &gen).cpu();
    auto counts = torch::bincount(ids, {}, V).to(torch::kFloat64);
    auto expect = filtered(logits.to(torch::kFloat32).unsqueeze(0), 0.9, top_p)[0] * n;
    auto kept = expect > 0;
    EXPECT_EQ(counts.masked_select(kept.logical_not()).sum().item<double>(), 0.0) << "top_p=" << top_p;
    const double chi2 = ((counts - expect).pow(2) / expect).masked_select(kept).sum().item<double>();
    EXPECT_LT(chi2, 24.4) << "top_p=" << top_p << " chi-square (≤ 7 dof, p = 0.001): " << chi2;
  }
  // The same seed gives the same ids; the generator advances between calls.
  auto rows = logits.unsqueeze(0).expand({64, V}).contiguous().to(torch::kCUDA);
  auto g1 = common::make_generator(torch::Device(torch::kCUDA, 0), 5);
  auto g2 = common::make_generator(torch::Device(torch::kCUDA, 0), 5);
  auto a = common::fused_draw(rows, 1.0, 1.0, &g1), b = common::fused_draw(rows, 1.0, 1.0, &g2);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::equal(common::fused_draw(rows, 1.0, 1.0, &g1), a));
}

// A GPT with debug widths but 600 positions, so a sample crosses the 256-slot spans of the static cache.
std::unique_ptr<GptPlugin> long_gpt(torch::Device dev, bool start_token) {
  GptPlugin probe;
  nlohmann::json m = probe.default_config()["flavours"]["debug"];
  m["plugin"] = "gpt";
  m["flavour"] = "debug";
  m["block_size"] = 600;
  m["start_token"] = start_token;
  auto p = std::make_unique<GptPlugin>();
  p->configure(m);
  torch::manual_seed(1);
  p->build(dev);
  return p;
}

TEST(Gpt, StaticCacheSamplingEqualsRecomputationAcrossSpans) {
  auto p = long_gpt(torch::kCPU, true);
  SampleRequest r;
  r.batch_size = 2;
  r.length = 560;
  r.seed = 3;
  r.temperature = 0.9;
  r.top_p = 0.95;
  auto a = p->sample_impl(r, true), b = p->sample_impl(r, false);
  EXPECT_TRUE(torch::equal(a.tokens, b.tokens));
}

TEST(Gpt, CudaGraphDecodeEqualsUncapturedStep) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device dev(torch::kCUDA, 0);
  for (bool start : {false, true}) {
    auto p = long_gpt(dev, start);
    SampleRequest r;
    r.batch_size = 4;
    r.length = 600;
    r.seed = 9;
    r.temperature = 0.9;
    r.top_p = 0.95;
    r.device = dev;
    r.prompt = torch::full({4, 600}, -1, torch::kLong);
    r.prompt.narrow(1, 0, 5).fill_(65);  // a prefilled prefix
    r.prompt.index_put_({2, 300}, 66);   // and one forced token mid-sequence
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    common::set_cuda_graphs_enabled(true);
    auto graphed = p->sample(r);
    common::set_cuda_graphs_enabled(false);
    auto eager = p->sample(r);
    common::set_cuda_graphs_enabled(true);
    auto again = p->sample(r);
    at::autocast::set_autocast_enabled(at::kCUDA, false);
    at::autocast::clear_cache();
    EXPECT_TRUE(torch::equal(graphed.tokens, eager.tokens))
        << "start_token=" << start << ": " << graphed.tokens.ne(eager.tokens).sum().item<int64_t>() << " ids differ";
    EXPECT_TRUE(torch::equal(graphed.tokens, again.tokens));
    EXPECT_EQ(graphed.tokens.index({2, 300}).item<int64_t>(), 66);
    EXPECT_EQ(graphed.network_calls, eager.network_calls);
  }
}

}  // namespace
}  // namespace aobench::gpt
