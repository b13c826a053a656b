// Implements: tests of decode_attention (plugins/common/attention.h): the reference against the softmax
// written out on tiny cases of one and several new slots (CPU), and the CUDA kernel against the reference in
// float64 — every dtype and head size it covers, one to sixteen new slots, slots at and around its chunk boundaries, query/key/value views with the models' strides,
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

TEST(DecodeAttention, ReferenceIsTheSoftmaxOverTheSlotsEachNewSlotSees) {
  const int64_t B = 2, H = 3, cap = 9, h = 4, slot = 3;
  const auto opt = torch::TensorOptions().dtype(torch::kFloat64);
  for (auto [S, seen] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {4, 4}, {4, 0}, {5, 2}}) {
    SCOPED_TRACE(::testing::Message() << "S=" << S << " seen=" << seen);
    torch::manual_seed(5 + S);
    auto q = torch::randn({B, H, S, h}, opt), kn = torch::randn({B, H, S, h}, opt),
         vn = torch::randn({B, H, S, h}, opt);
    auto kb = torch::randn({B, H, cap, h}, opt), vb = torch::randn({B, H, cap, h}, opt);
    const auto kb0 = kb.clone(), vb0 = vb.clone();
    DecodeScratch scratch;
    const double scale = 0.7;
    auto out = decode_attention(q, kn, vn, kb, vb, torch::full({1}, slot, torch::kLong), seen, scale, scratch);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t hd = 0; hd < H; ++hd)
        for (int64_t i = 0; i < S; ++i) {
          // new slot i sees the held slots, the new ones before min(i, seen), and itself
          std::vector<int64_t> keys;
          for (int64_t j = 0; j < slot + S; ++j)
            if (j < slot + std::min(i, seen) || j == slot + i) keys.push_back(j);
          auto key = [&](int64_t j) { return j >= slot ? kn[b][hd][j - slot] : kb0[b][hd][j]; };
          auto value = [&](int64_t j) { return j >= slot ? vn[b][hd][j - slot] : vb0[b][hd][j]; };
          std::vector<double> s;
          double mx = -INFINITY, z = 0;
          for (int64_t j : keys) mx = std::max(mx, s.emplace_back(scale * (q[b][hd][i] * key(j)).sum().item<double>()));
          for (double& v : s) z += (v = std::exp(v - mx));
          for (int64_t e = 0; e < h; ++e) {
            double want = 0;
            for (size_t c = 0; c < keys.size(); ++c) want += s[c] / z * value(keys[c])[e].item<double>();
            EXPECT_NEAR(out[b][hd][i][e].item<double>(), want, 1e-12);
          }
        }
    // The new keys and values sit at their slots; every other slot is untouched.
    EXPECT_TRUE(torch::equal(kb.narrow(2, slot, S), kn));
    EXPECT_TRUE(torch::equal(vb.narrow(2, slot, S), vn));
    EXPECT_TRUE(torch::equal(kb.narrow(2, 0, slot), kb0.narrow(2, 0, slot)));
    EXPECT_TRUE(torch::equal(kb.narrow(2, slot + S, cap - slot - S), kb0.narrow(2, slot + S, cap - slot - S)));
  }
}

// q, k, v (B, H, S, h) as the models pass them: views of one (B, S, 3, H, h) projection, heads transposed.
std::array<Tensor, 3> step_views(int64_t B, int64_t H, int64_t h, torch::ScalarType dtype, int64_t S = 1) {
  auto qkv = torch::randn({B, S, 3, H, h}, torch::TensorOptions().device(torch::kCUDA)).to(dtype);
  auto view = [&](int64_t i) { return qkv.select(2, i).transpose(1, 2); };  // (B, H, S, h)
  return {view(0), view(1), view(2)};
}

struct KernelCase {
  torch::ScalarType dtype;
  int64_t h;
  double tol;
  bool norm;  // with the QK norm folded in
};

