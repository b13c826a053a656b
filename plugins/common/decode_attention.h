// The attention of one decode step over a static KV cache, fused: one kernel reads only the slots held
// (decode_attention_cuda.cu); decode_attention_reference (index_copy_ and SDPA over every slot) elsewhere and as
// the kernel's test oracle.
#pragma once

#include <torch/torch.h>

#include "plugins/common/kv_cache.h"

namespace aobench::common {

// Per-head RMSNorm of q and k (AO-GPT's QK norm): x · rsqrt(mean(x²) + eps) · w over the head dimension, w (h).
struct QkNorm {
  torch::Tensor wq, wk;
  double eps = 1e-5;
};

// One step of S ≤ kDecodeMaxSlots (16) new slots over a static cache (one for a decode step): writes k_new, v_new
// (B, H, S, h) at slots slot … slot + S − 1 of k_buf, v_buf (B, H, capacity, h) (`slot`: (1) int64 on the
// device, the slots held) and returns, for q (B, H, S, h), softmax(q_i·Kᵀ·scale)·V over the slots new slot i
// sees (B, H, S, h): every held slot, the new slots before min(i, seen) and itself (step_visibility,
// kv_cache.h; seen = S is causal). With `norm`, q and k_new are QK-normalised first and rounded to their dtype
// (in 16-bit the same numbers as qk_rms_norm's kernel; in float32 its sum of squares runs in another order),
// and the normalised keys are what the cache holds. On CUDA (decode_attention_enabled and the shapes covered:
// float/bf16/half, h ∈ {32, 64, 128} (and 256 in 16-bit), unit last stride, 16-byte aligned rows) one kernel
// that reads only the slots up to the step's, with fp32 scores and sums; otherwise decode_attention_reference.
// Slots past the cache (only a graph replayed too often can pass them): the kernel writes NaN and no slot, the
// reference refuses them (index_copy_).
torch::Tensor decode_attention(const torch::Tensor& q, const torch::Tensor& k_new, const torch::Tensor& v_new,
                               torch::Tensor& k_buf, torch::Tensor& v_buf, const torch::Tensor& slot, int64_t seen,
                               double scale, DecodeScratch& scratch, const QkNorm* norm = nullptr);
// The same as the norm's expression, index_copy_ into the cache and SDPA over all `capacity` slots with the
// mask step_visibility.
torch::Tensor decode_attention_reference(const torch::Tensor& q, const torch::Tensor& k_new, const torch::Tensor& v_new,
                                         torch::Tensor& k_buf, torch::Tensor& v_buf, const torch::Tensor& slot,
                                         int64_t seen, double scale, const QkNorm* norm = nullptr);
// Whether decode_attention's kernel is built and not switched off (AOBENCH_FUSED_DECODE=0); tests switch it.
bool decode_attention_enabled();
void set_decode_attention_enabled(bool on);
// Whether the kernel takes these tensors (the shapes and layouts listed above).
bool decode_attention_supports(const torch::Tensor& q, const torch::Tensor& k_new, const torch::Tensor& v_new,
                               const torch::Tensor& k_buf, const torch::Tensor& v_buf);

// CUDA entry points (decode_attention_cuda.cu, built with CUDA only).
bool decode_attention_cuda_supports(const torch::Tensor& q, const torch::Tensor& k_new, const torch::Tensor& v_new,
                                    const torch::Tensor& k_buf, const torch::Tensor& v_buf);
torch::Tensor decode_attention_cuda(const torch::Tensor& q, const torch::Tensor& k_new, const torch::Tensor& v_new,
                                    torch::Tensor& k_buf, torch::Tensor& v_buf, const torch::Tensor& slot, int64_t seen,
                                    double scale, DecodeScratch& scratch, const QkNorm* norm);

}  // namespace aobench::common
