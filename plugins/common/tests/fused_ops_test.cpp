// Implements: tests of plugins/common/cross_entropy.h, layer_norm.h and rotary.h (row_logsumexp, head_nll …) against plain LibTorch
// references. The CUDA kernel is checked against the CPU expression on awkward shapes (padded columns,
// rows not 16-byte aligned, −inf and NaN entries, bf16/half/float); those tests skip without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include <ATen/autocast_mode.h>

#include "core/device.h"
#include "plugins/common/cross_entropy.h"
#include "plugins/common/decode_linear.h"
#include "plugins/common/layer_norm.h"
#include "plugins/common/linear.h"
#include "plugins/common/rotary.h"

namespace aobench::common {
namespace {

TEST(FusedOps, HeadNllEqualsLogSoftmaxGather) {
  torch::manual_seed(3);
  const int64_t N = 37, d = 16, V = 50, V_pad = 64;
  auto h = torch::randn({N, d}), w = torch::randn({V_pad, d}), b = torch::randn({V_pad});
  auto target = torch::randint(0, V, {N}, torch::kLong);
  for (bool with_bias : {false, true}) {
    auto logits = torch::nn::functional::linear(h, w, with_bias ? b : torch::Tensor()).narrow(1, 0, V);
    auto ref = -torch::log_softmax(logits.to(torch::kFloat64), 1).gather(1, target.unsqueeze(1)).squeeze(1);
    auto got = head_nll(h, w, with_bias ? b : torch::Tensor(), target, V);
    ASSERT_EQ(got.scalar_type(), torch::kFloat64);
    EXPECT_TRUE(torch::allclose(got, ref, 1e-5, 1e-5)) << (got - ref).abs().max().item<double>();
  }
}

TEST(FusedOps, RowLogSumExpChecksItsArguments) {
  EXPECT_THROW(row_logsumexp(torch::zeros({4}), 1), c10::Error);         // not 2-D
  EXPECT_THROW(row_logsumexp(torch::zeros({4, 8}), 9), c10::Error);      // cols > V
  EXPECT_THROW(row_logsumexp(torch::zeros({4, 8}).t(), 2), c10::Error);  // column stride ≠ 1
  auto x = torch::tensor({{0.0, std::log(3.0), 100.0}}, torch::kFloat32);
  EXPECT_NEAR(row_logsumexp(x, 2).item<float>(), std::log(4.0), 1e-6);  // column 2 is never read
  auto y = torch::randn({6, 9});
  auto rows = torch::tensor({4, 0, 4}, torch::kLong);
  EXPECT_TRUE(torch::allclose(row_logsumexp(y, 9, rows), torch::logsumexp(y, 1).index_select(0, rows)));
}

TEST(FusedOps, RowLogSumExpKeepsAGradientPath) {
  auto x = torch::randn({3, 5}, torch::requires_grad());
  row_logsumexp(x, 5).sum().backward();
  EXPECT_TRUE(torch::allclose(x.grad(), torch::softmax(x.detach(), 1)));
}

// lm_cross_entropy (the autograd Function) against F::cross_entropy on the fp32 narrow: loss and the
// gradient of the padded logits (zero in the padded columns), float32 and bf16 logits, upstream gradient ≠ 1;
// with_bias: a float32 head bias added inside, and its gradient (zero in the padded columns).
void check_lm_cross_entropy(torch::Device dev, torch::ScalarType dtype, int64_t N, int64_t V, int64_t V_pad, double tol,
                            bool with_bias = false) {
  torch::manual_seed(11);
  auto base = (3 * torch::randn({N, V_pad})).to(dtype);
  auto target = torch::randint(0, V, {N}, torch::kLong);
  target[0] = V - 1;  // the last real column is a target too
  auto a = base.to(dev).requires_grad_(true), b = base.to(dev).requires_grad_(true);
  auto bias0 = 2 * torch::randn({V_pad});
  torch::Tensor bias_a, bias_b;
  if (with_bias) {
    bias_a = bias0.to(dev).requires_grad_(true);
    bias_b = bias0.to(dev).requires_grad_(true);
  }
  auto t = target.to(dev);
  auto got = lm_cross_entropy(a, t, V, bias_a);
  auto ref = lm_cross_entropy_reference(b, t, V, bias_b);
  ASSERT_EQ(got.scalar_type(), torch::kFloat32);
  ASSERT_EQ(got.dim(), 0);
  EXPECT_NEAR(got.item<double>(), ref.item<double>(), 1e-5 * std::abs(ref.item<double>()));
  (2.5 * got).backward();
  (2.5 * ref).backward();
  ASSERT_EQ(a.grad().scalar_type(), dtype);
  auto ga = a.grad().to(torch::kCPU, torch::kFloat32), gb = b.grad().to(torch::kCPU, torch::kFloat32);
  EXPECT_EQ(ga.narrow(1, V, V_pad - V).abs().max().item<float>(), 0.f);
  EXPECT_TRUE(torch::allclose(ga, gb, tol, tol * 2.5 / N)) << (ga - gb).abs().max().item<double>();
  // Rows sum to zero (Σ_j softmax − 1), up to the output dtype's rounding of entries whose |·| sum to ≤ 2·2.5/N.
  const double row_tol = (dtype == torch::kFloat32 ? 1e-5 : 2e-2) * 2.5 / N;
  EXPECT_LT(ga.to(torch::kFloat64).sum(1).abs().max().item<double>(), row_tol);
  if (!with_bias) return;
  // ∂bias = Σ over rows of ∂logits (the reference rounds it to the logits' dtype on its way back).
  ASSERT_TRUE(bias_a.grad().defined());
  ASSERT_EQ(bias_a.grad().scalar_type(), torch::kFloat32);
  auto gba = bias_a.grad().to(torch::kCPU), gbb = bias_b.grad().to(torch::kCPU);
  EXPECT_EQ(gba.narrow(0, V, V_pad - V).abs().max().item<float>(), 0.f);
  // A column sums N entries of ≤ 2.5/N each: an absolute slack of a few roundings of those sums.
  EXPECT_TRUE(torch::allclose(gba, gbb, tol, 10 * tol * 2.5 / N)) << (gba - gbb).abs().max().item<double>();
  EXPECT_TRUE(torch::allclose(gba, ga.sum(0), tol, 1e-2 * 2.5)) << (gba - ga.sum(0)).abs().max().item<double>();
}

TEST(FusedOps, LmCrossEntropyEqualsCrossEntropyOnTheNarrowedLogits) {
  if (!fused_ce_enabled()) GTEST_SKIP() << "AOBENCH_FUSED_CE=0";
  check_lm_cross_entropy(torch::kCPU, torch::kFloat32, 37, 50, 64, 1e-5);
  check_lm_cross_entropy(torch::kCPU, torch::kBFloat16, 29, 61, 64, 1e-2);
  check_lm_cross_entropy(torch::kCPU, torch::kFloat32, 37, 50, 64, 1e-5, /*with_bias=*/true);
  check_lm_cross_entropy(torch::kCPU, torch::kBFloat16, 29, 61, 64, 1e-2, /*with_bias=*/true);
  EXPECT_THROW(lm_cross_entropy(torch::zeros({4, 8}), torch::zeros({3}, torch::kLong), 8), c10::Error);
  EXPECT_THROW(lm_cross_entropy(torch::zeros({4, 8}), torch::zeros({4}, torch::kLong), 9), c10::Error);
  EXPECT_THROW(lm_cross_entropy(torch::zeros({4, 8}), torch::zeros({4}, torch::kInt), 8), c10::Error);
  EXPECT_THROW(lm_cross_entropy(torch::zeros({4, 8}), torch::zeros({4}, torch::kLong), 8, torch::zeros({7})),
               c10::Error);
  if (torch::cuda::is_available()) {  // a bias on another device than the logits
    EXPECT_THROW(lm_cross_entropy(torch::zeros({4, 8}, torch::kCUDA), torch::zeros({4}, torch::kLong).cuda(), 8,
                                  torch::zeros({8})),
                 c10::Error);
  }
}

// The bias is the head's: the loss with it equals the loss of logits + bias (float32, where the bias is not
// rounded), an independent expression of what the bias means.
TEST(FusedOps, LmCrossEntropyBiasIsAddedToTheLogits) {
  torch::manual_seed(5);
  auto logits = torch::randn({23, 40}), bias = torch::randn({40}), t = torch::randint(0, 33, {23}, torch::kLong);
  const double with = lm_cross_entropy(logits, t, 33, bias).item<double>();
  const double added = torch::nn::functional::cross_entropy((logits + bias).narrow(1, 0, 33), t).item<double>();
  EXPECT_NEAR(with, added, 1e-6 * std::abs(added));
}

TEST(FusedOps, CudaLmCrossEntropyMatchesReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  if (!fused_ce_enabled()) GTEST_SKIP() << "AOBENCH_FUSED_CE=0";
  // Aligned rows (V_pad multiple of 64, the head's padding), an odd width (scalar path), float32 / bf16 / half;
  // with a bias: row bands that do not divide N (300 rows) and the per-row fallback (odd widths).
  for (bool with_bias : {false, true}) {
    check_lm_cross_entropy(torch::kCUDA, torch::kFloat32, 300, 50257, 50304, 1e-5, with_bias);
    check_lm_cross_entropy(torch::kCUDA, torch::kBFloat16, 300, 50257, 50304, 1e-2, with_bias);
    check_lm_cross_entropy(torch::kCUDA, torch::kHalf, 77, 1000, 1003, 2e-3, with_bias);
    check_lm_cross_entropy(torch::kCUDA, torch::kBFloat16, 5, 7, 9, 1e-2, with_bias);
  }
}

// linear_bf16_operands against the float32 linear of the bf16-rounded operands (the same products, so only
// the accumulation order differs), forward and every gradient; within bf16 rounding of the plain fp32
// linear; and the bias not rounded to bf16 (1 + 10⁻³·b would be off by up to 2⁻⁸ in bf16).
TEST(FusedOps, CudaLinearBf16OperandsIsTheLinearOfRoundedOperands) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(13);
  const auto opt = torch::TensorOptions().device(torch::kCUDA);
  auto x0 = torch::randn({1025, 128}, opt), w0 = 0.02 * torch::randn({4608, 128}, opt), b0 = torch::randn({4608}, opt);
  auto g = torch::randn({1025, 4608}, opt);
  auto round = [](const torch::Tensor& t) { return t.to(torch::kBFloat16).to(torch::kFloat32); };
  auto x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
  auto y = linear_bf16_operands(x, w, b);
  ASSERT_EQ(y.scalar_type(), torch::kFloat32);
  (y * g).sum().backward();
  const auto want = torch::nn::functional::linear(round(x0), round(w0), b0);
  EXPECT_TRUE(torch::allclose(y.detach(), want, 1e-4, 1e-4)) << (y.detach() - want).abs().max().item<double>();
  EXPECT_TRUE(torch::allclose(x.grad(), round(g).matmul(round(w0)), 1e-4, 1e-4));
  EXPECT_TRUE(torch::allclose(w.grad(), round(g).t().matmul(round(x0)), 1e-3, 1e-3));
  EXPECT_TRUE(torch::allclose(b.grad(), g.sum(0), 1e-4, 1e-3));
  const auto plain = torch::nn::functional::linear(x0, w0, b0);
  EXPECT_LT((y.detach() - plain).abs().max().item<double>(), 1e-2);
  auto no_bias = linear_bf16_operands(x0, w0, torch::Tensor());
  EXPECT_TRUE(torch::allclose(no_bias + b0, y.detach(), 1e-5, 1e-5));
  const auto near_one = 1 + 1e-3 * b0;
  EXPECT_LT((linear_bf16_operands(x0, w0, near_one) - no_bias - near_one).abs().max().item<double>(), 1e-5);
  EXPECT_THROW(linear_bf16_operands(x0.cpu(), w0.cpu(), torch::Tensor()), c10::Error);
}

// bias_grad's kernel against the float64 column sums: row counts off the 128-row slices, one row, none, a
// width that is not a multiple of 256, the widths of GPT-2 small; the same bits on a second call. A width the
// kernel does not take (12) goes to the fp32 sum.
TEST(FusedOps, CudaBiasGradIsTheColumnSum) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(17);
  const auto opt = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  for (auto [M, N] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 8}, {0, 16}, {129, 24}, {1000, 264}, {4097, 768}, {16384, 3072}, {300, 12}}) {
    auto g = 3 * torch::randn({M, N}, opt) + 1;  // a mean ≠ 0, so the sums grow with M
    EXPECT_EQ(column_sum_kernel_takes(g), N % 8 == 0) << M << " × " << N;
    const auto got = bias_grad(g);
    ASSERT_EQ(got.scalar_type(), torch::kFloat32);
    ASSERT_EQ(got.sizes(), torch::IntArrayRef({N}));
    const auto want = g.to(torch::kFloat64).sum(0);
    const double tol = 1e-6 * (M + 1) * 4;  // fp32 additions of terms ≲ 13: far below one term's bf16 step
    EXPECT_LT((got.to(torch::kFloat64) - want).abs().max().item<double>(), tol) << M << " × " << N;
    EXPECT_TRUE(torch::equal(got, bias_grad(g))) << "not the same bits twice, " << M << " × " << N;
  }
  EXPECT_FALSE(column_sum_kernel_takes(torch::zeros({4, 12}, opt)));
  EXPECT_FALSE(column_sum_kernel_takes(torch::zeros({4, 16}, opt).t()));
  EXPECT_FALSE(column_sum_kernel_takes(torch::zeros({4, 16}, opt.dtype(torch::kFloat32))));
}

