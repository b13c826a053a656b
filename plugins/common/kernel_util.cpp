// Implements: plugins/common/kernel_util.h.
#include "plugins/common/kernel_util.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <cstdint>

#include "core/device.h"

namespace aobench::common {

bool records_grad(std::initializer_list<torch::Tensor> ts) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const auto& t : ts)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

std::optional<torch::Tensor> optional_tensor(const torch::Tensor& t) {
  return t.defined() ? std::optional<torch::Tensor>(t) : std::nullopt;
}

torch::ScalarType norm_out_dtype(const torch::Tensor& x, const torch::Tensor& y) {
  if (y.defined()) return y.scalar_type();
  const auto dev = x.device().type();
  return at::autocast::is_autocast_enabled(dev) ? at::autocast::get_autocast_dtype(dev) : x.scalar_type();
}

bool fused_inference(const torch::Tensor& x) {
#ifdef AOBENCH_FUSED_CUDA
  return x.is_cuda() && !torch::GradMode::is_enabled();
#else
  (void)x;
  return false;
#endif
}

bool kernel_switch_on(EnvSwitch& s) {
#ifdef AOBENCH_FUSED_CUDA
  return s.on();
#else
  (void)s;
  return false;
#endif
}

bool aligned(const torch::Tensor& t, int64_t bytes) {
  return !t.defined() || reinterpret_cast<std::uintptr_t>(t.data_ptr()) % bytes == 0;
}

}  // namespace aobench::common
