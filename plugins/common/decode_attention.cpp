// Implements: plugins/common/decode_attention.h (the reference, and dispatch to the CUDA kernel when it is built).
#include "plugins/common/decode_attention.h"

#include <limits>

#include "core/device.h"
#include "plugins/common/kernel_util.h"

namespace aobench::common {

namespace {
EnvSwitch fused_decode_switch("AOBENCH_FUSED_DECODE");
}  // namespace

bool decode_attention_enabled() { return kernel_switch_on(fused_decode_switch); }
void set_decode_attention_enabled(bool on) { fused_decode_switch.set(on); }

bool decode_attention_supports(const torch::Tensor& q, const torch::Tensor& k_new, const torch::Tensor& v_new,
                               const torch::Tensor& k_buf, const torch::Tensor& v_buf) {
#ifdef AOBENCH_FUSED_CUDA
  return decode_attention_enabled() && decode_attention_cuda_supports(q, k_new, v_new, k_buf, v_buf);
#else
  (void)q, (void)k_new, (void)v_new, (void)k_buf, (void)v_buf;
  return false;
#endif
}

torch::Tensor decode_attention_reference(const torch::Tensor& q, const torch::Tensor& k_new, const torch::Tensor& v_new,
                                         torch::Tensor& k_buf, torch::Tensor& v_buf, const torch::Tensor& slot,
                                         int64_t seen, double scale, const QkNorm* norm) {
  auto normed = [&](const torch::Tensor& x, const torch::Tensor& w) {  // in fp32, rounded back to x's dtype
    auto f = x.to(torch::kFloat);
    return (f * (torch::rsqrt(f.pow(2).mean(-1, true) + norm->eps) * w.to(f.device(), torch::kFloat)))
        .to(x.scalar_type());  // x·(rs·w): qk_rms_norm's order
  };
  const auto qn = norm ? normed(q, norm->wq) : q, kn = norm ? normed(k_new, norm->wk) : k_new;
  const int64_t S = q.size(2);
  const auto slots = slot + torch::arange(S, slot.options());  // (S)
  k_buf.index_copy_(2, slots, kn);
  v_buf.index_copy_(2, slots, v_new);
  auto mask = step_visibility(k_buf.size(2), slot, seen, S);  // (S, capacity)
  return at::scaled_dot_product_attention(qn, k_buf, v_buf, mask, 0.0, false, scale);
}

torch::Tensor decode_attention(const torch::Tensor& q, const torch::Tensor& k_new, const torch::Tensor& v_new,
                               torch::Tensor& k_buf, torch::Tensor& v_buf, const torch::Tensor& slot, int64_t seen,
                               double scale, DecodeScratch& scratch, const QkNorm* norm) {
#ifdef AOBENCH_FUSED_CUDA
  if (decode_attention_supports(q, k_new, v_new, k_buf, v_buf))
    return decode_attention_cuda(q, k_new, v_new, k_buf, v_buf, slot, seen, scale, scratch, norm);
#endif
  (void)scratch;
  return decode_attention_reference(q, k_new, v_new, k_buf, v_buf, slot, seen, scale, norm);
}

}  // namespace aobench::common
