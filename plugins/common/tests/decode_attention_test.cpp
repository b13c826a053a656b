// Implements: tests of decode_attention (plugins/common/attention.h): the reference against the softmax
// written out on a tiny case (CPU), and the CUDA kernel against the reference in float64 — every dtype and head
// size it covers, slots at and around its chunk boundaries, query/key/value views with the models' strides,
// the cache writes, a CUDA graph replaying it with the slot advanced on the device, and an out-of-range slot.
// The CUDA tests skip without a GPU.
#include <gtest/gtest.h>

#include <cmath>

#include "plugins/common/attention.h"
#include "plugins/common/cuda_graph.h"
#include "plugins/common/rms_norm.h"

namespace aobench::common {
namespace {

using torch::Tensor;

TEST(DecodeAttention, ReferenceIsTheSoftmaxOverTheHeldSlots) {
  torch::manual_seed(5);
  const int64_t B = 2, H = 3, cap = 7, h = 4, slot = 3;
  const auto opt = torch::TensorOptions().dtype(torch::kFloat64);
  auto q = torch::randn({B, H, 1, h}, opt), kn = torch::randn({B, H, 1, h}, opt), vn = torch::randn({B, H, 1, h}, opt);
  auto kb = torch::randn({B, H, cap, h}, opt), vb = torch::randn({B, H, cap, h}, opt);
  const auto kb0 = kb.clone(), vb0 = vb.clone();
  DecodeScratch scratch;
  const double scale = 0.7;
  auto out = decode_attention(q, kn, vn, kb, vb, torch::full({1}, slot, torch::kLong), scale, scratch);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t hd = 0; hd < H; ++hd) {
      std::vector<double> s(slot + 1);
      double mx = -INFINITY, z = 0;
      for (int64_t j = 0; j <= slot; ++j) {
        auto key = j == slot ? kn[b][hd][0] : kb0[b][hd][j];
        s[j] = scale * (q[b][hd][0] * key).sum().item<double>();
        mx = std::max(mx, s[j]);
      }
      for (double& v : s) z += (v = std::exp(v - mx));
      for (int64_t i = 0; i < h; ++i) {
        double want = 0;
        for (int64_t j = 0; j <= slot; ++j)
          want += s[j] / z * (j == slot ? vn[b][hd][0][i] : vb0[b][hd][j][i]).item<double>();
        EXPECT_NEAR(out[b][hd][0][i].item<double>(), want, 1e-12);
      }
    }
  // The new key and value sit at the slot; every other slot is untouched.
  EXPECT_TRUE(torch::equal(kb.select(2, slot), kn.select(2, 0)));
  EXPECT_TRUE(torch::equal(vb.select(2, slot), vn.select(2, 0)));
  auto others = torch::ones({cap}, torch::kBool);
  others[slot] = false;
  EXPECT_TRUE(torch::equal(kb.index({torch::indexing::Slice(), torch::indexing::Slice(), others}),
                           kb0.index({torch::indexing::Slice(), torch::indexing::Slice(), others})));
}

// q, k, v (B, H, 1, h) as the models pass them: views of one (B, 1, 3, H, h) projection, heads transposed.
std::array<Tensor, 3> step_views(int64_t B, int64_t H, int64_t h, torch::ScalarType dtype) {
  auto qkv = torch::randn({B, 1, 3, H, h}, torch::TensorOptions().device(torch::kCUDA)).to(dtype);
  auto view = [&](int64_t i) { return qkv.select(2, i).transpose(1, 2); };  // (B, H, 1, h)
  return {view(0), view(1), view(2)};
}

struct KernelCase {
  torch::ScalarType dtype;
  int64_t h;
  double tol;
  bool norm;  // with the QK norm folded in
};

// The kernel against the float64 reference for rows × capacity = B·H × cap: with few rows the slots are split
// over blocks (combined by the last one), with B·H ≥ 2 per SM one block walks the whole row.
void check_kernel(int64_t B, int64_t H, int64_t cap, const std::vector<KernelCase>& cases,
                  const std::vector<int64_t>& slots) {
  for (const auto& c : cases)
    for (int64_t slot : slots) {
      SCOPED_TRACE(::testing::Message() << c.dtype << " h=" << c.h << " norm=" << c.norm << " B·H=" << B * H
                                        << " slot=" << slot);
      torch::manual_seed(slot + c.h);
      auto [q, k, v] = step_views(B, H, c.h, c.dtype);
      // Random bytes everywhere, so a read past the slot would show; scores of a few units.
      auto kb = (2 * torch::randn({B, H, cap, c.h}, q.options().dtype(torch::kFloat))).to(c.dtype);
      auto vb = torch::randn({B, H, cap, c.h}, q.options().dtype(torch::kFloat)).to(c.dtype);
      auto cpu = [](const Tensor& t) { return t.to(torch::kCPU, torch::kFloat64); };
      auto kr = cpu(kb), vr = cpu(vb);
      QkNorm norm{torch::rand({c.h}, q.options().dtype(torch::kFloat)) + 0.5,
                  torch::rand({c.h}, q.options().dtype(torch::kFloat)) + 0.5, 1e-5};
      ASSERT_TRUE(decode_attention_supports(q, k, v, kb, vb));
      DecodeScratch scratch;
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.h));
      auto got = decode_attention(q, k, v, kb, vb, torch::full({1}, slot, q.options().dtype(torch::kLong)), scale,
                                  scratch, c.norm ? &norm : nullptr);
      // The reference on the GPU's inputs in float64, after qk_rms_norm (the training path's QK norm) on the
      // (B, 3, H, h) projection that q, k and v are views of.
      Tensor qr = cpu(q), knr = cpu(k);
      if (c.norm) {
        auto qkv = q.as_strided({B, 3, H, c.h}, {3 * H * c.h, H * c.h, c.h, 1});
        auto [qn, kn, vn] = qk_rms_norm(qkv, norm.wq, norm.wk, norm.eps);  // (B, H, h) each
        qr = cpu(qn).unsqueeze(2);
        knr = cpu(kn).unsqueeze(2);
      }
      auto want = decode_attention_reference(qr, knr, cpu(v), kr, vr, torch::full({1}, slot, torch::kLong), scale);
      ASSERT_EQ(got.sizes(), want.sizes());
      const double err = (cpu(got) - want).abs().max().item<double>();
      EXPECT_LE(err, c.tol) << "max |Δ| " << err;
      // The slot written, nothing else; a normalised key as qk_rms_norm rounds it (float32: another sum order).
      const double kerr = ((cpu(kb) - kr).abs() / (1 + kr.abs())).max().item<double>();
      EXPECT_LE(kerr, c.norm && c.dtype == torch::kFloat ? 1e-6 : 0.0) << "cache keys off by " << kerr;
      EXPECT_TRUE(torch::equal(cpu(vb), vr));
    }
}

