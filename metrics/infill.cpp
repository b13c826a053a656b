// Implements: metrics/infill.h.
#include "metrics/infill.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "core/device.h"
#include "core/errors.h"
#include "core/order.h"
#include "core/plugin_api.h"
#include "core/progress.h"
#include "datasets/token_file.h"
#include "metrics/ensemble.h"

namespace aobench {
namespace {

// A seed per (place, ratio) from eval.seed, FNV-1a over the pair's name: the hidden positions of "middle"
// at 0.5 are the same whichever other places and ratios a call evaluates.
uint64_t mask_seed(uint64_t seed, const std::string& infill_name) {
  uint64_t h = 1469598103934665603ULL ^ seed;
  for (unsigned char c : infill_name) h = (h ^ c) * 1099511628211ULL;
  return h;
}

std::string infill_name(const std::string& place, double ratio) {
  return place + "_r" + std::to_string(std::llround(ratio * 100));
}

// Spans the "spans" place can fit: each span ≥ 1 token, one visible token between neighbours.
int64_t fitting_spans(int64_t spans, int64_t n, int64_t T) {
  return std::max<int64_t>(1, std::min({spans, n, T - n + 1}));
}

// Σ of nll (B, T) where `take` (B, T) bool, per row, float64 on the CPU. Every taken entry must be scored.
std::vector<std::pair<double, int64_t>> sum_taken(const NllOutput& out, const torch::Tensor& take,
                                                  const std::string& plugin) {
  auto t = take.to(torch::kCPU, torch::kBool);
  auto scored = out.scored.to(torch::kCPU, torch::kBool);
  if ((t & ~scored).any().item<bool>())
    throw ConfigError("eval.mode=infill: plugin '" + plugin + "' cannot score a hidden token (generation index 0)",
                      "a left-to-right model scores position 0 only with model.start_token=true; leave out "
                      "eval.infill.places \"start\" for it");
  return nll_row_sums(out.nll, t, /*skip_first=*/false, /*require_first=*/false);
}

// One protocol's accumulator and its labels.
struct Row {
  enum Kind { kOrders, kMixture, kEnsemble, kBound, kPrefix };
  Row(Kind kind, std::string key, std::string protocol, int64_t orders = 1, size_t member = 0, int64_t ensemble = 0,
      int64_t mc_steps = 0)
      : kind(kind),
        key(std::move(key)),
        protocol(std::move(protocol)),
        orders(orders),
        member(member),
        ensemble(ensemble),
        mc_steps(mc_steps) {}
  Kind kind;
  std::string key;       // "k4", "mix4", "m8", "elbo", "prefix"
  std::string protocol;  // in words
  int64_t orders;
  size_t member;  // kEnsemble: the index of its size in eval.ensemble
  int64_t ensemble, mc_steps;
  NllTotals totals;
};

}  // namespace

int64_t hidden_count(double ratio, int64_t T) {
  TORCH_CHECK(T >= 2, "infill needs windows of at least 2 tokens, got ", T);
  return std::clamp<int64_t>(std::llround(ratio * static_cast<double>(T)), 1, T - 1);
}

torch::Tensor hide_positions(const std::string& place, double ratio, int64_t spans, int64_t N, int64_t T,
                             at::Generator& gen) {
  const int64_t n = hidden_count(ratio, T);
  auto hidden = torch::zeros({N, T}, torch::kBool);
  if (place == "start" || place == "middle" || place == "end") {
    const int64_t at = place == "start" ? 0 : place == "end" ? T - n : (T - n) / 2;
    hidden.narrow(1, at, n).fill_(true);
  } else if (place == "random") {
    for (int64_t r = 0; r < N; ++r)
      hidden[r].index_fill_(0, torch::randperm(T, gen, torch::kLong).narrow(0, 0, n), true);
  } else if (place == "spans") {
    const int64_t s = fitting_spans(spans, n, T), free = T - n - (s - 1);
    auto acc = hidden.accessor<bool, 2>();
    for (int64_t r = 0; r < N; ++r) {
      // Lengths n/s, the remainder going to s random spans; gaps: a uniform composition of the free visible
      // tokens into s + 1 parts (stars and bars: s bars among free + s places), interior gaps + 1.
      auto extra = torch::randperm(s, gen, torch::kLong).lt(n % s);  // (s) bool
      auto bars = std::get<0>(torch::randperm(free + s, gen, torch::kLong).narrow(0, 0, s).sort());
      int64_t pos = 0, prev_bar = -1;
      for (int64_t i = 0; i < s; ++i) {
        const int64_t bar = bars[i].item<int64_t>();
        pos += bar - prev_bar - 1 + (i > 0 ? 1 : 0);  // the gap before span i
        prev_bar = bar;
        const int64_t len = n / s + (extra[i].item<bool>() ? 1 : 0);
        for (int64_t j = 0; j < len; ++j) acc[r][pos + j] = true;
        pos += len;
      }
    }
  } else {
    throw ConfigError("eval.infill.places: unknown place '" + place + "'", "use start, middle, end, spans or random");
  }
  return hidden;
}

torch::Tensor visible_first_order(const torch::Tensor& hidden, at::Generator& gen) {
  const int64_t N = hidden.size(0), T = hidden.size(1);
  auto h = hidden.to(torch::kCPU, torch::kBool);
  // Sort keys: a visible position p keeps p; a hidden one gets T + u, u uniform in [0, 1).
  auto pos = torch::arange(T, torch::kFloat64).expand({N, T});
  auto key = torch::where(h, T + torch::rand({N, T}, gen, torch::kFloat64), pos);
  return key.argsort(int64_t{1}).to(hidden.device());
}

std::vector<LikelihoodResult> evaluate_infill(ModelPlugin& model, const TokenFile& file, const DatasetInfo& info,
                                              const EvalOptions& o, torch::Device device) {
  const int64_t T = model.block_size();
  const PluginInfo plugin = model.info();
  const auto& caps = plugin.capabilities;
  const bool encoder = plugin.paradigm == Paradigm::kMaskedDiffusionEncoder;
  const int64_t K = o.orders;
  const int64_t M = *std::max_element(o.ensemble.begin(), o.ensemble.end());
  const EvalWindows windows = eval_windows(file, T, o);
  const auto& starts = windows.starts;
  const size_t n_windows = windows.used;

  torch::NoGradGuard no_grad;
  AutocastScope autocast(o.autocast_bf16);
  model.module().eval();
  std::vector<LikelihoodResult> results;
  for (const std::string& place : o.infill.places) {
    for (double ratio : o.infill.ratios) {
      const std::string name = infill_name(place, ratio);
      // eval.first_token=skip keeps position 0 visible for every model (a GPT without a start token cannot
      // score it): the places and ratios apply to positions 1 … T−1.
      const int64_t first_hidable = o.skip_first ? 1 : 0, hidable = T - first_hidable;
      const int64_t n = hidden_count(ratio, hidable), V = T - n;
      at::Generator mask_gen = at::detail::createCPUGenerator(mask_seed(o.seed, name));
      at::Generator gen = at::detail::createCPUGenerator(o.seed);  // orders, members, ELBO noise
      const auto N = static_cast<int64_t>(n_windows);
      const auto hidden_all = torch::cat({torch::zeros({N, first_hidable}, torch::kBool),
                                          hide_positions(place, ratio, o.infill.spans, N, hidable, mask_gen)},
                                         1);  // (N, T)

      std::ostringstream what;
      what << "infill " << place;
      if (place == "spans") what << " (" << fitting_spans(o.infill.spans, n, hidable) << " spans)";
      what << ", " << n << " of " << T << " tokens hidden" << (first_hidable ? " (position 0 always visible)" : "");
      std::vector<Row> rows;
      const std::string orders = "visible tokens first, K=" + std::to_string(K) + " random orders of the hidden ones";
      if (caps.any_order) {
        rows.emplace_back(Row::kOrders, "k" + std::to_string(K),
                          (encoder ? "exact encoder chain, " : "exact, ") + orders, K);
        if (K > 1)
          rows.emplace_back(Row::kMixture, "mix" + std::to_string(K),
                            "exact, the mixture of those K=" + std::to_string(K) + " orders", K);
        if (caps.chain_log_probs && M > 1)
          for (size_t m = 0; m < o.ensemble.size(); ++m)
            rows.emplace_back(
                Row::kEnsemble, "m" + std::to_string(o.ensemble[m]),
                "exact, context-order ensemble M=" + std::to_string(o.ensemble[m]) + " over a visible-first order", 1,
                m, o.ensemble[m]);
        if (caps.elbo)
          rows.emplace_back(
              Row::kBound, "elbo",
              "conditional ELBO with " + std::to_string(o.mc_steps) + " MC steps (visible tokens never masked)", 1, 0,
              0, o.mc_steps);
      } else {
        rows.emplace_back(
            Row::kPrefix, "prefix",
            "prefix-only, exact: each hidden token given the tokens left of it (the visible ones to its right "
            "unseen)");
      }

      Progress progress("eval " + info.name + " infill " + name, static_cast<int64_t>(n_windows), "windows");
      const auto t0 = std::chrono::steady_clock::now();
      for (size_t first = 0; first < n_windows; first += static_cast<size_t>(o.batch_size)) {
        const int64_t B = static_cast<int64_t>(std::min<size_t>(static_cast<size_t>(o.batch_size), n_windows - first));
        auto tokens = load_windows(file, starts, first, static_cast<size_t>(B), T, device);  // (B, T)
        auto hidden = hidden_all.narrow(0, static_cast<int64_t>(first), B);                  // (B, T) bool, CPU
        auto tail = torch::zeros({B, T}, torch::kBool);                                      // generation indices ≥ V
        tail.narrow(1, V, n).fill_(true);
        if (!caps.any_order) {
          auto order = torch::arange(T, torch::dtype(torch::kInt64).device(device)).expand({B, T}).contiguous();
          rows[0].totals.add_sequences({sum_taken(model.log_prob(tokens, order, gen), hidden, plugin.name)});
        } else {
          std::vector<std::vector<std::pair<double, int64_t>>> per_order;
          torch::Tensor first_order;
          for (int64_t k = 0; k < K; ++k) {
            auto order = visible_first_order(hidden, gen).to(device);  // (B, T)
            if (k == 0) first_order = order;
            per_order.push_back(sum_taken(model.log_prob(tokens, order, gen), tail, plugin.name));
          }
          EnsembleResult members;  // the context-order ensembles over the first order, hidden steps only
          if (caps.chain_log_probs && M > 1) {
            EnsembleOptions ens;
            ens.sizes = o.ensemble;
            ens.steps = tail;
            members = context_order_ensemble(model, tokens, first_order, ens, gen);
          }
          NllOutput bound;  // visible positions kept: the conditional ELBO
          if (caps.elbo) bound = model.elbo(tokens, o.mc_steps, gen, (~hidden).to(device));
          for (auto& row : rows) {
            switch (row.kind) {
              case Row::kOrders:
                row.totals.add_sequences(per_order);
                break;
              case Row::kMixture: {  // −log((1/K) Σ_k p_k(x_H | x_V)), per window
                std::vector<std::pair<double, int64_t>> mix;
                for (int64_t b = 0; b < B; ++b) {
                  auto neg = torch::empty({K}, torch::kFloat64);  // (K) −nats of each order
                  for (int64_t k = 0; k < K; ++k) neg[k] = -per_order[k][b].first;
                  mix.emplace_back(std::log(static_cast<double>(K)) - torch::logsumexp(neg, 0).item<double>(), n);
                }
                row.totals.add_sequences({mix});
                break;
              }
              case Row::kEnsemble:
                row.totals.add_sequences(
                    {sum_taken({members.nll[row.member], members.evaluated, false}, tail, plugin.name)});
                break;
              case Row::kBound:
                row.totals.add_sequences({sum_taken(bound, hidden, plugin.name)});
                break;
              case Row::kPrefix:
                break;  // left-to-right models only, above
            }
          }
        }
        progress.advance(B);
      }
      if (device.is_cuda()) torch::cuda::synchronize(device.index() < 0 ? 0 : device.index());
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      progress.finish();

      for (auto& row : rows) {
        LikelihoodResult r;
        r.dataset = info.name;
        r.mode = "infill";
        r.infill = name;
        r.metric = row.key;
        r.windows_used = static_cast<int64_t>(n_windows);
        r.windows_total = static_cast<int64_t>(starts.size());
        // The K orders of "k" are K measurements of each window; every other row measures it once.
        finish_result(row.totals, row.kind == Row::kOrders ? row.orders : 1, /*file_tokens=*/0, /*file_bytes=*/0, r);
        r.orders = row.orders;
        r.ensemble_size = row.ensemble;
        r.mc_steps = row.mc_steps;
        r.is_bound = row.kind == Row::kBound;
        r.protocol = what.str() + ": " + row.protocol + "; " + std::to_string(T) + "-token windows; " +
                     (info.packing.empty() ? "unknown" : info.packing) + " packing";
        if (n_windows < starts.size())
          r.protocol += "; " + std::to_string(n_windows) + "/" + std::to_string(starts.size()) + " windows";
        r.wall_s = wall;
        r.tok_per_s = wall > 0 ? static_cast<double>(n_windows) * static_cast<double>(n) / wall : 0;
        results.push_back(r);
      }
    }
  }
  return results;
}

}  // namespace aobench
