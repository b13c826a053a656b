// Implements: blocks shared by the decoder-only any-order plugins sigma_gpt and ao_gpt: the slot layout
// of spec-ao-gpt §1.1 ([None] start slot, current position, target position), a per-layer KV cache,
// truncated-normal init, float64 Gumbel-max / top-p token draws (§4.3) and the KV-cache any-order
// sampler of §4.2 with the deterministic counts of §4.1.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "core/errors.h"
#include "core/plugin_api.h"

namespace aobench::common {

// One row of input slots. token −1 = the [None] start slot; position −1 = "no current position" (the
// [None] slot, wpe row 0); target −1 = "no target" (zero conditioning). Every tensor is (B, S) int64.
struct Slots {
  torch::Tensor tokens;
  torch::Tensor positions;
  torch::Tensor targets;
};

// Training / exact-chain slots for tokens (B, T) under orders σ (B, T): slot 0 = [None] targeting σ(0),
// slot k ≥ 1 reads x_σ(k−1) at position σ(k−1) and targets σ(k). T slots (slot T is never needed).
Slots slots_for_order(const torch::Tensor& tokens, const torch::Tensor& order);

// Slots of ModelPlugin::chain_log_probs (plugin_api.h): [None] + ctx_tokens[:, :S−1], targets as given.
Slots slots_for_chain(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                      const torch::Tensor& targets);

// Keys and values of every layer for the slots seen so far: k[l], v[l] are (B, H, S_cache, h). With
// capacity > 0 they are views of preallocated (B, H, capacity, h) buffers that new slots are copied into, so
// a step costs no O(S_cache) concatenation (the sampler sets it; the numbers are the same).
struct KVCache {
  std::vector<torch::Tensor> k, v;
  int64_t capacity = 0;
  std::vector<torch::Tensor> k_buf, v_buf;
  // Static mode (make_static; needs capacity): zero-initialised buffers written at the device-side slots
  // step_slots (S), attention over the first span slots through step_mask (S, span), so a step's shapes do
  // not depend on the cache length and it can be captured in a CUDA graph. pos (1) int64 on the device =
  // slots held (graph replays advance it); len = the same on the host.
  static constexpr int64_t kSpan = 256;
  torch::Tensor pos, step_slots, step_mask;
  int64_t len = 0;
  void make_static(torch::Device device);
  bool is_static() const { return pos.defined(); }
  int64_t span_for(int64_t S) const { return std::min(capacity, (len + S + kSpan - 1) / kSpan * kSpan); }
  int64_t length() const {
    if (is_static()) return len;
    return k.empty() || !k[0].defined() ? 0 : k[0].size(2);
  }
  void truncate(int64_t keep);  // keep the first `keep` slots of every layer
};

// Causal self-attention core shared by both plugins. q, k, v (B, H, S, h). With a cache, the new keys and
// values are appended to layer `layer` and `mask` (S, S_cache + S) bool (true = may attend) is used;
// without cache and mask, causal SDPA. Returns (B, H, S, h).
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, KVCache* cache,
                     int64_t layer, const std::optional<torch::Tensor>& mask);

// In-place truncated normal N(0, std²) cut at ±3·std, by inverse-CDF sampling (torch's C++ API has no
// trunc_normal_); uses the global generator so torch::manual_seed makes builds reproducible.
void trunc_normal_(torch::Tensor t, double std);

// Vocabulary padded up to a multiple of 64 (GPT-2: 50257 → 50304).
inline int64_t padded_vocab(int64_t v) { return (v + 63) / 64 * 64; }

// A network the sampler can drive: logits (B, n_last, vocab) float32 of the last `n_last` slots over the
// REAL vocabulary (padded ids cut), with keys/values appended to `cache`.
using SlotForward = std::function<torch::Tensor(const Slots& slots, KVCache* cache,
                                                const std::optional<torch::Tensor>& mask, int64_t n_last)>;

// Cumulative token counts n_0 < n_1 < … < n_{steps−1} = L (spec §4.1 with L instead of the hard-coded
// 1024): linear n_k = ⌊L(k+1)/steps⌋ in integer arithmetic, or cosine; steps is clamped to [1, L].
std::vector<int64_t> schedule_counts(int64_t L, int64_t steps, const std::string& schedule);

// Fraction of positions still masked at step boundary k of `steps` (k = 0…steps): the schedule s(t_k) of
// §4.1 with t_k = 1 − k/steps, i.e. linear 1 − k/steps, cosine cos(k/steps · π/2); 0 for k ≥ steps.
double masked_fraction(const std::string& schedule, int64_t k, int64_t steps);

