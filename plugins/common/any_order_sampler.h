// Implements: the KV-cache any-order sampler of σ-GPT and AO-GPT (spec-ao-gpt §4.1–4.4): per-step token
// counts (deterministic §4.1, or Lemma 1's Bernoulli counts), the generation orders of a request, and the
// step loop of §4.2.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/plugin_api.h"
#include "plugins/common/kv_cache.h"
#include "plugins/common/slots.h"

namespace aobench::common {

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

// Per-row generation orders for a sample request (B, L) on CPU: prompt positions first (left to right),
// then the free positions in a uniform random order drawn from `gen`. Every row must fix the same number
// of prompt positions (TORCH_CHECK otherwise). `n_prompt` receives that number.
torch::Tensor sampling_orders(const SampleRequest& request, at::Generator& gen, int64_t* n_prompt);

// The KV-cache any-order sampler of spec §4.2, with request.counts "deterministic" (schedule_counts, the
// reference) or "bernoulli" (bernoulli_counts per row; rows then run one at a time). A full generation
// feeds at most 2L slots whatever the step count: each step feeds the previous step's real tokens P plus
// n_new − 1 duplicates of P's last token, the duplicates carrying the new target positions; mask = whole
// cache + causal among new slots + diagonal-only inside the query block; the cache is cut back to the real
// tokens after each step. The first P is [None] + the prompt tokens when `start_slot` (spec §4.2 step 0 and
// cond_generate); without a start slot (idiap σ-GPT, whose first token is given, never predicted) it is the
// prompt, or EOS = vocab−1 at σ(0) when there is no prompt. Output is un-shuffled: out[σ(i)] = x_i; out.order
// is σ. Tokens are drawn with draw_tokens (sampling.h, Gumbel-max rule).
// `net` is put in eval mode for the call; request.length must lie in [1, block_size] (ConfigError otherwise).
// capture_steps (a plugin whose forward never waits for the device): on the GPU the cache is static and a
// step whose shape repeats (slots, new tokens, attention span: every step of a linear schedule after the
// first) is replayed from a CUDA graph: steps of up to decode_slots() slots, on the decode-attention kernel
// (kv_cache.h), need one graph for every cache length, others one per 256-slot span (cuda_graph.h;
// AOBENCH_CUDA_GRAPHS=0 runs the same steps uncaptured).
SampleOutput sample_any_order(torch::nn::Module& net, const SlotForward& forward, const SampleRequest& request,
                              int64_t vocab, int64_t block_size, bool start_slot, bool capture_steps = false);

}  // namespace aobench::common
