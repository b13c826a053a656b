// Implements: context-order ensembles (spec-ao-gpt §3.3, metrics/ensemble.h). Member 0 comes from one full
// chain forward; member j ≥ 1 at step k reshuffles the context σ(<k) and runs a TRUNCATED forward of k+1
// slots (causal attention: step k depends on slots 0..k only). Steps are processed one at a time across all
// sequences, so every row of a call has the same length and only the last slot goes through the head
// (chain_log_probs_last). Probabilities, not log-probabilities, are averaged: nll_M = −log mean_{j<M} exp(−ℓ_j), float64.
#include "metrics/ensemble.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/errors.h"
#include "core/plugin_api.h"

namespace aobench {

EnsembleResult context_order_ensemble(ModelPlugin& model, const torch::Tensor& tokens, const torch::Tensor& base_order,
                                      const EnsembleOptions& options, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(tokens.dim() == 2 && tokens.sizes() == base_order.sizes(), "ensemble: tokens ", tokens.sizes(),
              " and base_order ", base_order.sizes(), " must both be (N, T)");
  if (options.sizes.empty()) throw ConfigError("ensemble sizes are empty", "set eval.ensemble, e.g. [1, 2, 4]");
  for (int64_t m : options.sizes)
    if (m < 1) throw ConfigError("ensemble size " + std::to_string(m) + " must be >= 1", "set eval.ensemble");
  const int64_t N = tokens.size(0), T = tokens.size(1);
  const int64_t M = *std::max_element(options.sizes.begin(), options.sizes.end());
  if (options.positions < 0 || options.positions > T)
    throw ConfigError(
        "ensemble positions " + std::to_string(options.positions) + " must lie in [0, T=" + std::to_string(T) + "]",
        "0 evaluates every step");
  const auto dev = tokens.device();
  const auto tok_cpu = tokens.to(torch::kCPU, torch::kLong);
  const auto ord_cpu = base_order.to(torch::kCPU, torch::kLong);
  const auto x_sigma = tok_cpu.gather(1, ord_cpu);                        // (N, T) tokens in generation order
  const int64_t budget = std::max<int64_t>(1, options.max_batch_tokens);  // slots per network call

  // Member 0: the un-reshuffled chain, full rows. ell (N, M, T) float64. The full (rows, T, V) output
  // is capped at 2^28 floats (1 GiB) per call.
  auto ell = torch::full({N, M, T}, std::numeric_limits<double>::quiet_NaN(), torch::kFloat64);
  const int64_t rows_per_call = std::max<int64_t>(1, std::min(budget, (int64_t{1} << 28) / model.vocab_size()) / T);
  for (int64_t r0 = 0; r0 < N; r0 += rows_per_call) {
    const int64_t r = std::min(rows_per_call, N - r0);
    auto xs = x_sigma.narrow(0, r0, r), os = ord_cpu.narrow(0, r0, r);
    auto lp = model.chain_log_probs(xs.to(dev), os.to(dev), os.to(dev));                             // (r, T, V)
    auto l0 = -lp.gather(2, xs.to(dev).unsqueeze(-1)).squeeze(-1).to(torch::kCPU, torch::kFloat64);  // (r, T)
    ell.narrow(0, r0, r).select(1, 0).copy_(l0);
  }

  // Steps evaluated per sequence: all, or a seeded subsample of `positions` steps.
  auto evaluated = torch::zeros({N, T}, torch::kBool);
  if (options.steps.defined()) {
    TORCH_CHECK(options.steps.sizes() == tokens.sizes(), "ensemble: steps ", options.steps.sizes(), " must be (N, T)");
    evaluated.copy_(options.steps.to(torch::kCPU, torch::kBool));
  } else if (options.positions == 0) {
    evaluated.fill_(true);
  } else {
    for (int64_t n = 0; n < N; ++n)
      evaluated[n].index_fill_(0, torch::randperm(T, gen, torch::kLong).narrow(0, 0, options.positions), true);
  }

  // Steps 0 and 1 have a single possible context order, so every member equals member 0.
  for (int64_t k = 0; k < std::min<int64_t>(T, 2); ++k)
    ell.select(2, k).narrow(1, 1, M - 1).copy_(ell.select(2, k).narrow(1, 0, 1).expand({N, M - 1}));

  // Members j ≥ 1, step-major: for each step k every (sequence, member) row has the same length k+1, so a
  // call needs only the last slot's log-probs (chain_log_probs_last) and rows of all sequences share calls.
  const auto eval_acc = evaluated.accessor<bool, 2>();
  for (int64_t k = 2; k < T && M > 1; ++k) {
    std::vector<int64_t> seqs;
    for (int64_t n = 0; n < N; ++n)
      if (eval_acc[n][k]) seqs.push_back(n);
    if (seqs.empty()) continue;
    const int64_t S = static_cast<int64_t>(seqs.size());
    auto seq_idx = torch::tensor(seqs, torch::kLong);  // (S)
    // (S, M−1, k) uniform permutations of the context indices 0..k−1, then the target index k.
    auto perm = torch::rand({S, M - 1, k}, gen, torch::kFloat64).argsort(int64_t{2});
    auto idx = torch::cat({perm, torch::full({S, M - 1, 1}, k, torch::kLong)}, 2).view({S, -1});
    auto pos_rows = ord_cpu.index_select(0, seq_idx).gather(1, idx).view({S * (M - 1), k + 1});  // σ'(i)
    auto tok_rows = x_sigma.index_select(0, seq_idx).gather(1, idx).view({S * (M - 1), k + 1});  // x_σ'(i)
    auto target = x_sigma.index_select(0, seq_idx).select(1, k).repeat_interleave(M - 1);        // (S·(M−1))
    std::vector<torch::Tensor> parts;
    const int64_t rows = S * (M - 1), chunk = std::max<int64_t>(1, budget / (k + 1));
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t r = std::min(chunk, rows - r0);
      auto pos = pos_rows.narrow(0, r0, r).to(dev);
      // The last slot (k) reads context token k−1 and targets σ(k), whose token is x_σ(k).
      auto lp = model.chain_log_probs_last(tok_rows.narrow(0, r0, r).to(dev), pos, pos);  // (r, V)
      parts.push_back(-lp.gather(1, target.narrow(0, r0, r).to(dev).unsqueeze(1)).squeeze(1));
    }
    auto l = torch::cat(parts).to(torch::kCPU, torch::kFloat64).view({S, M - 1});
    ell.select(2, k).index_put_({seq_idx, torch::indexing::Slice(1, M)}, l);
  }

  EnsembleResult res;
  res.sizes = options.sizes;
  res.evaluated = evaluated;
  for (int64_t m : options.sizes) {
    // −log((1/m) Σ_{j<m} exp(−ℓ_j)) = log m − logsumexp(−ℓ), float64.
    auto nll = std::log(static_cast<double>(m)) - torch::logsumexp(-ell.narrow(1, 0, m), 1);  // (N, T)
    res.nll.push_back(torch::where(evaluated, nll, torch::full_like(nll, std::numeric_limits<double>::quiet_NaN())));
  }
  return res;
}

}  // namespace aobench
