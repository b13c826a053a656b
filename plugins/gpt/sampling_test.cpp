// Implements: tests of the GPT's captured decode step: static-cache sampling against recomputation across
// the 256-slot spans, and CUDA-graph decoding against the same static-cache step uncaptured and with its kernels
// in plain stream order (AOBENCH_DECODE_PDL=0). GPU tests skip without a GPU.
#include <gtest/gtest.h>

#include <ATen/autocast_mode.h>

#include "gpt.h"
#include "plugins/common/attention.h"
#include "plugins/common/cuda_graph.h"
#include "plugins/common/decode_scope.h"
#include "plugins/common/sampling.h"

namespace aobench::gpt {
namespace {

// A GPT with debug widths but 600 positions, so a sample crosses the 256-slot spans of the static cache.
std::unique_ptr<GptPlugin> long_gpt(torch::Device dev, bool start_token) {
  GptPlugin probe;
  nlohmann::json m = aobench::plugin_default_config()["flavours"]["debug"];
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
    // float32: the decode-attention kernel draws what the masked SDPA path draws
    auto fused = p->sample(r);
    common::set_decode_attention_enabled(false);
    auto masked = p->sample(r);
    common::set_decode_attention_enabled(true);
    EXPECT_TRUE(torch::equal(fused.tokens, masked.tokens))
        << "start_token=" << start << ": " << fused.tokens.ne(masked.tokens).sum().item<int64_t>() << " ids differ";
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    common::set_cuda_graphs_enabled(true);
    auto graphed = p->sample(r);
    common::set_cuda_graphs_enabled(false);
    auto eager = p->sample(r);
    common::set_cuda_graphs_enabled(true);
    auto again = p->sample(r);
    common::set_decode_pdl_enabled(false);  // the step's kernels in plain stream order, not as dependents
    auto in_order = p->sample(r);
    common::set_decode_pdl_enabled(true);
    at::autocast::set_autocast_enabled(at::kCUDA, false);
    at::autocast::clear_cache();
    EXPECT_TRUE(torch::equal(graphed.tokens, eager.tokens))
        << "start_token=" << start << ": " << graphed.tokens.ne(eager.tokens).sum().item<int64_t>() << " ids differ";
    EXPECT_TRUE(torch::equal(graphed.tokens, again.tokens));
    EXPECT_TRUE(torch::equal(graphed.tokens, in_order.tokens));
    EXPECT_EQ(graphed.tokens.index({2, 300}).item<int64_t>(), 66);
    EXPECT_EQ(graphed.network_calls, eager.network_calls);
  }
}

}  // namespace
}  // namespace aobench::gpt
