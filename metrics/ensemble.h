// Implements: context-order ensemble likelihood for any-order decoders (spec-ao-gpt §3.3), computed
// exactly with truncated forwards (only slots 0..k for step k) batched across members and sequences,
// never one full-length forward per kept position.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace aobench {

class ModelPlugin;

struct EnsembleOptions {
  std::vector<int64_t> sizes = {1, 2, 4, 8, 16, 32, 64};  // M values; members are nested (first M of max M)
  int64_t positions = 0;               // 0 = every step k; else a seeded subsample of this many steps per sequence
  torch::Tensor steps;                 // (N, T) bool: evaluate exactly these steps (overrides positions)
  int64_t max_batch_tokens = 1 << 18;  // slots per network call (memory bound)
};

struct EnsembleResult {
  // nll[m] (N, T) float64: −log of the member-averaged probability for ensemble size sizes[m] at every
  // step k (generation index); NaN where the step was not evaluated (subsampling).
  std::vector<torch::Tensor> nll;
  torch::Tensor evaluated;  // (N, T) bool: steps that were evaluated
  std::vector<int64_t> sizes;
};

// tokens (N, T) int64, base_order (N, T) int64 permutations (member 0 = the unshuffled context in this
// order). Members j ≥ 1 reshuffle the context set σ(<k) with a uniform permutation drawn from `gen`,
// each token keeping its original position; the target σ(k) is fixed.
EnsembleResult context_order_ensemble(ModelPlugin& model, const torch::Tensor& tokens, const torch::Tensor& base_order,
                                      const EnsembleOptions& options, at::Generator& gen);

}  // namespace aobench
