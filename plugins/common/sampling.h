// Pieces every plugin's sampler and likelihood code shares: a scoped eval-mode guard, the seeded generator
// of a device, the HF top-p (nucleus) rule, and THE token draw (draw_tokens) with its two rules: the
// decoders' Gumbel-max (with its one-kernel CUDA form) and the masked diffusion's inverse CDF.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace aobench::common {

// Puts a module in eval mode for a scope (likelihoods and sampling) and restores its previous mode.
struct EvalMode {
  torch::nn::Module& m;
  bool was_training;
  explicit EvalMode(torch::nn::Module& mod) : m(mod), was_training(mod.is_training()) { m.eval(); }
  ~EvalMode() { m.train(was_training); }
};

// For a sampler's scope under CUDA autocast: the parameters of the Linear layers held in the autocast dtype.
// Autocast casts an fp32 weight on every call, and a decode step (a replayed CUDA graph records the casts)
// re-reads and re-writes every weight matrix each step; cast once here, a step reads bf16 weights only. The
// values are those autocast produces (the same rounding). A parameter that a non-Linear module shares (GPT's
// lm_head tied to the token embedding: see autocast_copy) stays fp32, as do the Linear layers whose name
// (as in named_modules) `keep_fp32` accepts — those a network runs outside autocast on purpose (AO-GPT's
// adaLN tables) — and everything off CUDA or without autocast.
class AutocastLinearWeights {
 public:
  AutocastLinearWeights(torch::nn::Module& module, torch::Device device,
                        const std::function<bool(const std::string& name)>& keep_fp32 = {});
  ~AutocastLinearWeights();
  AutocastLinearWeights(const AutocastLinearWeights&) = delete;
  AutocastLinearWeights& operator=(const AutocastLinearWeights&) = delete;

 private:
  std::vector<std::pair<torch::Tensor, torch::Tensor>> saved_;  // (parameter, its fp32 data)
};

// `weight` in the CUDA autocast dtype when autocast is on and weight is an fp32 CUDA tensor (what autocast
// would cast it to on every use), else undefined: a tied head's one cast for a sampler's scope.
torch::Tensor autocast_copy(const torch::Tensor& weight);

// HF top-p: true for the tokens of the smallest prefix of the descending-sorted distribution whose mass
// reaches top_p, the token that crosses top_p included (AO-GPT's catsample drops it; spec-ao-gpt §4.3), so
// the top-1 is always kept. Equal probabilities are ranked lowest index first (a stable sort), so the nucleus
// is a function of the probabilities alone. probs (.., V) → bool (.., V).
torch::Tensor top_p_keep(const torch::Tensor& probs, double top_p);

// One token per row of logits (.., V): log_softmax(logits/temperature) in u's dtype, HF top-p
// (top_p_keep), then argmax over kept v of log p_v − log(−log u_v) for the given uniforms u (.., V) in
// [0, 1). → (..) int64. The LibTorch reference of fused_draw, and the CPU / float32 path of draw_tokens.
torch::Tensor gumbel_draw_reference(const torch::Tensor& logits, double temperature, double top_p,
                                    const torch::Tensor& u);

// The same draw in float64 on the GPU (sampling_cuda.cu): logits (N, V) float32/bf16/half with unit column
// stride (a narrowed padded head is fine). u comes from `noise` (N, V) when given (tests), else from gen's
// Philox stream (graph-safe). Ties of the crossing token are kept lowest index first, as top_p_keep does;
// nucleus masses are summed in 2^-60 fixed point. One kernel and one block per row (split 1), or each row
// split over `split` blocks and one kernel per phase, so that a few rows (a decode step's 32) keep every SM
// busy; a token gets the same uniform either way. split 0 = automatic: enough blocks per row to cover the
// SMs, or one block per row with AOBENCH_DRAW_SPLIT=0. With top-p, `rounds` candidate rounds come before
// the exact radix select: the unfiltered Gumbel-max winner is the answer when it lies in the nucleus
// (probability ≥ top_p), else the winner among the tokens before it is the next candidate, so a row is left
// to the radix select with probability ≈ (1 − top_p)^rounds; 0 takes the radix select alone (its reference
// in tests and timings; AOBENCH_DRAW_CANDIDATES=0 sets it). The rounds read the scores of a (N, V) float64
// buffer (4× bf16 logits; a captured sampler step keeps its own). Every rounds value gives the same ids; a
// split sums Z in another order, so its last bits, and with them a nucleus boundary, may move (never seen in
// the tests). `resident`: a split row's phases run in one cooperative kernel instead of one kernel each — its
// blocks hold their chunks in shared memory and meet at per-row barriers — when a chunk is ≤ 16 sweeps of 1024
// logits and all N·split blocks fit on the GPU at once (fused_draw_is_resident), with the same ids as the
// phase kernels; AOBENCH_DRAW_RESIDENT=0 keeps the phase kernels. → (N) int64.
constexpr int kDrawRounds = 3;
torch::Tensor fused_draw(const torch::Tensor& logits, double temperature, double top_p, at::Generator* gen,
                         const torch::Tensor& noise = {}, int split = 0, int rounds = kDrawRounds,
                         bool resident = true);
