// Implements: tests of plugins/common/rms_norm.h: the CUDA forward and backward kernels of the fused
// residual + RMSNorm + adaLN step and of the per-head QK RMSNorm against their LibTorch references
// (autograd through plain ops) on the same GPU — outputs and every input gradient, float32, bf16 and half, with
// and without adaLN tables, row counts that fill no warp or group evenly, unused table rows. The CUDA tests
// skip without a GPU; the CPU test checks the reference itself against a hand-written expression.
#include <gtest/gtest.h>

#include "plugins/common/rms_norm.h"

namespace aobench::common {
namespace {

using torch::Tensor;

// max |a − b| ≤ tol · (1 + max |b|): a relative check on the tensor's scale, so sums stay comparable.
::testing::AssertionResult close(const Tensor& a, const Tensor& b, double tol) {
  if (!a.defined() && !b.defined()) return ::testing::AssertionSuccess();
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << "one of the two is undefined";
  if (a.sizes() != b.sizes()) return ::testing::AssertionFailure() << a.sizes() << " vs " << b.sizes();
  const auto af = a.to(torch::kCPU, torch::kFloat64), bf = b.to(torch::kCPU, torch::kFloat64);
  const double err = (af - bf).abs().max().item<double>(), scale = 1 + bf.abs().max().item<double>();
  if (err <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max |Δ| " << err << " > " << tol << " · " << scale;
}

struct StepCase {
  int64_t N, d, R;
  torch::ScalarType dtype;
  bool with_y, with_tables;
};

// Outputs and gradients of one step, fused or reference: {s, h, ∂x, ∂y, ∂table, ∂w}. The gate and mod
// tables are column slices of one (R, 6d) tensor, as in the plugin; table row R − 1 is never used.
std::vector<Tensor> run_step(bool fused, const StepCase& c) {
  torch::manual_seed(7);
  const auto opt = torch::TensorOptions().device(torch::kCUDA);
  auto x = torch::randn({c.N, c.d}, opt).requires_grad_();
  auto y = c.with_y ? torch::randn({c.N, c.d}, opt).to(c.dtype).detach().requires_grad_() : Tensor();
  auto m = (torch::randn({c.R, 6 * c.d}, opt) * 0.5 + 1).detach().requires_grad_();
  auto w = (torch::randn({c.d}, opt) * 0.2 + 1).detach().requires_grad_();
  auto idx = torch::randint(0, c.R - 1, {c.N}, opt.dtype(torch::kLong));
  auto grad_s = torch::randn({c.N, c.d}, opt), grad_h = torch::randn({c.N, c.d}, opt).to(c.dtype);
  StepTables t;
  if (c.with_tables) t = {c.with_y ? m.narrow(1, 2 * c.d, c.d) : Tensor(), m.narrow(1, 3 * c.d, 2 * c.d)};
  const auto rows = RowIndex::of(idx, c.R, /*grouped=*/true);
  auto [s, h] = fused ? rms_step(x, y, w, t, rows, 1e-5) : rms_step_reference(x, y, w, t, rows, 1e-5);
  EXPECT_EQ(h.scalar_type(), c.with_y ? c.dtype : torch::kFloat);
  ((s * grad_s).sum() + (h.to(torch::kFloat) * grad_h.to(torch::kFloat)).sum()).backward();
  return {s.detach(), h.detach(), x.grad(), c.with_y ? y.grad() : Tensor(), c.with_tables ? m.grad() : Tensor(),
          w.grad()};
}

TEST(FusedNorms, CudaRmsStepMatchesTheReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  const char* names[] = {"s", "h", "∂x", "∂y", "∂tables", "∂w"};
  for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf})
    for (int64_t d : {128, 384, 768, 1024})
      for (int64_t N : {203, 2000})  // the forward without tables: a block a row up to 8 rows per SM, else 8
        for (bool with_y : {true, false})
          for (bool with_tables : {true, false}) {
            const StepCase c{N, d, 37, dtype, with_y, with_tables};
            auto got = run_step(true, c), want = run_step(false, c);
            // bf16 / half: h and ∂y are rounded (1 ulp ≤ 2⁻⁸ relative); everything else is float32.
            const double low = dtype == torch::kFloat ? 2e-5 : 1e-2;
            for (size_t i = 0; i < got.size(); ++i)
              EXPECT_TRUE(close(got[i], want[i], i == 1 || i == 3 ? low : 2e-5))
                  << names[i] << " N=" << N << " d=" << d << " dtype=" << dtype << " y=" << with_y
                  << " tables=" << with_tables;
          }
}

TEST(FusedNorms, CudaRmsStepBackwardIsDeterministicAndInferenceMatches) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  const StepCase c{4096, 768, 1025, torch::kBFloat16, true, true};
  auto a = run_step(true, c), b = run_step(true, c);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].equal(b[i])) << "output " << i << " differs between runs";
  // The no-grad path (inference) runs the same forward kernel without saving statistics.
  torch::manual_seed(7);
  const auto opt = torch::TensorOptions().device(torch::kCUDA);
  auto x = torch::randn({64, 256}, opt), y = torch::randn({64, 256}, opt), w = torch::rand({256}, opt);
  const RowIndex none;
  auto trained = rms_step(x.clone().requires_grad_(), y, w, {}, none, 1e-5);
  torch::NoGradGuard no_grad;
  auto inferred = rms_step(x, y, w, {}, none, 1e-5);
  EXPECT_TRUE(trained.first.detach().equal(inferred.first));
  EXPECT_TRUE(trained.second.detach().equal(inferred.second));
}

