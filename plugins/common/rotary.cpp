// Implements: plugins/common/rotary.h.
#include "plugins/common/rotary.h"

#include "plugins/common/kernel_util.h"

namespace aobench::common {

torch::Tensor rotary_qk(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin_signed) {
  TORCH_CHECK(qkv.dim() == 5 && qkv.size(2) == 3 && qkv.size(4) % 2 == 0 && cos.sizes() == sin_signed.sizes() &&
                  cos.size(0) == qkv.size(1) && cos.size(1) == qkv.size(4),
              "rotary_qk: qkv must be (B, T, 3, nh, hd) and the tables (T, hd), got ", qkv.sizes(), " and ",
              cos.sizes());
#ifdef AOBENCH_FUSED_CUDA
  if (qkv.is_cuda() && !records_grad({qkv}) && qkv.is_contiguous()) return rotary_qk_cuda(qkv, cos, sin_signed);
#endif
  return rotary_qk_reference(qkv, cos, sin_signed);
}

torch::Tensor rotary_qk_reference(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin_signed) {
  auto qk = qkv.narrow(2, 0, 2).permute({2, 0, 1, 3, 4});  // (2, B, T, nh, hd)
  const int64_t h = qkv.size(4) / 2;
  auto c = cos.view({1, 1, cos.size(0), 1, cos.size(1)}), s = sin_signed.view(c.sizes());
  auto swapped = torch::cat({qk.narrow(-1, h, h), qk.narrow(-1, 0, h)}, -1);
  return torch::addcmul(qk * c, swapped, s).contiguous();
}

}  // namespace aobench::common
