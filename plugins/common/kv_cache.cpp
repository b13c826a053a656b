// Implements: plugins/common/kv_cache.h.
#include "plugins/common/kv_cache.h"

#include <string>

#include "core/device.h"
#include "plugins/common/attention.h"

namespace aobench::common {

void KVCache::make_static(torch::Device device) {
  TORCH_CHECK(capacity > 0, "a static KV cache needs a capacity");
  pos = torch::zeros({1}, torch::TensorOptions().dtype(torch::kLong).device(device));
  len = 0;
  fused_decode = device.is_cuda() && decode_attention_enabled();
}

int64_t decode_slots() {
  static const int64_t n =
      env_integer("AOBENCH_DECODE_SLOTS", kDecodeSlotsDefault, 1, kDecodeMaxSlots,
                  "unset it (steps of up to " + std::to_string(kDecodeSlotsDefault) +
                      " slots take the decode kernel) or give the most slots a kernel step may have");
  return n;
}

torch::Tensor step_visibility(int64_t span, const torch::Tensor& held, int64_t seen, int64_t S) {
  auto d = torch::arange(span, held.options()).unsqueeze(0) - held;  // (1, span): slot − held
  auto i = torch::arange(S, held.options()).unsqueeze(1);            // (S, 1)
  return d.lt(0) | d.eq(i) | (d.lt(seen) & d.lt(i));
}

torch::Tensor KVCache::begin_step(int64_t S, int64_t seen) {
  const bool fused = decodes(S);
  step_slots = fused && S == 1 ? pos : pos + torch::arange(S, pos.options());
  step_seen = seen;
  step_mask = fused ? torch::Tensor() : step_visibility(span_for(S), pos, seen, S);
  return step_slots;
}

void KVCache::truncate(int64_t keep) {
  if (is_static()) {
    len = keep;
    pos.fill_(keep);
    return;
  }
  for (size_t l = 0; l < k.size(); ++l) {
    k[l] = k[l].narrow(2, 0, keep);
    v[l] = v[l].narrow(2, 0, keep);
  }
}

}  // namespace aobench::common