// linear2d's training Function under bf16 autocast against autocast's addmm (perf.fused_linear off): the same
// output bits, ∂x within bf16 GEMM noise, ∂w and ∂b at least as close to the float64 products of the bf16
// operands as autocast's, and both written in the parameters' fp32. The Function is taken only with a gradient
// recorded, on CUDA, under bf16 autocast.
TEST(FusedOps, CudaTrainingLinearMatchesAutocastAddmm) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(19);
  const auto opt = torch::TensorOptions().device(torch::kCUDA);
  const int64_t M = 1000, K = 192, N = 264;
  const auto x0 = torch::randn({M, K}, opt), w0 = 0.05 * torch::randn({N, K}, opt), b0 = torch::randn({N}, opt);
  const auto up = torch::randn({M, N}, opt);
  // forward(x, w, b) under bf16 autocast on fresh leaves, then the backward of Σ up·y: {y, ∂x, ∂w, ∂b}.
  auto run = [&](bool with_bias, const auto& forward) {
    auto x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    torch::Tensor y;
    {
      AutocastScope autocast(true);
      y = forward(x, w, with_bias ? b : torch::Tensor());
    }
    (y.to(torch::kFloat32) * up).sum().backward();
    return std::vector<torch::Tensor>{y.detach(), x.grad(), w.grad(), with_bias ? b.grad() : torch::Tensor()};
  };
  auto through_linear2d = [](bool fused) {  // linear2d with perf.fused_linear set to `fused`
    return [fused](const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
      set_fused_linear_enabled(fused);
      EXPECT_EQ(linear2d_training_applies(x, w, b), fused);
      auto y = linear2d(x, w, b);
      set_fused_linear_enabled(true);
      return y;
    };
  };
  auto f64 = [](const torch::Tensor& t) { return t.to(torch::kBFloat16).to(torch::kFloat64); };
  const auto g64 = f64(up.to(torch::kBFloat16));  // the upstream gradient arrives in y's bf16
  const auto want_w = g64.t().matmul(f64(x0)), want_b = g64.sum(0);
  auto err = [](const torch::Tensor& got, const torch::Tensor& want) {
    return (got.to(torch::kFloat64) - want).abs().max().item<double>();
  };
  for (bool with_bias : {true, false}) {
    const auto fused = run(with_bias, through_linear2d(true)), plain = run(with_bias, through_linear2d(false));
    ASSERT_EQ(fused[0].scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::equal(fused[0], plain[0]));
    EXPECT_TRUE(torch::allclose(fused[1], plain[1], 1e-2, 1e-2)) << (fused[1] - plain[1]).abs().max().item<double>();
    EXPECT_EQ(fused[2].scalar_type(), torch::kFloat32);
    EXPECT_LT(err(fused[2], want_w), 1e-3) << "fp32 accumulation of 1000 products";
    EXPECT_LE(err(fused[2], want_w), err(plain[2], want_w));
    if (!with_bias) continue;
    EXPECT_EQ(fused[3].scalar_type(), torch::kFloat32);
    EXPECT_LT(err(fused[3], want_b), 1e-3);
    EXPECT_LE(err(fused[3], want_b), err(plain[3], want_b));
  }
  // With a GELU (the MLP's c_fc): the output bits of torch::gelu of autocast's addmm; the gradients within bf16
  // rounding of autocast's (whose ∂w, ∂b were rounded to bf16).
  for (auto act : {DecodeActivation::gelu, DecodeActivation::gelu_tanh}) {
    const auto fused =
        run(true, [act](const auto& x, const auto& w, const auto& b) { return linear2d_training(x, w, b, act); });
    const auto plain =
        run(true, [act](const auto& x, const auto& w, const auto& b) { return decode_linear_reference(x, w, b, act); });
    EXPECT_TRUE(torch::equal(fused[0], plain[0]));
    for (int i = 1; i < 4; ++i)
      EXPECT_TRUE(torch::allclose(fused[i], plain[i].to(torch::kFloat32), 1e-2, 1e-2))
          << "gradient " << i << ", " << (fused[i] - plain[i]).abs().max().item<double>();
  }
  // Not taken without a gradient, on the CPU, or without autocast.
  {
    AutocastScope autocast(true);
    EXPECT_FALSE(linear2d_training_applies(x0, w0, b0));
    torch::NoGradGuard no_grad;
    EXPECT_FALSE(linear2d_training_applies(x0.clone().requires_grad_(), w0, b0));
  }
  EXPECT_FALSE(linear2d_training_applies(x0, w0.clone().requires_grad_(), b0));
  EXPECT_FALSE(linear2d_training_applies(x0.cpu(), w0.cpu().requires_grad_(), b0.cpu()));
}

