// Implements: plugins/common/fused_ops.h (CPU path and dispatch to the CUDA kernel when it is built).
#include "plugins/common/fused_ops.h"

namespace aobench::common {

#ifdef AOBENCH_FUSED_CUDA
// fused_ops_cuda.cu
torch::Tensor row_logsumexp_cuda(const torch::Tensor& x, int64_t cols);
bool add_layer_norm_cuda_supports(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& weight,
                                  const torch::Tensor& bias);
std::pair<torch::Tensor, torch::Tensor> add_layer_norm_cuda(const torch::Tensor& x, const torch::Tensor& y,
                                                            const torch::Tensor& weight,
                                                            const torch::Tensor& bias, double eps);
#endif

namespace {
bool needs_grad(std::initializer_list<torch::Tensor> ts) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const auto& t : ts)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}
}  // namespace

torch::Tensor row_logsumexp(const torch::Tensor& x, int64_t cols) {
  TORCH_CHECK(x.dim() == 2 && (x.size(1) <= 1 || x.stride(1) == 1),
              "row_logsumexp: x must be (N, V) with unit column stride, got sizes ", x.sizes(), " strides ",
              x.strides());
  TORCH_CHECK(cols >= 1 && cols <= x.size(1), "row_logsumexp: cols=", cols, " outside [1, ", x.size(1), "]");
#ifdef AOBENCH_FUSED_CUDA
  // The kernel has no backward: a differentiable call takes the LibTorch expression below.
  if (x.is_cuda() && !needs_grad({x})) return row_logsumexp_cuda(x, cols);
#endif
  return torch::logsumexp(x.narrow(1, 0, cols).to(torch::kFloat32), 1);
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
    auto lg = torch::nn::functional::linear(h.narrow(0, r0, n), weight, bias);           // (n, V_pad)
    auto lse = row_logsumexp(lg, vocab);                                                 // (n) fp32
    auto picked = lg.gather(1, targets.narrow(0, r0, n).unsqueeze(1)).squeeze(1).to(torch::kFloat32);
    nll.narrow(0, r0, n).copy_(lse - picked);
  }
  return nll;
}

std::pair<torch::Tensor, torch::Tensor> add_layer_norm(const torch::Tensor& x, const torch::Tensor& y,
                                                       const torch::Tensor& weight, const torch::Tensor& bias,
                                                       double eps) {
  TORCH_CHECK(x.sizes() == y.sizes() && x.size(-1) == weight.size(0), "add_layer_norm: x ", x.sizes(), ", y ",
              y.sizes(), " and weight ", weight.sizes(), " do not match");
#ifdef AOBENCH_FUSED_CUDA
  if (x.is_cuda() && !needs_grad({x, y, weight, bias}) && add_layer_norm_cuda_supports(x, y, weight, bias))
    return add_layer_norm_cuda(x, y, weight, bias, eps);
#endif
  auto s = x + y;  // fp32 under autocast (x is fp32)
  auto h = torch::layer_norm(s, {weight.size(0)}, weight, bias, eps);
  return {s, h.to(y.scalar_type())};
}

}  // namespace aobench::common
