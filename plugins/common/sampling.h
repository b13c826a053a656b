// Pieces every plugin's sampler and likelihood code shares: a scoped eval-mode guard and the HF top-p
// (nucleus) rule, and the float64 Gumbel-max draw of the decoders (any_order.h draw_tokens) with its
// one-kernel CUDA form. The diffusion draws (inverse CDF, Lemma 1) stay in diffusion_common.
#pragma once

#include <torch/torch.h>

namespace aobench::common {

// Puts a module in eval mode for a scope (likelihoods and sampling) and restores its previous mode.
struct EvalMode {
  torch::nn::Module& m;
  bool was_training;
  explicit EvalMode(torch::nn::Module& mod) : m(mod), was_training(mod.is_training()) { m.eval(); }
  ~EvalMode() { m.train(was_training); }
};

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

// The same draw in float64 as ONE CUDA kernel per call (sampling_cuda.cu): logits (N, V) float32/bf16/half
// on the GPU with unit column stride (a narrowed padded head is fine). u comes from `noise` (N, V) when given
// (tests), else from gen's Philox stream (graph-safe). Ties of the crossing token are kept lowest index
// first, as top_p_keep does; nucleus masses are summed in 2^-60 fixed point. → (N) int64.
torch::Tensor fused_draw(const torch::Tensor& logits, double temperature, double top_p, at::Generator* gen,
                         const torch::Tensor& noise = {});
// True when fused_draw can serve these logits: CUDA kernels built, logits on the GPU in float32/bf16/half,
// and the kernel not switched off (AOBENCH_FUSED_SAMPLING=0 rules it out; tests switch it directly).
bool fused_draw_supported(const torch::Tensor& logits);
bool fused_sampling_enabled();
void set_fused_sampling_enabled(bool on);

}  // namespace aobench::common
