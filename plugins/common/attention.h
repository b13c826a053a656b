// Implements: the attention call of the decoders (GPT, σ-GPT, AO-GPT), with or without a KV cache.
#pragma once
#include <cstdint>
#include <optional>

#include <torch/torch.h>

#include "plugins/common/decode_attention.h"
#include "plugins/common/kv_cache.h"

namespace aobench::common {

// Scaled dot-product attention of q, k, v (B, H, S, h) → (B, H, S, h). Without a cache: causal, or `mask`
// (S, S) bool (true = may attend) when given. With a cache, the new keys and values are appended to layer
// `layer` first and q attends over the cache: through `mask` (S, S_cache + S) when given, else causally
// (new slot i sees the cached slots and new slots ≤ i); a static cache (kv_cache.h) uses its step_mask.
// `dropout` is the attention dropout probability (0 in eval); `scale` replaces 1/sqrt(h) when given.
// `qk_norm`: q and k come un-normalised and the norm is applied here; only for a fused decode step
// (fused_decode_step), where it runs inside decode_attention.
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, KVCache* cache,
                     int64_t layer, const std::optional<torch::Tensor>& mask, double dropout = 0.0,
                     std::optional<double> scale = std::nullopt, const QkNorm* qk_norm = nullptr);

// Whether attend takes decode_attention for a step of S slots over `cache`: a static cache with fused_decode
// (kv_cache.h) and S ≤ decode_slots(); the step's visibility is then cache->step_seen, not step_mask.
bool fused_decode_step(const KVCache* cache, int64_t S);

}  // namespace aobench::common