// Whether fused_draw(logits, …, split, …, resident = true) takes the resident form: logits (N, V) on CUDA.
bool fused_draw_is_resident(const torch::Tensor& logits, int split = 0);
// True when fused_draw can serve these logits: CUDA kernels built, logits on the GPU in float32/bf16/half,
// and the kernel not switched off (AOBENCH_FUSED_SAMPLING=0 rules it out; tests switch it directly).
bool fused_draw_supported(const torch::Tensor& logits);
// The CUDA entry point of fused_draw (sampling_cuda.cu, built with CUDA only).
torch::Tensor fused_draw_cuda(const torch::Tensor& logits, double temperature, double top_p, at::Generator* gen,
                              const torch::Tensor& noise, int split, int rounds, bool resident);
bool fused_draw_resident_cuda(const torch::Tensor& logits, int split);
bool fused_sampling_enabled();
void set_fused_sampling_enabled(bool on);

// A generator for `device` seeded with `seed` (CPU or CUDA, a fresh one: the device's default generator is
// left alone), so sampling draws stay on the device and a seed always gives the same stream.
at::Generator make_generator(torch::Device device, uint64_t seed);

// How draw_tokens picks a token from softmax(logits / temperature) cut to the HF top-p nucleus (top_p_keep).
// Both rules sample exactly that distribution; each consumes random numbers as its reference implementation
// does, so a seed gives the reference's tokens:
//   kGumbelMax   the decoders (AO-GPT repo, spec-ao-gpt §4.3): argmax of log p − log(−log u), one uniform per
//                entry, float64 (float32 when !float64); fused_draw on the GPU.
//   kInverseCdf  the masked diffusion (SEDD/RADD repos, spec-sedd-radd §5.6): one float64 uniform per row
//                through the CDF; !float64 is the references' legacy float32 exponential race argmax(p / E).
enum class DrawRule { kGumbelMax, kInverseCdf };
struct DrawOptions {
  DrawRule rule = DrawRule::kGumbelMax;
  double temperature = 1.0;
  double top_p = 1.0;
  bool float64 = true;  // see DrawRule
  bool argmax = false;  // greedy: the most likely token, no randomness
};
// The decoders' draw of a sample request: Gumbel-max at this temperature and top-p.
inline DrawOptions gumbel_max(double temperature, double top_p, bool float64) {
  return {DrawRule::kGumbelMax, temperature, top_p, float64, /*argmax=*/false};
}
// One token per row of logits (.., V) over the real vocabulary: (..) int64.
torch::Tensor draw_tokens(const torch::Tensor& logits, const DrawOptions& opt, at::Generator& gen);

// The pieces of the inverse-CDF rule that the diffusion sampler's one-stage legacy step reuses:
// temperature + top-p probabilities (N, V) renormalised, float64 (float32 for the legacy path);
torch::Tensor filtered_probs(const torch::Tensor& logits, const DrawOptions& opt);
// argmax(q / E) with E = 1e-10 − log(U + 1e-10), U float32 uniform: q (N, K) float32 → (N);
torch::Tensor legacy_gumbel_argmax(const torch::Tensor& q, at::Generator& gen);
// rows per chunk so that one (rows, V) float64 buffer stays near 256 MiB.
int64_t draw_row_chunk(int64_t V);

}  // namespace aobench::common
