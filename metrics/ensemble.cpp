// Implements: context-order ensembles (spec-ao-gpt §3.3, metrics/ensemble.h). Member 0 comes from one full
// chain forward; member j ≥ 1 at step k reshuffles the context σ(<k) and runs a TRUNCATED forward of k+1
// slots (causal attention: step k depends on slots 0..k only), many (member, k) rows per call, padded at
// the end. Probabilities, not log-probabilities, are averaged: nll_M = −log mean_{j<M} exp(−ℓ_j), float64.
#include "metrics/ensemble.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "harness/errors.h"
#include "harness/plugin_api.h"

namespace aobench {
namespace {

// One batch of truncated member rows: blocks of rows sharing a step k, padded to the widest on flush.
struct RowBatch {
  std::vector<torch::Tensor> tok, pos;  // (R_i, k_i + 1) each
  std::vector<int64_t> k;               // step of each block
  std::vector<int64_t> member0;         // first member index (1-based) of each block's rows
  int64_t rows = 0, width = 0;
};

}  // namespace

EnsembleResult context_order_ensemble(ModelPlugin& model, const torch::Tensor& tokens,
                                      const torch::Tensor& base_order, const EnsembleOptions& options,
                                      at::Generator& gen) {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(tokens.dim() == 2 && tokens.sizes() == base_order.sizes(), "ensemble: tokens ", tokens.sizes(),
              " and base_order ", base_order.sizes(), " must both be (N, T)");
  if (options.sizes.empty())
    throw ConfigError("ensemble sizes are empty", "set eval.ensemble, e.g. [1, 2, 4]");
  for (int64_t m : options.sizes)
    if (m < 1) throw ConfigError("ensemble size " + std::to_string(m) + " must be >= 1", "set eval.ensemble");
  const int64_t N = tokens.size(0), T = tokens.size(1);
  const int64_t M = *std::max_element(options.sizes.begin(), options.sizes.end());
  if (options.positions < 0 || options.positions > T)
    throw ConfigError("ensemble positions " + std::to_string(options.positions) +
                          " must lie in [0, T=" + std::to_string(T) + "]",
                      "0 evaluates every step");
  const auto dev = tokens.device();
  const auto tok_cpu = tokens.to(torch::kCPU, torch::kLong);
  const auto ord_cpu = base_order.to(torch::kCPU, torch::kLong);
  const auto x_sigma = tok_cpu.gather(1, ord_cpu);  // (N, T) tokens in generation order

  // Slots per chain_log_probs call: the option, and at most 2^28 output floats (1 GiB) per call since
  // chain_log_probs returns (rows, S, V) log-probabilities.
  const int64_t V = model.vocab_size();
  const int64_t budget =
      std::max<int64_t>(1, std::min<int64_t>(options.max_batch_tokens, (int64_t{1} << 28) / V));

  // Member 0: the un-reshuffled chain, a few full rows per call. ell (N, M, T) float64.
  auto ell = torch::full({N, M, T}, std::numeric_limits<double>::quiet_NaN(), torch::kFloat64);
  const int64_t rows_per_call = std::max<int64_t>(1, budget / T);
  for (int64_t r0 = 0; r0 < N; r0 += rows_per_call) {
    const int64_t r = std::min(rows_per_call, N - r0);
    auto xs = x_sigma.narrow(0, r0, r), os = ord_cpu.narrow(0, r0, r);
    auto lp = model.chain_log_probs(xs.to(dev), os.to(dev), os.to(dev));  // (r, T, V)
    auto l0 = -lp.gather(2, xs.to(dev).unsqueeze(-1)).squeeze(-1).to(torch::kCPU, torch::kFloat64);  // (r, T)
    ell.narrow(0, r0, r).select(1, 0).copy_(l0);
  }

  // Steps evaluated per sequence: all, or a seeded subsample of `positions` steps.
  auto evaluated = torch::zeros({N, T}, torch::kBool);
  std::vector<std::vector<int64_t>> steps(N);
  for (int64_t n = 0; n < N; ++n) {
    if (options.positions == 0) {
      for (int64_t k = 0; k < T; ++k) steps[n].push_back(k);
    } else {
      auto pick = torch::randperm(T, gen, torch::kLong).narrow(0, 0, options.positions);
      for (int64_t i = 0; i < options.positions; ++i) steps[n].push_back(pick[i].item<int64_t>());
      std::sort(steps[n].begin(), steps[n].end());
    }
    for (int64_t k : steps[n]) evaluated[n][k] = true;
  }

  // Members j ≥ 1. Steps 0 and 1 have a single possible context order, so every member equals member 0.
  for (int64_t n = 0; n < N; ++n) {
    auto a_ell = ell.accessor<double, 3>();
    for (int64_t k : steps[n])
      if (k <= 1)
        for (int64_t j = 1; j < M; ++j) a_ell[n][j][k] = a_ell[n][0][k];
  }
  if (M > 1) {
    for (int64_t n = 0; n < N; ++n) {
      const auto xs = x_sigma[n], os = ord_cpu[n];  // (T)
      RowBatch batch;
      auto flush = [&]() {
        if (batch.rows == 0) return;
        const int64_t S = batch.width;
        std::vector<torch::Tensor> tok, pos;
        for (size_t b = 0; b < batch.tok.size(); ++b) {
          const int64_t pad = S - batch.tok[b].size(1);  // padding at the END never affects earlier slots
          tok.push_back(torch::constant_pad_nd(batch.tok[b], {0, pad}, 0));
          pos.push_back(torch::constant_pad_nd(batch.pos[b], {0, pad}, 0));
        }
        auto ctx_tok = torch::cat(tok).to(dev), ctx_pos = torch::cat(pos).to(dev);  // (R, S)
        auto lp = model.chain_log_probs(ctx_tok, ctx_pos, ctx_pos);                 // (R, S, V)
        int64_t row = 0;
        for (size_t b = 0; b < batch.tok.size(); ++b) {
          const int64_t k = batch.k[b], R = batch.tok[b].size(0);
          // The last real slot (k) reads context token k−1 and targets σ(k), whose token is x_σ(k).
          auto target_tok = xs[k].item<int64_t>();
          auto l = -lp.narrow(0, row, R)
                        .select(1, k)
                        .select(1, target_tok)
                        .to(torch::kCPU, torch::kFloat64);  // (R)
          ell[n].narrow(0, batch.member0[b], R).select(1, k).copy_(l);
          row += R;
        }
        batch = RowBatch();
      };
      // Descending k groups similar lengths together, so padding wastes little.
      for (auto it = steps[n].rbegin(); it != steps[n].rend(); ++it) {
        const int64_t k = *it;
        if (k <= 1) continue;
        // (M−1, k) uniform permutations of the context indices 0..k−1, then the target index k.
        auto perm = torch::rand({M - 1, k}, gen, torch::kFloat64).argsort(int64_t{1});
        auto idx = torch::cat({perm, torch::full({M - 1, 1}, k, torch::kLong)}, 1);  // (M−1, k+1)
        auto pos_rows = os.index({idx});                                             // σ'(i), (M−1, k+1)
        auto tok_rows = xs.index({idx});                                             // x_σ'(i)
        int64_t done = 0;
        while (done < M - 1) {
          const int64_t width = std::max(batch.width, k + 1);
          int64_t fit = budget / width - batch.rows;
          if (fit <= 0 && batch.rows > 0) {
            flush();
            continue;
          }
          fit = std::max<int64_t>(1, std::min(fit, M - 1 - done));
          batch.tok.push_back(tok_rows.narrow(0, done, fit));
          batch.pos.push_back(pos_rows.narrow(0, done, fit));
          batch.k.push_back(k);
          batch.member0.push_back(1 + done);
          batch.rows += fit;
          batch.width = width;
          done += fit;
        }
      }
      flush();
    }
  }

  EnsembleResult res;
  res.sizes = options.sizes;
  res.evaluated = evaluated;
  for (int64_t m : options.sizes) {
    // −log((1/m) Σ_{j<m} exp(−ℓ_j)) = log m − logsumexp(−ℓ), float64.
    auto nll = std::log(static_cast<double>(m)) - torch::logsumexp(-ell.narrow(1, 0, m), 1);  // (N, T)
    res.nll.push_back(
        torch::where(evaluated, nll, torch::full_like(nll, std::numeric_limits<double>::quiet_NaN())));
  }
  return res;
}

}  // namespace aobench