// GELU's backward with the column sums against at::gelu_backward and bias_grad of its result: g_pre within one
// bf16 rounding of ATen's (the same float expressions; the compilers may contract them differently), the sums
// the bits of bias_grad(g_pre), both GELU forms, rows off the 128-row slices.
TEST(FusedOps, CudaGeluBackwardBiasGradIsAtenGeluBackwardThenBiasGrad) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(23);
  const auto opt = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  for (auto [M, N] : std::vector<std::pair<int64_t, int64_t>>{{1, 8}, {1000, 264}, {4097, 3072}}) {
    const auto g_h = torch::randn({M, N}, opt), pre = 3 * torch::randn({M, N}, opt);
    for (bool tanh_approx : {false, true}) {
      const auto [g_pre, sums] = gelu_backward_bias_grad(g_h, pre, tanh_approx);
      const auto want = at::gelu_backward(g_h, pre, tanh_approx ? "tanh" : "none");
      ASSERT_EQ(g_pre.scalar_type(), torch::kBFloat16);
      const auto diff = (g_pre.to(torch::kFloat32) - want.to(torch::kFloat32)).abs();
      EXPECT_TRUE((diff <= want.to(torch::kFloat32).abs() / 128 + 1e-20).all().item<bool>())
          << M << " × " << N << ": " << diff.max().item<double>();
      EXPECT_GT(torch::eq(g_pre, want).to(torch::kFloat64).mean().item<double>(), 0.9);
      EXPECT_TRUE(torch::equal(sums, bias_grad(g_pre))) << M << " × " << N;
    }
  }
  EXPECT_THROW(gelu_backward_bias_grad(torch::zeros({4, 16}, opt), torch::zeros({4, 8}, opt), false), c10::Error);
}

