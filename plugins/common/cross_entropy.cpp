// Implements: plugins/common/cross_entropy.h (the LibTorch expressions, and dispatch to the CUDA kernels when
// they are built).
#include "plugins/common/cross_entropy.h"

#include <algorithm>

#include "core/device.h"
#include "plugins/common/kernel_util.h"

namespace aobench::common {

torch::Tensor row_logsumexp(const torch::Tensor& x, int64_t cols, const torch::Tensor& rows) {
  TORCH_CHECK(x.dim() == 2 && (x.size(1) <= 1 || x.stride(1) == 1),
              "row_logsumexp: x must be (N, V) with unit column stride, got sizes ", x.sizes(), " strides ",
              x.strides());
  TORCH_CHECK(cols >= 1 && cols <= x.size(1), "row_logsumexp: cols=", cols, " outside [1, ", x.size(1), "]");
  TORCH_CHECK(!rows.defined() || rows.dim() == 1, "row_logsumexp: rows must be 1-D, got ", rows.sizes());
#ifdef AOBENCH_FUSED_CUDA
  // The kernel has no backward: a differentiable call takes the LibTorch expression below.
  if (x.is_cuda() && !records_grad({x})) return row_logsumexp_cuda(x, cols, rows);
#endif
  const auto& sel = rows.defined() ? x.index_select(0, rows) : x;
  return torch::logsumexp(sel.narrow(1, 0, cols).to(torch::kFloat32), 1);
}

torch::Tensor head_nll(const torch::Tensor& h, const torch::Tensor& weight, const torch::Tensor& bias,
                       const torch::Tensor& targets, int64_t vocab) {
  TORCH_CHECK(h.dim() == 2 && targets.dim() == 1 && targets.size(0) == h.size(0), "head_nll: h ", h.sizes(),
              " must be (N, d) and targets ", targets.sizes(), " (N)");
  torch::NoGradGuard no_grad;
  const int64_t N = h.size(0), chunk = 8192;
  auto nll = torch::empty({N}, h.options().dtype(torch::kFloat64));
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t n = std::min(chunk, N - r0);
    auto lg = torch::nn::functional::linear(h.narrow(0, r0, n), weight, bias);  // (n, V_pad)
    auto lse = row_logsumexp(lg, vocab);                                        // (n) fp32
    auto picked = lg.gather(1, targets.narrow(0, r0, n).unsqueeze(1)).squeeze(1).to(torch::kFloat32);
    nll.narrow(0, r0, n).copy_(lse - picked);
  }
  return nll;
}

namespace {
EnvSwitch fused_ce_switch("AOBENCH_FUSED_CE");
}  // namespace

bool fused_ce_enabled() { return fused_ce_switch.on(); }
void set_fused_ce_enabled(bool on) { fused_ce_switch.set(on); }

namespace {
// logits + bias in fp32, the bias rounded to the logits' dtype first (the fused kernels' sum); logits as
// they are without a bias.
torch::Tensor biased(const torch::Tensor& logits, const torch::Tensor& bias) {
  if (!bias.defined()) return logits;
  return logits.to(torch::kFloat32) + bias.to(logits.scalar_type()).to(torch::kFloat32);
}
}  // namespace

torch::Tensor lm_cross_entropy_reference(const torch::Tensor& logits, const torch::Tensor& targets, int64_t vocab,
                                         const torch::Tensor& bias) {
  return torch::nn::functional::cross_entropy(biased(logits, bias).narrow(1, 0, vocab).to(torch::kFloat32), targets);
}

namespace {
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Inputs: logits, bias?, targets + vocab. With z = logits + bias: forward mean(lse(z) − z[target]) with lse
// from row_logsumexp (fp32 statistics, one read of the logits). Backward: ∂/∂logits[i, j] = (exp(z[i, j] −
// lse[i]) − [j = t[i]])·g/N for j < vocab, 0 beyond; ∂/∂bias = Σᵢ ∂/∂logits[i, ·].
struct LmCrossEntropy : torch::autograd::Function<LmCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits,
                               const std::optional<torch::Tensor>& bias, const torch::Tensor& targets, int64_t vocab) {
    const torch::Tensor b = bias.value_or(torch::Tensor());
    torch::Tensor lse;  // (N) fp32
#ifdef AOBENCH_FUSED_CUDA
    if (logits.is_cuda()) lse = row_logsumexp_cuda(logits, vocab, {}, b);
#endif
    if (!lse.defined()) lse = row_logsumexp(biased(logits, b), vocab);
    torch::Tensor picked = logits.gather(1, targets.unsqueeze(1)).squeeze(1).to(torch::kFloat32);
    if (b.defined()) picked = picked + b.to(logits.scalar_type()).to(torch::kFloat32).index_select(0, targets);
    ctx->save_for_backward({logits, b, targets, lse});
    ctx->saved_data["vocab"] = vocab;
    return (lse - picked).mean();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &logits = saved[0], &bias = saved[1], &targets = saved[2], &lse = saved[3];
    const int64_t vocab = ctx->saved_data["vocab"].toInt(), N = logits.size(0);
    const torch::Tensor g = grad_out[0].to(torch::kFloat32) / double(std::max<int64_t>(N, 1));  // 0-dim, device
#ifdef AOBENCH_FUSED_CUDA
    if (logits.is_cuda()) {
      auto [grad, grad_bias] = lm_cross_entropy_backward_cuda(logits, bias, targets, lse, g, vocab);
      return {grad, grad_bias, {}, {}};
    }
#endif
    auto p = torch::exp(biased(logits, bias).narrow(1, 0, vocab).to(torch::kFloat32) - lse.unsqueeze(1));  // softmax
    p.scatter_add_(1, targets.unsqueeze(1), -torch::ones({N, 1}, p.options()));
    auto grad = torch::zeros_like(logits);
    grad.narrow(1, 0, vocab).copy_(p * g);
    torch::Tensor grad_bias;
    if (bias.defined()) {
      grad_bias = torch::zeros_like(bias);
      grad_bias.narrow(0, 0, vocab).copy_((p * g).sum(0));
    }
    return {grad, grad_bias, {}, {}};
  }
};
}  // namespace

torch::Tensor lm_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets, int64_t vocab,
                               const torch::Tensor& bias) {
  TORCH_CHECK(logits.dim() == 2 && (logits.size(1) <= 1 || logits.stride(1) == 1) && targets.dim() == 1 &&
                  targets.size(0) == logits.size(0) && targets.scalar_type() == torch::kLong,
              "lm_cross_entropy: logits must be (N, V) with unit column stride and targets (N) int64, got ",
              logits.sizes(), " and ", targets.sizes(), " ", targets.scalar_type());
  TORCH_CHECK(vocab >= 1 && vocab <= logits.size(1), "lm_cross_entropy: vocab=", vocab, " outside [1, ", logits.size(1),
              "]");
  TORCH_CHECK(
      !bias.defined() || (bias.dim() == 1 && bias.size(0) == logits.size(1) && bias.device() == logits.device()),
      "lm_cross_entropy: bias ", bias.sizes(), " must be (", logits.size(1), ") on the logits' device ",
      logits.device());
  if (!fused_ce_enabled()) return lm_cross_entropy_reference(logits, targets, vocab, bias);
  return LmCrossEntropy::apply(logits, optional_tensor(bias), targets, vocab);
}

}  // namespace aobench::common
