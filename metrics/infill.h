// Implements: the infilling likelihood benchmark (eval.mode=infill): in each held-out window a set H of
// positions is hidden (one span at the start, middle or end, several spans, or a random subset, at a
// controlled ratio) and every model scores the hidden tokens given the visible ones, −log p(x_H | x_V), by
// the best route its paradigm has:
//   any-order decoders (σ-GPT, AO-GPT)   exact: the visible tokens first in the order, then K random orders
//                                        of the hidden ones; also the mixture of those K orders and the
//                                        context-order ensembles of eval.ensemble
//   masked-diffusion encoders (SEDD, RADD) exact: the same orders through the encoder chain; bound: the
//                                        conditional ELBO (visible tokens never masked)
//   left-to-right decoders (GPT)         prefix-only: each hidden token given the tokens left of it; the
//                                        visible tokens right of it are not seen (a proper distribution
//                                        over x_H, exact, that conditions on less)
// Hidden positions come from eval.seed alone, window by window, so every model of a comparison is scored on
// the same positions of the same windows.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "metrics/generation.h"
#include "metrics/likelihood.h"
#include "metrics/stats.h"

namespace aobench {

class ModelPlugin;
class TokenFile;

// Hidden tokens per window: round(ratio · T), at least 1 and at most T − 1 (a window keeps one visible token).
int64_t hidden_count(double ratio, int64_t T);

// (N, T) bool, true = hidden, for N windows of length T at `place` (start | middle | end | spans | random)
// with hidden_count(ratio, T) tokens per row; "spans" places `spans` disjoint spans, separated by at least
// one visible token, with lengths as equal as possible, at uniformly random places. Draws from `gen` only.
torch::Tensor hide_positions(const std::string& place, double ratio, int64_t spans, int64_t N, int64_t T,
                             at::Generator& gen);

// (N, T) int64 generation orders: each row's visible positions left to right, then its hidden positions in a
// uniformly random order (from `gen`). hidden (N, T) bool with the same count in every row.
torch::Tensor visible_first_order(const torch::Tensor& hidden, at::Generator& gen);

// One result per (place, ratio, protocol) on `file`'s evaluation windows: NLL per hidden token with its
// standard error over windows, the protocol in words, results.json names from `metric` ("nll_k4",
// "nll_mix4", "nll_M8", "nelbo", "nll_prefix") and `infill` ("middle_r50").
std::vector<LikelihoodResult> evaluate_infill(ModelPlugin& model, const TokenFile& file, const DatasetInfo& info,
                                              const EvalOptions& options, torch::Device device);

// Fillings (eval.infill.fill): the hidden positions of evaluate_infill's windows — the same positions, the first
// eval.infill.fill_windows windows — filled by model.sample() with the visible tokens as the prompt. Any-order
// decoders and encoders condition every draw on all visible tokens (capability infill); a left-to-right model
// draws each hidden token given the tokens left of it (forced_tokens: the visible ones to its right are kept in
// place but unseen). "greedy" takes the most probable token at each draw (the order or unmasking schedule is
// still the sampler's), "sampled" draws at eval.infill.temperature / top_p.
struct FillResult {
  std::string dataset;
  std::string infill;       // "middle_r50"
  std::string fill;         // "greedy" | "sampled"
  MeanStderr accuracy;      // per window: the fraction of its hidden tokens equal to the truth
  MeanStderr exact;         // per window: 1 when every hidden token equals the truth, else 0
  bool judged = false;      // eval.infill.judge set: the two below hold
  GenPplSummary judge;      // the judge's perplexity of the filled tokens (the visible ones are context, unscored)
  GenPplSummary truth;      // the same for the true hidden tokens: the level a perfect filling would reach
  double ms_per_token = 0;  // wall time of the sample() calls per filled token
  int64_t windows = 0, hidden = 0, steps = 0, network_calls = 0;  // hidden per window; calls per sample()
  std::string protocol;
};

// `judge` (nullptr = none): a left-to-right model of the same tokens whose block size covers the window.
std::vector<FillResult> evaluate_fillings(ModelPlugin& model, const TokenFile& file, const DatasetInfo& info,
                                          const EvalOptions& options, torch::Device device, ModelPlugin* judge);

}  // namespace aobench