// add_layer_norm's training form (autograd Function, backward kernel) against the LibTorch expressions on the
// same GPU: s, h and the gradients of x, y, weight, bias, with both outputs used and with only h used.
TEST(FusedOps, CudaAddLayerNormTrainingMatchesReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(12);
  const auto dev = torch::Device(torch::kCUDA);
  // 3 × 37 rows: one row per warp, a last block part empty; 4 × 5003 rows (d = 768, bf16): several rows per
  // warp, the training shape's layout.
  for (int64_t d : {128, 768, 1024}) {
    for (auto dt : {torch::kBFloat16, torch::kFloat32, torch::kHalf}) {
      for (auto [use_s, B, T] : {std::tuple{true, 3, 37}, std::tuple{false, 3, 37}, std::tuple{true, 4, 5003}}) {
        if (T == 5003 && (d != 768 || dt != torch::kBFloat16)) continue;
        auto x0 = torch::randn({B, T, d}, dev), y0 = torch::randn({B, T, d}, dev).to(dt);
        auto w0 = 1 + 0.1 * torch::randn({d}, dev), b0 = 0.1 * torch::randn({d}, dev);
        auto rs = torch::randn({B, T, d}, dev), rh = torch::randn({B, T, d}, dev);
        auto run = [&](bool fused) {
          set_fused_ln_training_enabled(fused);
          auto x = x0.clone().requires_grad_(true), y = y0.clone().requires_grad_(true);
          auto w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
          auto [s, h] = add_layer_norm(x, y, w, b, 1e-5);
          EXPECT_EQ(h.scalar_type(), dt);
          auto loss = (h.to(torch::kFloat32) * rh).sum();
          if (use_s) loss = loss + (s * rs).sum();
          loss.backward();
          return std::vector<torch::Tensor>{
              s.detach(), h.detach().to(torch::kFloat32), x.grad(), y.grad().to(torch::kFloat32), w.grad(), b.grad()};
        };
        const auto ref = run(false);
        const auto got = run(true);
        set_fused_ln_training_enabled(true);
        const double tol = dt == torch::kFloat32 ? 1e-4 : dt == torch::kHalf ? 5e-3 : 3e-2;
        const char* what[] = {"s", "h", "dx", "dy", "dw", "db"};
        for (size_t i = 0; i < ref.size(); ++i) {
          const double scale = ref[i].abs().max().item<double>();
          const double err = (got[i] - ref[i]).abs().max().item<double>();
          EXPECT_LE(err, tol * scale + 1e-6) << what[i] << " d=" << d << " " << dt << " use_s=" << use_s
                                             << " rows=" << B * T << ": max |Δ| " << err << " of " << scale;
        }
      }
    }
  }
}