// The kernel against the float64 reference for rows × capacity = B·H × cap and steps of S new slots of which
// `seen` are seen by the later ones: with few rows the slots are split over blocks (combined by the last one),
// with B·H ≥ 2 per SM one block walks the whole row.
void check_kernel(int64_t B, int64_t H, int64_t cap, const std::vector<KernelCase>& cases,
                  const std::vector<int64_t>& slots, int64_t S = 1, int64_t seen = 1) {
  for (const auto& c : cases)
    for (int64_t slot : slots) {
      SCOPED_TRACE(::testing::Message() << c.dtype << " h=" << c.h << " norm=" << c.norm << " B·H=" << B * H
                                        << " slot=" << slot << " S=" << S << " seen=" << seen);
      torch::manual_seed(slot + c.h + 7 * S);
      auto [q, k, v] = step_views(B, H, c.h, c.dtype, S);
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
      auto got = decode_attention(q, k, v, kb, vb, torch::full({1}, slot, q.options().dtype(torch::kLong)), seen, scale,
                                  scratch, c.norm ? &norm : nullptr);
      // The reference on the GPU's inputs in float64, after qk_rms_norm (the training path's QK norm) on the
      // (B·S, 3, H, h) projection that q, k and v are views of.
      Tensor qr = cpu(q), knr = cpu(k);
      if (c.norm) {
        auto qkv = q.as_strided({B * S, 3, H, c.h}, {3 * H * c.h, H * c.h, c.h, 1});
        auto [qn, kn, vn] = qk_rms_norm(qkv, norm.wq, norm.wk, norm.eps);  // (B·S, H, h) each
        auto heads = [&](const Tensor& t) { return cpu(t).view({B, S, H, c.h}).transpose(1, 2); };
        qr = heads(qn);
        knr = heads(kn);
      }
      auto want =
          decode_attention_reference(qr, knr, cpu(v), kr, vr, torch::full({1}, slot, torch::kLong), seen, scale);
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

// Steps of several new slots (the any-order sampler's: seen = n_prev − 1; a causal prompt: seen = S), each
// kernel width (NQ = 2, 4) and up to four groups of queries, new slots across the chunk boundaries.
TEST(DecodeAttention, CudaKernelWithSeveralNewSlotsMatchesTheReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  const std::vector<KernelCase> cases = {{torch::kBFloat16, 64, 1e-2, true},
                                         {torch::kBFloat16, 128, 1e-2, false},
                                         {torch::kFloat, 64, 1e-5, false},
                                         {torch::kFloat, 32, 1e-5, true}};
  for (auto [S, seen] :
       std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {3, 3}, {4, 0}, {7, 3}, {8, 8}, {5, 4}, {15, 7}, {16, 16}})
    check_kernel(3, 5, 600, cases, {0, 1, 28, 30, 60, 62, 126, 300, 600 - S}, S, seen);
  check_kernel(32, 12, 1100, {cases[0], cases[2]}, {0, 125, 700, 1100 - 7}, 7, 3);
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
      auto y = decode_attention(q, k, v, kb, vb, slot, 1, scale, scratch);
      slot.add_(1);
      return y;
    });
    auto cpu = [](const Tensor& t) { return t.to(torch::kCPU, torch::kFloat64); };
    auto want = decode_attention_reference(cpu(q), cpu(k), cpu(v), kr, vr, torch::full({1}, i, torch::kLong), 1, scale);
    worst = std::max(worst, (cpu(out) - want).abs().max().item<double>());
  }
  EXPECT_EQ(slot.item<int64_t>(), steps);
  EXPECT_LE(worst, 1e-2);
  EXPECT_TRUE(torch::equal(kb.to(torch::kCPU, torch::kFloat64), kr));
  EXPECT_TRUE(torch::equal(vb.to(torch::kCPU, torch::kFloat64), vr));
}

TEST(DecodeAttention, CudaSlotsPastTheCacheGiveNaNAndWriteNothing) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  auto [q, k, v] = step_views(1, 2, 64, torch::kBFloat16);
  auto kb = torch::ones({1, 2, 10, 64}, q.options()), vb = torch::ones_like(kb);
  DecodeScratch scratch;
  auto out =
      decode_attention(q, k, v, kb, vb, torch::full({1}, 10, q.options().dtype(torch::kLong)), 1, 0.125, scratch);
  EXPECT_TRUE(out.isnan().all().item<bool>());
  EXPECT_TRUE(kb.eq(1).all().item<bool>() && vb.eq(1).all().item<bool>());
  auto [q3, k3, v3] = step_views(1, 2, 64, torch::kBFloat16, 3);  // slots 8, 9, 10 of 10
  auto out3 =
      decode_attention(q3, k3, v3, kb, vb, torch::full({1}, 8, q.options().dtype(torch::kLong)), 3, 0.125, scratch);
  EXPECT_EQ(out3.sizes(), q3.sizes());
  EXPECT_TRUE(out3.isnan().all().item<bool>());
  EXPECT_TRUE(kb.eq(1).all().item<bool>() && vb.eq(1).all().item<bool>());
}

}  // namespace
}  // namespace aobench::common