TEST(DecodeAttention, CudaKernelMatchesTheReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  const std::vector<KernelCase> cases = {
      {torch::kBFloat16, 64, 1e-2, false}, {torch::kBFloat16, 64, 1e-2, true},   {torch::kBFloat16, 32, 1e-2, false},
      {torch::kBFloat16, 128, 1e-2, true}, {torch::kBFloat16, 256, 1e-2, false}, {torch::kHalf, 64, 2e-3, false},
      {torch::kFloat, 64, 1e-5, false},    {torch::kFloat, 32, 1e-5, true},      {torch::kFloat, 128, 1e-5, false}};
  check_kernel(3, 5, 600, cases, {0, 1, 31, 32, 63, 64, 65, 127, 128, 129, 300, 599});
  check_kernel(32, 12, 1100, {cases[0], cases[1], cases[6]}, {0, 127, 128, 700, 1099});
}

TEST(DecodeAttention, CudaKernelReplaysInAGraphWithTheSlotAdvancedOnTheDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  torch::manual_seed(9);
  const int64_t B = 2, H = 4, h = 64, cap = 150, steps = 140;
  const auto dt = torch::kBFloat16;
  auto [q, k, v] = step_views(B, H, h, dt);
  auto kb = torch::zeros({B, H, cap, h}, q.options()), vb = torch::zeros_like(kb);
  auto kr = torch::zeros({B, H, cap, h}, torch::kFloat64), vr = torch::zeros_like(kr);
  auto slot = torch::zeros({1}, q.options().dtype(torch::kLong));
  DecodeScratch scratch;
  StepGraph graph;
  const double scale = 0.125;
  auto fresh = [&](Tensor& t) { t.copy_(torch::randn(t.sizes(), t.options().dtype(torch::kFloat)).to(dt)); };
  double worst = 0;
  for (int64_t i = 0; i < steps; ++i) {
    fresh(q), fresh(k), fresh(v);  // new inputs in the graph's fixed memory
    auto out = graph.run(q.device(), [&] {
      auto y = decode_attention(q, k, v, kb, vb, slot, scale, scratch);
      slot.add_(1);
      return y;
    });
    auto cpu = [](const Tensor& t) { return t.to(torch::kCPU, torch::kFloat64); };
    auto want = decode_attention_reference(cpu(q), cpu(k), cpu(v), kr, vr, torch::full({1}, i, torch::kLong), scale);
    worst = std::max(worst, (cpu(out) - want).abs().max().item<double>());
  }
  EXPECT_EQ(slot.item<int64_t>(), steps);
  EXPECT_LE(worst, 1e-2);
  EXPECT_TRUE(torch::equal(kb.to(torch::kCPU, torch::kFloat64), kr));
  EXPECT_TRUE(torch::equal(vb.to(torch::kCPU, torch::kFloat64), vr));
}

TEST(DecodeAttention, CudaSlotPastTheCacheGivesNaNAndWritesNothing) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  auto [q, k, v] = step_views(1, 2, 64, torch::kBFloat16);
  auto kb = torch::ones({1, 2, 10, 64}, q.options()), vb = torch::ones_like(kb);
  DecodeScratch scratch;
  auto out = decode_attention(q, k, v, kb, vb, torch::full({1}, 10, q.options().dtype(torch::kLong)), 0.125, scratch);
  EXPECT_TRUE(out.isnan().all().item<bool>());
  EXPECT_TRUE(kb.eq(1).all().item<bool>() && vb.eq(1).all().item<bool>());
}

}  // namespace
}  // namespace aobench::common