TEST(FusedOps, CudaRowLogSumExpMatchesCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(7);
  const double inf = std::numeric_limits<double>::infinity();
  for (auto dt : {torch::kBFloat16, torch::kFloat16, torch::kFloat32}) {
    // (rows, row width, columns read, column offset): the offset makes rows start off 16-byte boundaries.
    const int64_t shapes[][4] = {{1, 1, 1, 0},      {5, 7, 7, 0},       {33, 50304, 50257, 0},
                                 {9, 1000, 999, 3}, {4, 4099, 4000, 1}, {2, 70000, 70000, 0}};
    for (auto& sh : shapes) {
      auto full = (torch::randn({sh[0], sh[1] + sh[3]}) * 8).to(dt);
      auto x = full.narrow(1, sh[3], sh[1]);
      auto ref = torch::logsumexp(x.narrow(1, 0, sh[2]).to(torch::kFloat64), 1);
      auto got = row_logsumexp(x.cuda(), sh[2]).cpu().to(torch::kFloat64);
      EXPECT_TRUE(torch::allclose(got, ref, 1e-5, 1e-4))
          << dt << " " << sh[0] << "x" << sh[1] << ": max err " << (got - ref).abs().max().item<double>();
      auto rows = torch::randint(0, sh[0], {2 * sh[0] + 1}, torch::kLong);  // repeats allowed
      auto got_rows = row_logsumexp(x.cuda(), sh[2], rows.cuda()).cpu().to(torch::kFloat64);
      EXPECT_TRUE(torch::allclose(got_rows, ref.index_select(0, rows), 1e-5, 1e-4)) << dt << " rows";
    }
    // −inf entries and an all −inf row; a NaN anywhere makes the row NaN.
    auto x = torch::randn({4, 300}).to(dt);
    x.index_put_({0, torch::indexing::Slice(0, 150)}, -inf);
    x[1].fill_(-inf);
    x.index_put_({2, 299}, std::nan(""));
    x.index_put_({3, 5}, std::nan(""));
    auto got = row_logsumexp(x.cuda(), 300).cpu().to(torch::kFloat64);
    auto ref = torch::logsumexp(x.to(torch::kFloat64), 1);
    EXPECT_NEAR(got[0].item<double>(), ref[0].item<double>(), 1e-4);
    EXPECT_EQ(got[1].item<double>(), -inf);
    EXPECT_TRUE(std::isnan(got[2].item<double>()));
    EXPECT_TRUE(std::isnan(got[3].item<double>()));
  }
}

