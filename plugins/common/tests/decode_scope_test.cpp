// Implements: tests of decode_scope.h: a decode step's kernels launch as programmatic dependents only inside a
// DecodeWeightsScope on this thread with the switch on; on the GPU, a decode step's chain of them (a Linear,
// residual add + LayerNorm, the Linear, the decode attention with its cache write, add + RMSNorm with adaLN rows,
// the Linear with GELU), each launched right after the kernel that writes its input, gives the bits (and the
// cache) of plain stream order,
// for 32 rows (a block a row) and 3, eagerly and replayed from a CUDA graph. The CUDA test skips without a GPU.
#include <gtest/gtest.h>

#include <thread>

#include "plugins/common/cuda_graph.h"
#include "plugins/common/decode_attention.h"
#include "plugins/common/decode_linear.h"
#include "plugins/common/decode_scope.h"
#include "plugins/common/kv_cache.h"
#include "plugins/common/layer_norm.h"
#include "plugins/common/rms_norm.h"

namespace aobench::common {
namespace {

using torch::Tensor;

TEST(DecodeScope, DependentLaunchesOnlyInsideAScopeWithTheSwitchOn) {
  const bool was = decode_pdl_enabled();  // false without the CUDA kernels, whatever is set
  set_decode_pdl_enabled(true);
  const bool on = decode_pdl_enabled();
  EXPECT_FALSE(decode_pdl());
  {
    const DecodeWeightsScope outer;
    EXPECT_EQ(decode_pdl(), on);
    {
      const DecodeWeightsScope inner;
      EXPECT_EQ(decode_pdl(), on);
    }
    EXPECT_EQ(decode_pdl(), on);  // the outer scope still lives
    bool other = true;
    std::thread([&] { other = decode_pdl(); }).join();
    EXPECT_FALSE(other);  // a scope is its thread's
    set_decode_pdl_enabled(false);
    EXPECT_FALSE(decode_pdl());
    set_decode_pdl_enabled(true);
  }
  EXPECT_FALSE(decode_pdl());
  set_decode_pdl_enabled(was);
}

// One decode step of a small pre-norm block over B sequences, its inputs written by a GEMM right before.
struct Step {
  int64_t B, H = 12, hd = 64, d = 768, cap = 256;
  Tensor a, m, x0, y0;                        // x = x0 + a·m (fp32 GEMM), y = the Linear of y0 (a branch)
  Tensor lnw, lnb, wy, wa, ba, wo, rmsw, wf;  // norms fp32, Linears bf16
  Tensor gate, mod, idx, kb, vb, slot;
  DecodeScratch scratch;

  explicit Step(int64_t b) : B(b) {
    const auto f = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat);
    const auto o = f.dtype(torch::kBFloat16);
    a = torch::randn({B, 1024}, f), m = torch::randn({1024, d}, f) * 0.03;
    x0 = torch::randn({B, d}, f), y0 = torch::randn({B, d}, o);
    lnw = 1 + 0.1 * torch::randn({d}, f), lnb = 0.1 * torch::randn({d}, f), rmsw = 1 + 0.1 * torch::randn({d}, f);
    wy = (torch::randn({d, d}, f) * 0.03).to(o);
    wa = (torch::randn({3 * d, d}, f) * 0.03).to(o), ba = (torch::randn({3 * d}, f) * 0.1).to(o);
    wo = (torch::randn({d, d}, f) * 0.03).to(o), wf = (torch::randn({4 * d, d}, f) * 0.03).to(o);
    gate = torch::randn({4, d}, f), mod = torch::randn({4, 2 * d}, f) * 0.2 + 0.5;
    idx = torch::arange(B, f.dtype(torch::kLong)) % 4;
    kb = torch::randn({B, H, cap, hd}, o), vb = torch::randn({B, H, cap, hd}, o);
    slot = torch::full({1}, 100, f.dtype(torch::kLong));
  }
  // (B, d) fp32 residual, (B, 4d) bf16 MLP hidden, (B, H, 1, hd) attention; writes slot 100 of the cache.
  std::array<Tensor, 3> run() {
    const auto x = x0 + torch::mm(a, m);
    // the norm right after a dependent that lets it start before it writes y, as in a GPT step
    const auto y_branch = decode_linear(y0, wy, {}, DecodeActivation::none);
    auto [s, h] = add_layer_norm(x, y_branch, lnw, lnb, 1e-5);
    const auto qkv = decode_linear(h, wa, ba, DecodeActivation::none).view({B, 3, H, 1, hd});  // (B, 3d)
    const auto att = decode_attention(qkv.select(1, 0), qkv.select(1, 1), qkv.select(1, 2), kb, vb, slot, 1, 0.125,
                                      scratch);  // (B, H, 1, hd)
    const auto y = decode_linear(att.view({B, d}), wo, {}, DecodeActivation::none);
    auto [s2, h2] = rms_step(s, y, rmsw, StepTables{gate, mod}, RowIndex::of(idx, 4, false), 1e-5);
    return {s2, decode_linear(h2, wf, {}, DecodeActivation::gelu), att};
  }
};

TEST(DecodeScope, CudaChainOfDependentsGivesTheBitsOfStreamOrder) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  if (!decode_pdl_enabled() || !decode_linear_enabled())
    GTEST_SKIP() << "built without the CUDA kernels, or switched off";
  torch::NoGradGuard no_grad;
  for (int64_t B : {32, 3}) {
    SCOPED_TRACE(B);
    torch::manual_seed(B);
    Step step(B);
    const DecodeWeightsScope constant_weights;
    set_decode_pdl_enabled(false);
    const auto want = step.run();  // plain stream order
    const auto kb = step.kb.clone(), vb = step.vb.clone();
    set_decode_pdl_enabled(true);
    ASSERT_TRUE(decode_pdl());
    for (int i = 0; i < 3; ++i) {
      const auto got = step.run();
      for (int t = 0; t < 3; ++t) EXPECT_TRUE(torch::equal(got[t], want[t])) << "output " << t << ", run " << i;
      EXPECT_TRUE(torch::equal(step.kb, kb) && torch::equal(step.vb, vb)) << "the cache's new slot, run " << i;
    }
    if (!cuda_graphs_usable(step.x0.device())) continue;
    StepGraph graph;  // call 1 eager, call 2 captures and replays, call 3 replays: programmatic edges in a graph
    for (int call = 1; call <= 3; ++call) {
      SCOPED_TRACE(call);
      step.x0.copy_(torch::randn_like(step.x0));
      step.y0.copy_(torch::randn_like(step.y0));
      set_decode_pdl_enabled(false);
      const auto plain = step.run();
      set_decode_pdl_enabled(true);
      const auto out = graph.run(step.x0.device(), [&] { return step.run()[1]; });
      torch::cuda::synchronize();
      EXPECT_TRUE(torch::equal(out, plain[1]));
    }
  }
}

}  // namespace
}  // namespace aobench::common
