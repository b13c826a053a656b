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
#include "metrics/generation.h"

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

// The hidden positions of (place, ratio) in the first N evaluation windows, from eval.seed, the place and the
// ratio only: (N, T) bool with n true per row; the first rows do not depend on N (rows are drawn in turn).
// eval.first_token=skip keeps position 0 visible for every model (a GPT without a start token cannot score it):
// the places and ratios then apply to positions 1 … T−1.
struct HiddenSet {
  torch::Tensor hidden;  // (N, T) bool, CPU
  int64_t n = 0;         // hidden per row
  std::string what;      // "infill middle, 64 of 128 tokens hidden (position 0 always visible)"
};

HiddenSet hidden_set(const std::string& place, double ratio, const EvalOptions& o, int64_t N, int64_t T) {
  const int64_t first_hidable = o.skip_first ? 1 : 0, hidable = T - first_hidable;
  HiddenSet hs;
  hs.n = hidden_count(ratio, hidable);
  at::Generator mask_gen = at::detail::createCPUGenerator(mask_seed(o.seed, infill_name(place, ratio)));
  hs.hidden = torch::cat({torch::zeros({N, first_hidable}, torch::kBool),
                          hide_positions(place, ratio, o.infill.spans, N, hidable, mask_gen)},
                         1);
  std::ostringstream what;
  what << "infill " << place;
  if (place == "spans") what << " (" << fitting_spans(o.infill.spans, hs.n, hidable) << " spans)";
  what << ", " << hs.n << " of " << T << " tokens hidden" << (first_hidable ? " (position 0 always visible)" : "");
  hs.what = what.str();
  return hs;
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
      const HiddenSet hs = hidden_set(place, ratio, o, static_cast<int64_t>(n_windows), T);
      const auto& hidden_all = hs.hidden;  // (N, T)
      const int64_t n = hs.n, V = T - n;
      at::Generator gen = at::detail::createCPUGenerator(o.seed);  // orders, members, ELBO noise
      const std::string& what = hs.what;
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
      synchronize_device(device);
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
        r.protocol = what + "; " + row.protocol + "; " + std::to_string(T) + "-token windows; " +
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

namespace {

// The nucleus keeps the tokens whose preceding probability mass is below top-p: at 1e-6 only the most probable
// one, whose probability is at least 1/V > 1e-6 for any vocabulary under a million tokens — a greedy draw.
constexpr double kGreedyTopP = 1e-6;

// Per window of `rows` (B, T) ids: the positions where `given` (B, T) bool is true, as the given lists of
// score_samples.
std::vector<std::vector<int64_t>> positions_where(const torch::Tensor& given) {
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(given.size(0)));
  auto g = given.accessor<bool, 2>();
  for (int64_t b = 0; b < given.size(0); ++b)
    for (int64_t t = 0; t < given.size(1); ++t)
      if (g[b][t]) out[static_cast<size_t>(b)].push_back(t);
  return out;
}

std::vector<std::vector<int64_t>> rows_of(const torch::Tensor& ids) {  // (B, T) int64 CPU → B vectors
  std::vector<std::vector<int64_t>> out;
  auto c = ids.contiguous();
  for (int64_t b = 0; b < c.size(0); ++b)
    out.emplace_back(c[b].data_ptr<int64_t>(), c[b].data_ptr<int64_t>() + c.size(1));
  return out;
}

}  // namespace

