// Implements: plugins/common/kv_cache.h.
#include "plugins/common/kv_cache.h"

#include "plugins/common/attention.h"

namespace aobench::common {

void KVCache::make_static(torch::Device device) {
  TORCH_CHECK(capacity > 0, "a static KV cache needs a capacity");
  pos = torch::zeros({1}, torch::TensorOptions().dtype(torch::kLong).device(device));
  len = 0;
  fused_decode = device.is_cuda() && decode_attention_enabled();
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
