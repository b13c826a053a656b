// Pieces every plugin's sampler and likelihood code shares: a scoped eval-mode guard and the HF top-p
// (nucleus) rule. The draws themselves differ by paradigm (Gumbel race, inverse CDF) and stay with them.
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
// the top-1 is always kept. probs (.., V) → bool (.., V).
torch::Tensor top_p_keep(const torch::Tensor& probs, double top_p);

}  // namespace aobench::common
