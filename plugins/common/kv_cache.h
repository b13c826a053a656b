// Implements: the per-layer key/value cache of the decoders' samplers (GPT, σ-GPT, AO-GPT); attention.h reads
// and fills it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace aobench::common {

// New slots of one step that decode_attention's kernel takes at most, and the most a step gives it
// (AOBENCH_DECODE_SLOTS, 1 … kDecodeMaxSlots; larger steps take the masked SDPA). The default, 4, is measured
// (docs/results/perf): with more than one block of four queries a row the kernel ties the masked SDPA at 7
// slots and loses at 15.
constexpr int64_t kDecodeMaxSlots = 16;
constexpr int64_t kDecodeSlotsDefault = 4;
int64_t decode_slots();

// decode_attention's workspace: a per-row counter (int32, zero between launches) and the chunks' fp32 partials.
struct DecodeScratch {
  torch::Tensor counter, partials;
};

// Keys and values of every layer for the slots seen so far: k[l], v[l] are (B, H, S_cache, h), grown by
// concatenation; with capacity > 0 they are views of preallocated (B, H, capacity, h) buffers that new slots
// are copied into, so a step costs no O(S_cache) concatenation (the numbers are the same).
struct KVCache {
  std::vector<torch::Tensor> k, v;
  int64_t capacity = 0;
  std::vector<torch::Tensor> k_buf, v_buf;
  // Static mode (make_static; needs capacity): zero-initialised buffers written at the device-side slots
  // step_slots (S), attention over the first span slots through step_mask (S, span), so a step's shapes do
  // not depend on the cache length and it can be captured in a CUDA graph. pos (1) int64 on the device =
  // slots held (graph replays advance it in place); len = the same on the host (advanced by the caller,
  // since a replay runs no host code). span_for(S) is a multiple of kSpan: one graph serves kSpan steps.
  static constexpr int64_t kSpan = 256;
  torch::Tensor pos, step_slots, step_mask;
  // Steps of at most decode_slots() slots of a static cache on the GPU run decode_attention (attention.h):
  // the kernel writes the slots at pos and reads slots 0..pos + S − 1 only (its reference, where the kernel
  // cannot take the shapes, masks the rest), new slot i seeing the new slots before min(i, step_seen) and
  // itself (step_visibility; step_seen = S is causal), so such a step needs no step_mask and one graph serves
  // every length (span_for(S) = capacity). Off with AOBENCH_FUSED_DECODE=0. decode_scratch is the kernel's
  // workspace, in memory that stays put.
  bool fused_decode = false;
  int64_t step_seen = 0;
  DecodeScratch decode_scratch;
  // step_mask as the additive mask (0 / −inf, attention dtype) SDPA would build from it in every layer's call;
  // built once per step by the first layer (attend), with the mask it was built from.
  torch::Tensor step_bias, step_bias_of;
  int64_t len = 0;
  void make_static(torch::Device device);
  bool is_static() const { return pos.defined(); }
  // Whether a step of S slots runs decode_attention (attention.h's fused_decode_step).
  bool decodes(int64_t S) const { return is_static() && fused_decode && S <= decode_slots(); }
  // A static step of S new slots at pos, new slot i seeing the new slots before min(i, seen) and itself:
  // sets step_slots (S) (for one slot on the kernel pos itself, read at replay time), step_seen and, unless
  // the kernel takes the step, step_mask (S, span_for(S)). Returns step_slots.
  torch::Tensor begin_step(int64_t S, int64_t seen);
  int64_t span_for(int64_t S) const {
    if (decodes(S)) return capacity;
    return std::min(capacity, (len + S + kSpan - 1) / kSpan * kSpan);
  }
  int64_t length() const {
    if (is_static()) return len;
    return k.empty() || !k[0].defined() ? 0 : k[0].size(2);
  }
  void truncate(int64_t keep);  // keep the first `keep` slots of every layer
};

// The mask (S, span) of a step of S new slots after `held` cached ones ((1) int64, on the device for a static
// cache): new slot i sees every cached slot, the new slots j < min(i, seen) and itself. seen = S is causal; the
// any-order sampler's step has seen = n_prev − 1, so its query block (the duplicates) is diagonal-only.
torch::Tensor step_visibility(int64_t span, const torch::Tensor& held, int64_t seen, int64_t S);

}  // namespace aobench::common
