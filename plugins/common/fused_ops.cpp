// Implements: plugins/common/fused_ops.h (CPU path and dispatch to the CUDA kernel when it is built).
#include "plugins/common/fused_ops.h"

namespace aobench::common {

#ifdef AOBENCH_FUSED_CUDA
torch::Tensor row_logsumexp_cuda(const torch::Tensor& x, int64_t cols);  // fused_ops_cuda.cu
#endif

torch::Tensor row_logsumexp(const torch::Tensor& x, int64_t cols) {
  TORCH_CHECK(x.dim() == 2 && (x.size(1) <= 1 || x.stride(1) == 1),
              "row_logsumexp: x must be (N, V) with unit column stride, got sizes ", x.sizes(), " strides ",
              x.strides());
  TORCH_CHECK(cols >= 1 && cols <= x.size(1), "row_logsumexp: cols=", cols, " outside [1, ", x.size(1), "]");
#ifdef AOBENCH_FUSED_CUDA
  // The kernel has no backward: a differentiable call takes the LibTorch expression below.
  if (x.is_cuda() && !(torch::GradMode::is_enabled() && x.requires_grad())) return row_logsumexp_cuda(x, cols);
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

}  // namespace aobench::common