TEST(FusedOps, CudaHeadNllMatchesCpuUnderAutocast) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(11);
  const int64_t N = 10000, d = 64, V = 5000, V_pad = 5056;  // N > one 8192-row chunk
  auto h = torch::randn({N, d}), w = torch::randn({V_pad, d}) * 0.2, b = torch::randn({V_pad});
  auto target = torch::randint(0, V, {N}, torch::kLong);
  auto ref = head_nll(h, w, b, target, V);  // CPU fp32
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  auto got = head_nll(h.cuda(), w.cuda(), b.cuda(), target.cuda(), V).cpu();
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  at::autocast::clear_cache();
  // bf16 logits: a few 1e-2 nats per row at most, unbiased on average.
  EXPECT_LT((got - ref).abs().max().item<double>(), 0.1);
  EXPECT_LT(std::abs((got - ref).mean().item<double>()), 2e-3);
}

TEST(FusedOps, AddLayerNormIsTheResidualAddThenLayerNorm) {
  torch::manual_seed(5);
  auto x = torch::randn({3, 7, 24}), y = torch::randn({3, 7, 24}), w = torch::randn({24}), b = torch::randn({24});
  for (bool with_bias : {false, true}) {
    auto [s, h] = add_layer_norm(x, y, w, with_bias ? b : torch::Tensor(), 1e-5);
    EXPECT_TRUE(torch::equal(s, x + y));
    EXPECT_TRUE(torch::allclose(h, torch::layer_norm(x + y, {24}, w, with_bias ? b : torch::Tensor(), 1e-5)));
  }
  EXPECT_THROW(add_layer_norm(x, y.narrow(2, 0, 12), w, b, 1e-5), c10::Error);
}

