// Implements: plugins/common/attention.h.
#include "plugins/common/attention.h"

#include <cmath>
#include <limits>

#include "core/device.h"

namespace aobench::common {

bool fused_decode_step(const KVCache* cache, int64_t S) { return cache && cache->decodes(S); }

torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, KVCache* cache,
                     int64_t layer, const std::optional<torch::Tensor>& mask, double dropout,
                     std::optional<double> scale, const QkNorm* qk_norm) {
  auto sdpa = [&](const torch::Tensor& keys, const torch::Tensor& values, const std::optional<torch::Tensor>& m,
                  bool causal) { return at::scaled_dot_product_attention(q, keys, values, m, dropout, causal, scale); };
  TORCH_CHECK(!qk_norm || fused_decode_step(cache, q.size(2)),
              "attend: a QK norm is applied only in a fused decode step");
  if (!cache) return mask ? sdpa(k, v, mask, false) : sdpa(k, v, std::nullopt, /*causal=*/true);
  if (static_cast<int64_t>(cache->k.size()) <= layer) {
    cache->k.resize(layer + 1);
    cache->v.resize(layer + 1);
    cache->k_buf.resize(layer + 1);
    cache->v_buf.resize(layer + 1);
  }
  auto& ck = cache->k[layer];
  auto& cv = cache->v[layer];
  const int64_t old = ck.defined() ? ck.size(2) : 0, S = k.size(2);
  if (cache->is_static()) {
    // Write the S new keys/values at their slots and read the first `span` slots; later ones are masked.
    auto& kb = cache->k_buf[layer];
    auto& vb = cache->v_buf[layer];
    if (!kb.defined()) {  // zeros: the masked slots never hold NaN
      kb = torch::zeros({k.size(0), k.size(1), cache->capacity, k.size(3)}, k.options());
      vb = torch::zeros({v.size(0), v.size(1), cache->capacity, v.size(3)}, v.options());
    }
    if (fused_decode_step(cache, S)) {  // no mask: the kernel (or its reference) reads slots 0..pos + S − 1
      TORCH_CHECK(dropout == 0.0, "attend: a decode step takes no attention dropout");
      return decode_attention(q, k, v, kb, vb, cache->pos, cache->step_seen, scale.value_or(1.0 / std::sqrt(q.size(3))),
                              cache->decode_scratch, qk_norm);
    }
    kb.index_copy_(2, cache->step_slots, k);
    vb.index_copy_(2, cache->step_slots, v);
    if (!cache->step_bias_of.is_same(cache->step_mask) || cache->step_bias.scalar_type() != q.scalar_type()) {
      cache->step_bias = torch::zeros(cache->step_mask.sizes(), q.options())
                             .masked_fill_(cache->step_mask.logical_not(), -std::numeric_limits<double>::infinity());
      cache->step_bias_of = cache->step_mask;
    }
    const int64_t span = cache->step_mask.size(1);
    return sdpa(kb.narrow(2, 0, span), vb.narrow(2, 0, span), cache->step_bias, false);
  }
  if (cache->capacity > 0) {
    TORCH_CHECK(old + S <= cache->capacity, "KV cache of ", cache->capacity, " slots cannot take ", old + S);
    auto& kb = cache->k_buf[layer];
    auto& vb = cache->v_buf[layer];
    if (!kb.defined()) {
      kb = torch::empty({k.size(0), k.size(1), cache->capacity, k.size(3)}, k.options());
      vb = torch::empty({v.size(0), v.size(1), cache->capacity, v.size(3)}, v.options());
    }
    kb.narrow(2, old, S).copy_(k);
    vb.narrow(2, old, S).copy_(v);
    ck = kb.narrow(2, 0, old + S);  // (B, H, S_cache + S, h) views
    cv = vb.narrow(2, 0, old + S);
  } else {
    ck = ck.defined() ? torch::cat({ck, k}, 2) : k;  // (B, H, S_cache + S, h)
    cv = cv.defined() ? torch::cat({cv, v}, 2) : v;
  }
  if (mask) return sdpa(ck, cv, mask, false);
  if (old == 0) return sdpa(ck, cv, std::nullopt, /*causal=*/true);
  // New slot i (absolute old + i) sees keys 0..old + i: (S, old + S).
  auto causal = torch::ones({S, old + S}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).tril(old);
  return sdpa(ck, cv, causal, false);
}

}  // namespace aobench::common