std::vector<FillResult> evaluate_fillings(ModelPlugin& model, const TokenFile& file, const DatasetInfo& info,
                                          const EvalOptions& o, torch::Device device, ModelPlugin* judge) {
  std::vector<FillResult> results;
  if (o.infill.fill.empty()) return results;
  const int64_t T = model.block_size();
  const PluginInfo plugin = model.info();
  const bool anywhere = plugin.capabilities.infill;  // else forced tokens: each draw sees only its left
  if (!anywhere && !plugin.capabilities.forced_tokens)
    throw ConfigError(
        "eval.infill.fill: plugin '" + plugin.name + "' cannot sample with given ids after free ones",
        "it declares neither the infill nor the forced_tokens capability; set eval.infill.fill=[] for it");
  if (judge != nullptr && (judge->block_size() < T || judge->vocab_size() < model.vocab_size()))
    throw ConfigError("eval.infill.judge reads " + std::to_string(judge->block_size()) + " tokens of a vocabulary of " +
                          std::to_string(judge->vocab_size()) + "; the fillings are " + std::to_string(T) +
                          "-token windows of a vocabulary of " + std::to_string(model.vocab_size()),
                      "judge with a gpt run (or GPT-2 folder) of the same tokenizer and at least this context");
  const EvalWindows windows = eval_windows(file, T, o);
  const auto N = static_cast<int64_t>(windows.used);
  const int64_t F = std::min<int64_t>(o.infill.fill_windows, N);
  const auto truth = load_windows(file, windows.starts, 0, static_cast<size_t>(F), T, torch::kCPU);  // (F, T)

  torch::NoGradGuard no_grad;
  model.module().eval();
  for (const std::string& place : o.infill.places) {
    for (double ratio : o.infill.ratios) {
      const std::string name = infill_name(place, ratio);
      const HiddenSet hs = hidden_set(place, ratio, o, N, T);
      const auto hidden = hs.hidden.narrow(0, 0, F);  // (F, T) bool
      const int64_t n = hs.n;
      const int64_t steps = anywhere ? (o.infill.fill_steps > 0 ? std::min(o.infill.fill_steps, n) : n) : n;
      const auto visible = positions_where(~hidden);
      GenPplSummary truth_judged;  // the judge on the true hidden tokens: once per (place, ratio)
      if (judge != nullptr)
        truth_judged = summarize_scores(score_samples(*judge, rows_of(truth), o.batch_size, device, visible));
      for (const std::string& fill : o.infill.fill) {
        std::vector<double> accuracy, exact;
        std::vector<std::vector<int64_t>> filled;
        double seconds = 0;
        int64_t calls = 0;
        Progress progress("fill " + info.name + " " + name + " " + fill, F, "windows");
        for (int64_t first = 0; first < F; first += o.batch_size) {
          const int64_t B = std::min(o.batch_size, F - first);
          const auto tokens = truth.narrow(0, first, B);  // (B, T)
          const auto h = hidden.narrow(0, first, B);      // (B, T) bool
          SampleRequest request;
          request.batch_size = B;
          request.length = T;
          request.steps = steps;
          request.temperature = fill == "greedy" ? 1.0 : o.infill.temperature;
          request.top_p = fill == "greedy" ? kGreedyTopP : o.infill.top_p;
          request.seed = mask_seed(o.seed, name + "/" + fill + "/" + std::to_string(first));
          request.prompt = tokens.masked_fill(h, -1).to(device);
          request.device = device;
          torch::Tensor got;
          {
            AutocastScope autocast(o.autocast_bf16);
            synchronize_device(device);
            const auto t0 = std::chrono::steady_clock::now();
            SampleOutput out = model.sample(request);
            synchronize_device(device);
            seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            calls = out.network_calls;
            got = out.tokens.to(torch::kCPU, torch::kLong);  // (B, T)
          }
          if (!got.masked_select(~h).equal(tokens.masked_select(~h)))
            throw PluginError("plugin '" + plugin.name + "' changed a given (visible) token while filling " + name,
                              "sample() must return the prompt's ids unchanged (core/plugin_api.h)");
          const auto correct = (got == tokens).logical_and(h).sum(1).to(torch::kFloat64);  // (B)
          for (int64_t b = 0; b < B; ++b) {
            const double c = correct[b].item<double>();
            accuracy.push_back(c / static_cast<double>(n));
            exact.push_back(c == static_cast<double>(n) ? 1.0 : 0.0);
          }
          for (auto& row : rows_of(got)) filled.push_back(std::move(row));
          progress.advance(B);
        }
        progress.finish();
        FillResult r;
        r.dataset = info.name;
        r.infill = name;
        r.fill = fill;
        r.accuracy = mean_stderr(accuracy);
        r.exact = mean_stderr(exact);
        if (judge != nullptr) {
          r.judged = true;
          r.judge = summarize_scores(score_samples(*judge, filled, o.batch_size, device, visible));
          r.truth = truth_judged;
        }
        r.windows = F;
        r.hidden = n;
        r.steps = steps;
        r.network_calls = calls;
        r.ms_per_token = 1e3 * seconds / static_cast<double>(F * n);
        std::ostringstream how;
        how << hs.what << "; " << fill
            << (fill == "greedy" ? " (the most probable token at each draw)"
                                 : " (temperature " + short_number(o.infill.temperature) + ", top-p " +
                                       short_number(o.infill.top_p) + ")")
            << (anywhere ? ", every draw given all visible tokens, " + std::to_string(steps) + " steps"
                         : ", prefix-only: each hidden token drawn given the tokens left of it (the visible ones to "
                           "its right unseen)")
            << "; " << T << "-token windows, the first " << F << " of " << windows.starts.size();
        r.protocol = how.str();
        results.push_back(r);
      }
    }
  }
  return results;
}

}  // namespace aobench