TEST(FusedOps, CudaAddLayerNormMatchesCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(13);
  for (auto dt : {torch::kBFloat16, torch::kFloat32}) {
    // warp kernel: 384, 768, 1024, a block a row up to 8 rows per SM (3, 300), eight rows a block past that (2000)
    for (int64_t d : {64, 384, 768, 1000, 1024, 1600, 4096})
      for (int64_t rows : {3, 300, 2000})
        for (bool with_bias : {false, true}) {
          auto x = torch::randn({rows, d}) * 3 + 1, y = torch::randn({rows, d}).to(dt);
          auto w = torch::randn({d}), b = with_bias ? torch::randn({d}) : torch::Tensor();
          auto s_ref = x + y.to(torch::kFloat32);
          auto h_ref = torch::layer_norm(s_ref.to(torch::kFloat64), {d}, w.to(torch::kFloat64),
                                         with_bias ? b.to(torch::kFloat64) : torch::Tensor(), 1e-5);
          auto [s, h] = add_layer_norm(x.cuda(), y.cuda(), w.cuda(), with_bias ? b.cuda() : torch::Tensor(), 1e-5);
          ASSERT_EQ(h.scalar_type(), dt);
          EXPECT_TRUE(torch::equal(s.cpu(), s_ref)) << d;          // the same fp32 add
          const double tol = dt == torch::kFloat32 ? 1e-4 : 4e-2;  // bf16 output rounding: 2^-8 relative
          EXPECT_TRUE(torch::allclose(h.cpu().to(torch::kFloat64), h_ref, tol, tol))
              << dt << " d=" << d << " rows=" << rows << " max err "
              << (h.cpu().to(torch::kFloat64) - h_ref).abs().max().item<double>();
        }
  }
}

// s = x + gate·y, h = LayerNorm(s)·scale + shift with per-sequence vectors, written out in float64: what
// add_layer_norm_reference must compute.
std::pair<torch::Tensor, torch::Tensor> adaln_formula(const torch::Tensor& x, const torch::Tensor& y,
                                                      const torch::Tensor& w, const torch::Tensor& b,
                                                      const AdaLNMod& m) {
  auto f = [](const torch::Tensor& t) { return t.defined() ? t.to(torch::kFloat64).cpu() : t; };
  auto s = f(x);
  if (y.defined()) s = s + f(y) * (m.gate.defined() ? f(m.gate).unsqueeze(1) : torch::ones({1}, torch::kFloat64));
  auto h = torch::layer_norm(s, {s.size(-1)}, f(w), f(b), 1e-5);
  if (m.scale.defined()) h = h * f(m.scale).unsqueeze(1);
  if (m.shift.defined()) h = h + f(m.shift).unsqueeze(1);
  return {s, h};
}

TEST(FusedOps, AddLayerNormAppliesTheAdaLNVectors) {
  torch::manual_seed(17);
  const int64_t B = 3, T = 5, d = 16;
  auto x = torch::randn({B, T, d}), y = torch::randn({B, T, d}), w = torch::randn({d}), b = torch::randn({d});
  AdaLNMod m{torch::randn({B, d}), torch::randn({B, d}) + 1, torch::randn({B, d})};
  for (bool with_y : {false, true}) {
    auto yy = with_y ? y : torch::Tensor();
    auto [s, h] = add_layer_norm(x, yy, w, b, 1e-5, m);
    auto [s_ref, h_ref] = adaln_formula(x, yy, w, b, m);
    EXPECT_TRUE(torch::allclose(s.to(torch::kFloat64), s_ref, 1e-6, 1e-6));
    EXPECT_TRUE(torch::allclose(h.to(torch::kFloat64), h_ref, 1e-5, 1e-5));
  }
  EXPECT_THROW(add_layer_norm(x, y, w, b, 1e-5, {torch::randn({B + 1, d}), {}, {}}), c10::Error);
}

// Rotate-half written out per element: out_j = x_j cos θ − x_{j+h} sin θ, out_{j+h} = x_{j+h} cos θ + x_j sin θ.
torch::Tensor rotary_reference(const torch::Tensor& qkv, const torch::Tensor& angles) {
  const int64_t h = qkv.size(4) / 2;
  auto qk = qkv.narrow(2, 0, 2).permute({2, 0, 1, 3, 4}).to(torch::kFloat64);  // (2, B, T, nh, hd)
  auto c = angles.cos().view({1, 1, -1, 1, h}), sn = angles.sin().view({1, 1, -1, 1, h});
  auto x1 = qk.narrow(-1, 0, h), x2 = qk.narrow(-1, h, h);
  return torch::cat({x1 * c - x2 * sn, x2 * c + x1 * sn}, -1);
}

// The tables of RotaryCache for angles (T, hd/2): cos [a, a], sin± [−a, a].
std::pair<torch::Tensor, torch::Tensor> rotary_tables(const torch::Tensor& angles) {
  return {torch::cat({angles, angles}, -1).cos(), torch::cat({-angles, angles}, -1).sin()};
}

