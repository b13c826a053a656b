// Implements: plugins/common/decode_linear.h (the reference, and dispatch to the CUDA kernel when it is built).
#include "plugins/common/decode_linear.h"

#include <ATen/autocast_mode.h>

#include "core/device.h"
#include "plugins/common/kernel_util.h"

namespace aobench::common {

namespace {
EnvSwitch decode_gemm_switch("AOBENCH_DECODE_GEMM");
}  // namespace

bool decode_linear_enabled() { return kernel_switch_on(decode_gemm_switch); }
void set_decode_linear_enabled(bool on) { decode_gemm_switch.set(on); }

bool decode_linear_supports(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  if (!decode_linear_enabled() || !x.is_cuda() || x.dim() != 2 || w.dim() != 2) return false;
  const auto bf16 = torch::kBFloat16;
  const int64_t R = x.size(0), K = x.size(1), N = w.size(0);
  const bool autocast_ok =
      !at::autocast::is_autocast_enabled(at::kCUDA) || at::autocast::get_autocast_dtype(at::kCUDA) == bf16;
  return !records_grad({x, w, b}) && autocast_ok && x.scalar_type() == bf16 && w.scalar_type() == bf16 &&
         w.device() == x.device() && R >= 1 && R <= kDecodeLinearMaxRows && w.size(1) == K && K % 32 == 0 &&
         N % 8 == 0 && N >= 8 && N <= 16384 && x.is_contiguous() && w.is_contiguous() && aligned(x, 16) &&
         aligned(w, 16) &&
         (!b.defined() ||
          (b.scalar_type() == bf16 && b.dim() == 1 && b.size(0) == N && b.is_contiguous() && b.device() == x.device()));
}

torch::Tensor decode_linear_reference(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                      DecodeActivation act) {
  auto y = torch::nn::functional::linear(x, w, b);  // (R, N)
  switch (act) {
    case DecodeActivation::gelu:
      return torch::gelu(y, "none");
    case DecodeActivation::gelu_tanh:
      return torch::gelu(y, "tanh");
    case DecodeActivation::none:
      break;
  }
  return y;
}

torch::Tensor decode_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                            DecodeActivation act) {
#ifdef AOBENCH_FUSED_CUDA
  if (decode_linear_supports(x, w, b)) return decode_linear_cuda(x, w, b, act, decode_pdl());
#endif
  return decode_linear_reference(x, w, b, act);
}

}  // namespace aobench::common
