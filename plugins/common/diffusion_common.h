// Implements: what SEDD and RADD share around the network (spec-sedd-radd §2.1, §3.4, §5):
// the log-linear noise schedule, i.i.d./stratified time draws, the exact masking-chain NLL under a
// given order, the Lemma-1 unmasking step and the masked sampler (token draws: sampling.h, inverse-CDF rule).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/plugin_api.h"
#include "plugins/common/ddit_backbone.h"
#include "plugins/common/sampling.h"

namespace aobench::common {

// The DDiT keys both plugins share: n_layer, n_head, n_embd (even head dim for rotary), vocab_size,
// block_size, chain_chunk and dropout ∈ [0, 1) (`dropout_hint` names typical values).
void read_ddit_config(const ModelConfig& m, const std::string& dropout_hint, DDiTConfig& cfg, int64_t& block_size,
                      int64_t& chain_chunk);

inline constexpr double kNoiseEps = 1e-3;   // log-linear schedule: α_1 = 1e-3 (§2.1)
inline constexpr double kSampleEps = 1e-5;  // sampler time grid ends at t = 1e-5 (§5)

// Log-linear schedule (§2.1), elementwise on float64 t: σ(t) = −log(1 − (1−ε)t), σ'(t) = (1−ε)/(1 − (1−ε)t).
torch::Tensor loglinear_sigma(const torch::Tensor& t, double eps = kNoiseEps);
torch::Tensor loglinear_dsigma(const torch::Tensor& t, double eps = kNoiseEps);

// σ at which the log-linear schedule masks each token with probability `rate` (float64, elementwise):
// 1 − e^{−σ} = rate, i.e. σ = −log(1 − rate) = σ(rate/(1−ε)), the schedule's own time for that rate.
// Rates above the schedule's end (1 − ε at t = 1) are clamped to it, so σ ≤ σ(1) = −log ε: the all-masked
// input of an exact chain (rate 1) and λ-DCE draws with λ > 1 − ε are conditioned on σ(1).
torch::Tensor sigma_at_mask_rate(const torch::Tensor& rate, double eps = kNoiseEps);

// (B) float64 u in [0, 1) on the CPU generator `gen`: i.i.d., or stratified u_i = (U_i + i)/B (§2.4).
torch::Tensor draw_uniform(int64_t B, bool stratified, at::Generator& gen);

// Exact chain-rule NLL of an encoder MDM under orders σ (§3.4): for each (b, k) the input is tokens[b]
// with positions σ(≥k) set to mask_id; all B·T such copies are run `chunk` rows per network call.
// `net(x (N, T), n_masked (N) int64)` returns logits (N, T, V+1); log p is a log-softmax over the first
// V columns (the mask logit is excluded). Returns nll (B, T) float64 in generation order, all scored.
using ChainNet = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>;
NllOutput masked_chain_nll(const torch::Tensor& tokens, const torch::Tensor& order, int64_t mask_id, int64_t chunk,
                           const ChainNet& net);

// One Lemma-1 step on the masked positions of x (B, L) (mask id = V = logits.size(-1) − 1): each masked
// position unmasks with probability `rate` and, if so, takes a token drawn from p_θ. float64 path: a
// Bernoulli draw then a categorical. Legacy path: one float32 Gumbel draw over [stay, rate·p] as the
// reference does. logits (B, L, V+1). Returns the new x and a (B) bool "row changed".
std::pair<torch::Tensor, torch::Tensor> unmask_step(const torch::Tensor& x, const torch::Tensor& logits, double rate,
                                                    const DrawOptions& opt, at::Generator& gen);

// The masked-diffusion sampler (§5.4/§5.5): all-mask start, grid linspace(1, 1e-5, steps+1), unmask rate
// Δt/t per step, prompts (≥ 0) fixed before every step.
struct MaskedSamplerOptions {
  int64_t vocab_size = 0;          // V; mask id = V
  bool time_conditioned = true;    // SEDD: net needs σ(t), call every step; RADD: cache per sequence
  bool extra_denoise_step = true;  // SEDD Denoiser: one more call at t = 1e-5 fills what is left;
                                   // false (RADD): the last step uses rate 1
  bool final_argmax = false;       // final fill by argmax instead of sampling
};
// net(x (N, L), t (N) float64) → logits (N, L, V+1).
using SamplerNet = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>;
SampleOutput sample_masked(const SampleRequest& req, const MaskedSamplerOptions& opt, const SamplerNet& net);

}  // namespace aobench::common