TEST(FusedOps, RotaryQkIsRotateHalfOnQAndK) {
  torch::manual_seed(19);
  auto qkv = torch::randn({2, 7, 3, 4, 8});
  auto angles = torch::rand({7, 4}, torch::kFloat64) * 6;
  auto [c, sn] = rotary_tables(angles);
  auto got = rotary_qk(qkv, c.to(torch::kFloat32), sn.to(torch::kFloat32));
  EXPECT_TRUE(torch::allclose(got.to(torch::kFloat64), rotary_reference(qkv, angles), 1e-5, 1e-5));
  EXPECT_THROW(rotary_qk(qkv.narrow(4, 0, 7), c, sn), c10::Error);
}

TEST(FusedOps, CudaAddLayerNormWithAdaLNMatchesCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(23);
  const int64_t B = 4, d = 768;
  auto w = torch::randn({d}), b = torch::randn({d});
  AdaLNMod m{torch::randn({B, d}).to(torch::kBFloat16), (torch::randn({B, d}) + 1).to(torch::kBFloat16),
             torch::randn({B, d}).to(torch::kBFloat16)};
  AdaLNMod mc{m.gate.cuda(), m.scale.cuda(), m.shift.cuda()};
  for (int64_t T : {33, 300})  // 132 rows: a block a row; 1200 (more than 8 a SM): eight rows a block
    for (bool with_y : {false, true}) {
      SCOPED_TRACE(T);
      auto x = torch::randn({B, T, d}), y = torch::randn({B, T, d}).to(torch::kBFloat16);
      auto yy = with_y ? y : torch::Tensor();
      // The kernels' oracle: the LibTorch reference on float64 copies of the inputs.
      auto f = [](const torch::Tensor& t) { return t.defined() ? t.to(torch::kFloat64) : t; };
      auto [s_ref, h_ref] =
          add_layer_norm_reference(f(x), f(yy), f(w), f(b), 1e-5, {f(m.gate), f(m.scale), f(m.shift)});
      at::autocast::set_autocast_enabled(at::kCUDA, true);  // the output dtype without y
      at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
      auto [s, h] = add_layer_norm(x.cuda(), with_y ? y.cuda() : torch::Tensor(), w.cuda(), b.cuda(), 1e-5, mc);
      at::autocast::set_autocast_enabled(at::kCUDA, false);
      ASSERT_EQ(h.scalar_type(), torch::kBFloat16);
      EXPECT_TRUE(torch::allclose(s.cpu().to(torch::kFloat64), s_ref, 1e-5, 1e-5)) << with_y;
      auto err = (h.cpu().to(torch::kFloat64) - h_ref).abs();
      EXPECT_LT((err / (h_ref.abs() + 1)).max().item<double>(), 1.6e-2) << with_y;  // bf16 output rounding
    }
}

TEST(FusedOps, CudaRotaryQkMatchesCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(29);
  auto angles = torch::rand({1024, 32}, torch::kFloat64) * 100;
  auto [c, sn] = rotary_tables(angles);
  auto angles6 = torch::rand({50, 3}, torch::kFloat64) * 100;  // head dim 6: the one-element path
  auto [c6, sn6] = rotary_tables(angles6);
  for (auto dt : {torch::kFloat32, torch::kBFloat16}) {
    const double tol = dt == torch::kFloat32 ? 1e-5 : 3e-2;  // bf16 tables and output
    auto qkv = torch::randn({3, 1024, 3, 12, 64}).to(dt);
    auto got = rotary_qk(qkv.cuda(), c.to(dt).cuda(), sn.to(dt).cuda()).cpu().to(torch::kFloat64);
    auto ref = rotary_qk_reference(qkv.to(torch::kFloat64), c, sn);  // the oracle, in float64
    EXPECT_LT((got - ref).abs().max().item<double>(), tol * (1 + ref.abs().max().item<double>())) << dt;
    auto qkv6 = torch::randn({2, 50, 3, 5, 6}).to(dt);
    auto got6 = rotary_qk(qkv6.cuda(), c6.to(dt).cuda(), sn6.to(dt).cuda()).cpu().to(torch::kFloat64);
    auto ref6 = rotary_qk_reference(qkv6.to(torch::kFloat64), c6, sn6);
    EXPECT_LT((got6 - ref6).abs().max().item<double>(), tol * (1 + ref6.abs().max().item<double>())) << dt;
  }
}

}  // namespace
}  // namespace aobench::common
