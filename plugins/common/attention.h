// Implements: the attention call of the decoders (GPT, σ-GPT, AO-GPT), with or without a KV cache.
#pragma once
#include <cstdint>
#include <optional>

#include <torch/torch.h>

#include "plugins/common/kv_cache.h"

namespace aobench::common {

// Per-head RMSNorm of q and k (AO-GPT's QK norm): x · rsqrt(mean(x²) + eps) · w over the head dimension, w (h).
struct QkNorm {
  torch::Tensor wq, wk;
  double eps = 1e-5;
};

// Scaled dot-product attention of q, k, v (B, H, S, h) → (B, H, S, h). Without a cache: causal, or `mask`
// (S, S) bool (true = may attend) when given. With a cache, the new keys and values are appended to layer
// `layer` first and q attends over the cache: through `mask` (S, S_cache + S) when given, else causally
// (new slot i sees the cached slots and new slots ≤ i); a static cache (kv_cache.h) uses its step_mask.
// `dropout` is the attention dropout probability (0 in eval); `scale` replaces 1/sqrt(h) when given.
// `qk_norm`: q and k come un-normalised and the norm is applied here; only for a one-slot decode step
// (one_slot_decode), where it runs inside decode_attention.
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, KVCache* cache,
                     int64_t layer, const std::optional<torch::Tensor>& mask, double dropout = 0.0,
                     std::optional<double> scale = std::nullopt, const QkNorm* qk_norm = nullptr);

// Whether attend takes decode_attention for a step of S slots over `cache`: a static cache with fused_decode
// (kv_cache.h) and S = 1.
bool one_slot_decode(const KVCache* cache, int64_t S);

// One decode step over a static cache: writes k_new, v_new (B, H, 1, h) at slot `slot` ((1) int64, on the
// device) of k_buf, v_buf (B, H, capacity, h) and returns softmax(q·K[0..slot]ᵀ·scale)·V[0..slot] (B, H, 1, h)
// for q (B, H, 1, h). With `norm`, q and k_new are QK-normalised first and rounded to their dtype (in 16-bit the
// same numbers as qk_rms_norm's kernel; in float32 its sum of squares runs in another order), and the
// normalised key is what the cache holds. On CUDA (decode_attention_enabled and the shapes covered:
// float/bf16/half, h ∈ {32, 64, 128} (and 256 in 16-bit), unit last stride, 16-byte aligned rows) one kernel
// that reads only the slots held, with fp32 scores and sums; otherwise decode_attention_reference. A slot past
// the cache (only a graph replayed too often can pass one): the kernel writes NaN and no slot, the reference
// refuses it (index_copy_).
torch::Tensor decode_attention(const torch::Tensor& q, const torch::Tensor& k_new, const torch::Tensor& v_new,
                               torch::Tensor& k_buf, torch::Tensor& v_buf, const torch::Tensor& slot, double scale,
                               DecodeScratch& scratch, const QkNorm* norm = nullptr);
// The same as the norm's expression, index_copy_ into the cache and SDPA over all `capacity` slots with the
// mask slot' ≤ slot.
torch::Tensor decode_attention_reference(const torch::Tensor& q, const torch::Tensor& k_new, const torch::Tensor& v_new,
                                         torch::Tensor& k_buf, torch::Tensor& v_buf, const torch::Tensor& slot,
                                         double scale, const QkNorm* norm = nullptr);
// Whether decode_attention's kernel is built and not switched off (AOBENCH_FUSED_DECODE=0); tests switch it.
bool decode_attention_enabled();
void set_decode_attention_enabled(bool on);
// Whether the kernel takes these tensors (the shapes and layouts listed above).
bool decode_attention_supports(const torch::Tensor& q, const torch::Tensor& k_new, const torch::Tensor& v_new,
                               const torch::Tensor& k_buf, const torch::Tensor& v_buf);

}  // namespace aobench::common