// Lemma 1 (spec §4.4), stage 1, for one row of L free positions: at step k every still-masked position
// unmasks independently with probability (m_k − m_{k+1}) / m_k (m = masked_fraction; the last step takes
// the rest). Cumulative counts after each step (non-decreasing, ending at L; the sampler skips steps that
// unmask nothing: no network call); stage 2 is the categorical draw of the unmasked positions (draw_tokens).
std::vector<int64_t> bernoulli_counts(int64_t L, int64_t steps, const std::string& schedule, at::Generator& gen);

// Draws one token per row of logits (B, n, V): softmax(logits/temperature), nucleus top-p keeping the
// token that crosses p (HF convention, not the reference's smaller nucleus, spec §6.9), then Gumbel-max
// argmax(log p − log(−log u)) with u drawn from `gen` in float64 (or float32 when !float64). (B, n) int64.
torch::Tensor draw_tokens(const torch::Tensor& logits, double temperature, double top_p, bool float64,
                          at::Generator& gen);

// A generator for `device` seeded with `seed` (CPU or CUDA), so sampling draws stay on the device.
at::Generator make_generator(torch::Device device, uint64_t seed);

// Per-row generation orders for a sample request (B, L) on CPU: prompt positions first (left to right),
// then the free positions in a uniform random order drawn from `gen`. Every row must fix the same number
// of prompt positions (TORCH_CHECK otherwise). `n_prompt` receives that number.
torch::Tensor sampling_orders(const SampleRequest& request, at::Generator& gen, int64_t* n_prompt);

// The KV-cache any-order sampler of spec §4.2, with request.counts "deterministic" (schedule_counts, the
// reference) or "bernoulli" (bernoulli_counts per row; rows then run one at a time). A full generation
// feeds at most 2L slots whatever the step count: each step the previous step's tokens plus the queries. Each step feeds the previous step's real tokens P plus
// n_new − 1 duplicates of P's last token, the duplicates carrying the new target positions; mask = whole
// cache + causal among new slots + diagonal-only inside the query block; the cache is cut back to the real
// tokens after each step. The first P is [None] + the prompt tokens when `start_slot` (spec §4.2 step 0 and
// cond_generate); without a start slot (idiap σ-GPT, whose first token is given, never predicted) it is the
// prompt, or EOS = vocab−1 at σ(0) when there is no prompt. Output is un-shuffled: out[σ(i)] = x_i; out.order
// is σ.
// `net` is put in eval mode for the call; request.length must lie in [1, block_size] (ConfigError otherwise).
// capture_steps (a plugin whose forward never waits for the device): on the GPU the cache is static and every
// step of one new token after one real slot (all steps at steps = length) is replayed from a CUDA graph, one
// per 256-slot span (cuda_graph.h; AOBENCH_CUDA_GRAPHS=0 runs the same steps uncaptured).
SampleOutput sample_any_order(torch::nn::Module& net, const SlotForward& forward, const SampleRequest& request,
                              int64_t vocab, int64_t block_size, bool start_slot, bool capture_steps = false);

// Model-config helpers shared by the plugins' configure(): every key must appear in the flavour defaults
// (`plugin` and `flavour` are added by the harness); get<T>() throws ConfigError naming "model.<key>".
void check_model_keys(const nlohmann::json& cfg, const nlohmann::json& defaults_json);
// Every listed size positive, n_embd a multiple of n_head, dropout in [0, 1); ConfigError names "model.<key>".
void check_model_sizes(std::initializer_list<std::pair<const char*, int64_t>> sizes, int64_t n_embd,
                       int64_t n_head, double dropout);
// 6N + 12·L·d·T for an any-order decoder, N its parameters without the position tables (wpe*, wtpe*,
// wnonee) and without those whose name contains one of `lookups`: those are lookups, not per-token matmuls.
double any_order_flops_per_token(const torch::nn::Module& net, int64_t n_layer, int64_t n_embd, int64_t T,
                                 const std::vector<std::string>& lookups = {});
template <typename T>
T get(const nlohmann::json& cfg, const std::string& key) {
  if (!cfg.contains(key)) throw ConfigError("missing 'model." + key + "'", "every flavour defines it");
  try {
    return cfg.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw ConfigError("'model." + key + "' has the wrong type: " + cfg.at(key).dump(),
                      "see the flavour defaults in the plugin's default.json");
  }
}

}  // namespace aobench::common
