// Implements: tests of the DDiT backbone of SEDD and RADD (plugins/common/ddit_backbone.h): the fused GPU
// inference path against the readable forward. GPU tests skip without a GPU.
#include <gtest/gtest.h>

#include <ATen/autocast_mode.h>

#include "plugins/common/ddit_backbone.h"
#include "plugins/common/kernel_util.h"

namespace aobench {
namespace {

// The GPU inference path (DDiTImpl::forward_fused: fused residual + LayerNorm + adaLN and rotary kernels) is
// the same network: under bf16 autocast it stays as close to an fp32 forward as the unfused bf16 path does.
// Random weights (adaLN included, so gates, scales and shifts are far from their zero init), SEDD, RADD and
// RADD with σ conditioning (time_cond: adaLN and LayerNorm bias together).
TEST(DDiTFused, InferencePathMatchesTheUnfusedNetwork) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (auto [time_cond, ln_bias] : {std::pair{true, false}, std::pair{false, true}, std::pair{true, true}}) {
    common::DDiTConfig c;
    c.vocab_size = 1000;
    c.n_layer = 3;
    c.n_head = 4;
    c.n_embd = 256;
    c.cond_dim = 64;
    c.time_cond = time_cond;
    c.ln_bias = ln_bias;
    torch::manual_seed(31);
    common::DDiT net(c);
    {
      torch::NoGradGuard ng;
      for (auto& t : net->parameters()) t.normal_(0, 0.05);
    }
    net->to(torch::kCUDA);
    net->eval();
    auto idx =
        torch::randint(0, c.vocab_size + 1, {4, 128}, torch::TensorOptions().dtype(torch::kLong).device(torch::kCUDA));
    auto sigma = torch::rand({4}, torch::TensorOptions().device(torch::kCUDA)) * 5;
    torch::Tensor ref, unfused, fused;
    ref = net->forward(idx, sigma).to(torch::kFloat64);  // fp32, grad mode on: the unfused path
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    unfused = net->forward(idx, sigma).to(torch::kFloat64);  // bf16, grad mode on: unfused
    {
      torch::NoGradGuard ng;
      ASSERT_TRUE(common::fused_inference(idx)) << "built without the CUDA kernels";
      fused = net->forward(idx, sigma).to(torch::kFloat64);
    }
    at::autocast::set_autocast_enabled(at::kCUDA, false);
    at::autocast::clear_cache();
    const double scale = ref.abs().mean().item<double>();
    const double e_unfused = (unfused - ref).abs().mean().item<double>() / scale;
    const double e_fused = (fused - ref).abs().mean().item<double>() / scale;
    EXPECT_LT(e_fused, 1.5 * e_unfused + 1e-3)
        << "time_cond " << time_cond << ", ln_bias " << ln_bias << ": fused " << e_fused << " vs unfused " << e_unfused
        << " (mean |Δ| / mean |logit|)";
    EXPECT_LT(e_fused, 3e-2) << "time_cond " << time_cond << ", ln_bias " << ln_bias;
  }
}

}  // namespace
}  // namespace aobench
