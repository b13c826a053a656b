// Implements: plugins/common/sampling.h.
#include "plugins/common/sampling.h"

#include <atomic>
#include <limits>

#include "plugins/common/fused_ops.h"

namespace aobench::common {

#ifdef AOBENCH_FUSED_CUDA
// sampling_cuda.cu
torch::Tensor fused_draw_cuda(const torch::Tensor& logits, double temperature, double top_p, at::Generator* gen,
                              const torch::Tensor& noise);
#endif

namespace {
std::atomic<bool>& fused_sampling_flag() {
  static std::atomic<bool> on{env_switch_on("AOBENCH_FUSED_SAMPLING")};
  return on;
}
}  // namespace

bool fused_sampling_enabled() { return fused_sampling_flag().load(); }
void set_fused_sampling_enabled(bool on) { fused_sampling_flag().store(on); }

torch::Tensor top_p_keep(const torch::Tensor& probs, double top_p) {
  auto [sorted, idx] = probs.sort(/*stable=*/true, -1, /*descending=*/true);
  auto mass_before = sorted.cumsum(-1) - sorted;  // mass strictly above each sorted token
  return torch::zeros_like(mass_before, torch::kBool).scatter(-1, idx, mass_before < top_p);
}


torch::Tensor gumbel_draw_reference(const torch::Tensor& logits, double temperature, double top_p,
                                    const torch::Tensor& u) {
  TORCH_CHECK(temperature > 0.0, "temperature must be positive, got ", temperature);
  TORCH_CHECK(top_p > 0.0 && top_p <= 1.0, "top_p must lie in (0, 1], got ", top_p);
  TORCH_CHECK(u.sizes() == logits.sizes(), "uniforms ", u.sizes(), " vs logits ", logits.sizes());
  auto logp = torch::log_softmax(logits.to(u.scalar_type()) / temperature, -1);  // (.., V)
  if (top_p < 1.0)
    logp = logp.masked_fill(top_p_keep(logp.exp(), top_p).logical_not(),
                            -std::numeric_limits<double>::infinity());
  // Gumbel-max: argmax log p_v − log(−log u_v); u = 0 gives −log(inf) = −inf, never chosen.
  return (logp - torch::log(-torch::log(u))).argmax(-1);  // (..)
}

bool fused_draw_supported(const torch::Tensor& logits) {
#ifdef AOBENCH_FUSED_CUDA
  const auto t = logits.scalar_type();
  return logits.is_cuda() && fused_sampling_enabled() &&
         (t == torch::kFloat32 || t == torch::kBFloat16 || t == torch::kHalf);
#else
  (void)logits;
  return false;
#endif
}

torch::Tensor fused_draw(const torch::Tensor& logits, double temperature, double top_p, at::Generator* gen,
                         const torch::Tensor& noise) {
  TORCH_CHECK(temperature > 0.0, "temperature must be positive, got ", temperature);
  TORCH_CHECK(top_p > 0.0 && top_p <= 1.0, "top_p must lie in (0, 1], got ", top_p);
#ifdef AOBENCH_FUSED_CUDA
  return fused_draw_cuda(logits, temperature, top_p, gen, noise);
#else
  (void)logits, (void)gen, (void)noise;
  TORCH_CHECK(false, "fused_draw: this build has no CUDA kernels");
#endif
}

}  // namespace aobench::common