// Inference with adaLN rows (a sampler's step: tables indexed per row, not grouped) against the reference, for a
// decode step's 32 rows (a block a row) and for 2000 (eight a block).
TEST(FusedNorms, CudaRmsStepInferenceWithTablesMatchesTheReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  torch::NoGradGuard no_grad;
  torch::manual_seed(8);
  const auto opt = torch::TensorOptions().device(torch::kCUDA);
  const int64_t d = 768, R = 5;
  for (int64_t N : {32, 2000}) {
    auto x = torch::randn({N, d}, opt), y = torch::randn({N, d}, opt).to(torch::kBFloat16);
    auto m = torch::randn({R, 6 * d}, opt) * 0.5 + 1, w = torch::randn({d}, opt) * 0.2 + 1;
    const StepTables t{m.narrow(1, 2 * d, d), m.narrow(1, 3 * d, 2 * d)};
    const auto rows = RowIndex::of(torch::randint(0, R, {N}, opt.dtype(torch::kLong)), R, /*grouped=*/false);
    auto [s, h] = rms_step(x, y, w, t, rows, 1e-5);
    auto [s_ref, h_ref] = rms_step_reference(x, y, w, t, rows, 1e-5);
    EXPECT_TRUE(close(s, s_ref, 2e-5)) << "N=" << N;
    EXPECT_TRUE(close(h, h_ref, 1e-2)) << "N=" << N;  // bf16 rounding of h: 2⁻⁸ relative
  }
}

std::vector<Tensor> run_qk(bool fused, int64_t N, int64_t H, int64_t h, torch::ScalarType dtype) {
  torch::manual_seed(9);
  const auto opt = torch::TensorOptions().device(torch::kCUDA);
  auto qkv = (torch::randn({N, 3, H, h}, opt) * 3).to(dtype).detach().requires_grad_();
  auto wq = (torch::randn({h}, opt) * 0.2 + 1).detach().requires_grad_();
  auto wk = (torch::randn({h}, opt) * 0.2 + 1).detach().requires_grad_();
  auto out = fused ? qk_rms_norm(qkv, wq, wk, 1e-5) : qk_rms_norm_reference(qkv, wq, wk, 1e-5);
  Tensor loss = torch::zeros({}, opt);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].sizes(), (std::vector<int64_t>{N, H, h}));
    loss = loss + (out[i].to(torch::kFloat) * torch::randn({N, H, h}, opt).to(dtype).to(torch::kFloat)).sum();
  }
  loss.backward();
  return {out[0].detach(), out[1].detach(), out[2].detach(), qkv.grad(), wq.grad(), wk.grad()};
}

TEST(FusedNorms, CudaQkRmsNormMatchesTheReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  const char* names[] = {"q", "k", "v", "∂qkv", "∂wq", "∂wk"};
  for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf})
    for (int64_t h : {32, 64, 128, 256}) {
      auto got = run_qk(true, 301, 3, h, dtype), want = run_qk(false, 301, 3, h, dtype);
      const double low = dtype == torch::kFloat ? 2e-5 : 1e-2;
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(close(got[i], want[i], i < 4 ? low : 2e-5)) << names[i] << " h=" << h << " dtype=" << dtype;
    }
}

TEST(FusedNorms, ReferenceIsTheSpecifiedExpression) {
  // s = x + gate[idx]·y, h = x̂·w·scale[idx] + shift[idx], x̂ = s / √(mean s² + eps), on CPU in float64.
  torch::manual_seed(5);
  const int64_t N = 6, d = 4, R = 3;
  auto opt = torch::TensorOptions().dtype(torch::kFloat64);
  auto x = torch::randn({N, d}, opt), y = torch::randn({N, d}, opt), w = torch::randn({d}, opt);
  auto m = torch::randn({R, 3 * d}, opt);
  auto idx = torch::tensor({2, 0, 2, 1, 1, 0}, torch::kLong);
  auto [s, h] =
      rms_step_reference(x, y, w, {m.narrow(1, 0, d), m.narrow(1, d, 2 * d)}, RowIndex::of(idx, R, false), 1e-5);
  for (int64_t n = 0; n < N; ++n) {
    const auto r = idx[n].item<int64_t>();
    auto sn = x[n] + m[r].narrow(0, 0, d) * y[n];
    auto hn = sn / torch::sqrt((sn * sn).mean() + 1e-5) * w * m[r].narrow(0, 2 * d, d) + m[r].narrow(0, d, d);
    EXPECT_TRUE(torch::allclose(s[n], sn, 1e-6, 1e-6)) << n;
    EXPECT_TRUE(torch::allclose(h[n].to(torch::kFloat64), hn, 1e-5, 1e-5)) << n;  // rms_norm runs in float32
  }
  // RowIndex groups rows by table row, stably.
  auto rows = RowIndex::of(idx, R + 1, true);
  EXPECT_TRUE(rows.order.equal(torch::tensor({1, 5, 3, 4, 0, 2}, torch::kLong)));
  EXPECT_TRUE(rows.offsets.equal(torch::tensor({0, 2, 4, 6, 6}, torch::kLong)));
}

}  // namespace
}  // namespace aobench::common
