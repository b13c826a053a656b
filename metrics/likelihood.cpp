// Implements: held-out likelihood evaluation (see likelihood.h; spec-ao-gpt §3.1–3.3, spec-sedd-radd §3.1).
// Every mode reduces to per-token NLLs (B, T) in generation order plus a `scored` mask; the same
// nll_row_sums/NllTotals path then applies the first-token protocol and sums in float64.
#include "metrics/likelihood.h"

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/config.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/order.h"
#include "core/plugin_api.h"
#include "core/progress.h"
#include "datasets/token_file.h"
#include "metrics/ensemble.h"
#include "metrics/stats.h"

namespace aobench {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string describe_protocol(const EvalOptions& o, int64_t T, const DatasetInfo& info, int64_t M) {
  std::ostringstream p;
  if (o.mode == "l2r") p << "l2r exact";
  if (o.mode == "random") p << "random orders exact, K=" << o.orders;
  if (o.mode == "ensemble") {
    p << "context-order ensemble M=" << M << ", random base order";
    if (o.ensemble_positions > 0) p << ", " << o.ensemble_positions << " sampled steps/sequence";
  }
  if (o.mode == "elbo") p << "ELBO upper bound, " << o.mc_steps << " MC steps";
  // A bound covers the joint NLL of the whole window, so bound rows score all T tokens (evaluate_likelihood).
  if (o.mode == "elbo")
    p << "; all " << T << " tokens scored (bound on the whole window; first_token does not apply)";
  else
    p << "; first token " << (o.skip_first ? "skipped" : "scored");
  p << "; " << T << "-token windows; " << (info.packing.empty() ? "unknown" : info.packing) << " packing";
  return p.str();
}

}  // namespace

torch::Tensor load_windows(const TokenFile& file, const std::vector<int64_t>& starts, size_t first, size_t count,
                           int64_t T, torch::Device device) {
  std::vector<torch::Tensor> rows;
  for (size_t i = first; i < first + count; ++i) rows.push_back(file.slice(starts[i], T));
  return torch::stack(rows).to(device);
}

EvalWindows eval_windows(const TokenFile& file, int64_t T, const EvalOptions& o) {
  EvalWindows w;
  w.starts = eval_window_starts(file, T);
  if (w.starts.empty())
    throw DataError("'" + file.path() + "' has " + std::to_string(file.size()) + " tokens, fewer than one " +
                        std::to_string(T) + "-token window",
                    "prepare the dataset with a matching window");
  w.used = w.starts.size();
  if (o.max_batches > 0) w.used = std::min<size_t>(w.used, static_cast<size_t>(o.max_batches * o.batch_size));
  return w;
}

DatasetInfo read_dataset_info(const std::string& name, const std::string& bin_path) {
  DatasetInfo info;
  info.name = name;
  const std::string meta = token_dataset_meta_path(bin_path);  // the .bin.json sidecar, or a sharded index.json
  std::ifstream in(meta);
  if (!in) return info;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError("invalid JSON in sidecar '" + meta + "': " + e.what(), "re-run `aobench prepare` for this dataset");
  }
  if (j.contains("bytes") && j["bytes"].is_number()) info.bytes = j["bytes"].get<int64_t>();
  if (j.contains("packing") && j["packing"].is_string()) info.packing = j["packing"].get<std::string>();
  return info;
}

nlohmann::json LikelihoodResult::to_json() const {
  nlohmann::json j = {{"dataset", dataset},
                      {"metric", metric},
                      {"mode", mode},
                      {"nll", nll},
                      {"stderr", stderr_},
                      {"ppl", ppl},
                      {"tokens", tokens},
                      {"sequences", sequences},
                      {"windows_used", windows_used},
                      {"windows_total", windows_total},
                      {"orders", orders},
                      {"ensemble_size", ensemble_size},
                      {"positions", positions},
                      {"mc_steps", mc_steps},
                      {"is_bound", is_bound},
                      {"protocol", protocol},
                      {"tok_per_s", tok_per_s},
                      {"wall_s", wall_s},
                      {"bpb_estimate", bpb_estimate}};
  j["bits_per_byte"] = std::isfinite(bits_per_byte) ? nlohmann::json(bits_per_byte) : nlohmann::json();
  return j;
}

std::vector<std::pair<double, int64_t>> nll_row_sums(const torch::Tensor& nll, const torch::Tensor& scored,
                                                     bool skip_first, bool require_first) {
  TORCH_CHECK(nll.dim() == 2 && scored.sizes() == nll.sizes(), "nll_row_sums: nll (B, T) and scored (B, T) ",
              "must match, got ", nll.sizes(), " and ", scored.sizes());
  auto mask = scored.to(torch::kCPU, torch::kBool).clone();  // (B, T)
  auto values = nll.to(torch::kCPU, torch::kFloat64);        // (B, T)
  if (skip_first) {
    mask.select(1, 0).fill_(false);
  } else if (require_first && !mask.select(1, 0).all().item<bool>()) {
    throw ConfigError("eval.first_token=score, but the model cannot score generation index 0 (no start token)",
                      "set model.start_token=true or eval.first_token=skip");
  }
  // Unscored entries may hold NaN (ensemble subsampling): zero them before summing.
  auto sums = torch::where(mask, values, torch::zeros_like(values)).sum(1);  // (B,) float64
  auto counts = mask.sum(1);                                                 // (B,) int64
  TORCH_CHECK(torch::isfinite(sums).all().item<bool>(), "non-finite NLL among scored tokens");
  std::vector<std::pair<double, int64_t>> out;
  auto s = sums.accessor<double, 1>();
  auto c = counts.accessor<int64_t, 1>();
  for (int64_t b = 0; b < sums.size(0); ++b) out.emplace_back(s[b], c[b]);
  return out;
}

void NllTotals::add_sequences(const std::vector<std::vector<std::pair<double, int64_t>>>& rows_per_order) {
  if (rows_per_order.empty()) return;
  const size_t B = rows_per_order[0].size();
  for (size_t b = 0; b < B; ++b) {
    double seq_mean = 0;
    int64_t used = 0;
    for (const auto& rows : rows_per_order) {
      nats += rows[b].first;
      tokens += rows[b].second;
      if (rows[b].second > 0) {
        seq_mean += rows[b].first / static_cast<double>(rows[b].second);
        ++used;
      }
    }
    if (used > 0) seq_nll.push_back(seq_mean / static_cast<double>(used));
  }
}

void finish_result(const NllTotals& totals, int64_t orders, int64_t file_tokens, int64_t file_bytes,
                   LikelihoodResult& out) {
  out.orders = orders;
  out.tokens = orders > 0 ? totals.tokens / orders : totals.tokens;
  out.nll = totals.tokens > 0 ? totals.nats / static_cast<double>(totals.tokens) : std::nan("");
  out.ppl = std::exp(out.nll);
  out.sequences = static_cast<int64_t>(totals.seq_nll.size());
  out.stderr_ = stderr_of(totals.seq_nll);
  // bits/byte = total nats / ln 2 / bytes, with the file's bytes pro-rated to the scored tokens.
  if (file_bytes > 0 && file_tokens > 0 && out.tokens > 0) {
    const double bytes =
        static_cast<double>(file_bytes) * static_cast<double>(out.tokens) / static_cast<double>(file_tokens);
    out.bits_per_byte = out.nll * static_cast<double>(out.tokens) / std::log(2.0) / bytes;
    out.bpb_estimate = out.tokens != file_tokens;
  } else {
    out.bits_per_byte = std::nan("");
  }
}

std::vector<LikelihoodResult> evaluate_likelihood(ModelPlugin& model, const TokenFile& file, const DatasetInfo& info,
                                                  const EvalOptions& o, torch::Device device) {
  const int64_t T = model.block_size();
  // A mode the model does not declare is refused before any data is read.
  const PluginInfo plugin = model.info();
  if (o.mode == "elbo" && !plugin.capabilities.elbo)
    throw PluginError("plugin '" + plugin.name + "' has no diffusion ELBO",
                      "eval.mode=elbo applies to masked-diffusion encoders; use eval.mode=l2r or random");
  if (o.mode == "ensemble" && !plugin.capabilities.chain_log_probs)
    throw PluginError("plugin '" + plugin.name + "' cannot condition on arbitrary target positions",
                      "context-order ensembles need an any-order decoder (sigma_gpt, ao_gpt)");
  if (o.mode == "random" && !plugin.capabilities.any_order)
    throw PluginError("plugin '" + plugin.name + "' scores left to right only (eval.mode=random)",
                      "use eval.mode=l2r for " + plugin.name + ", or an any-order plugin (sigma_gpt, ao_gpt)");
  const EvalWindows windows = eval_windows(file, T, o);
  const auto& starts = windows.starts;
  const size_t n_windows = windows.used;
  const bool is_ensemble = o.mode == "ensemble";
  const size_t n_results = is_ensemble ? o.ensemble.size() : 1;
  std::vector<NllTotals> totals(n_results);

  torch::NoGradGuard no_grad;
  AutocastScope autocast(o.autocast_bf16);
  model.module().eval();
  at::Generator gen = at::detail::createCPUGenerator(o.seed);
  OrderSpec random_order;
  random_order.kind = OrderSpec::Kind::kRandom;
  EnsembleOptions ens;
  ens.sizes = o.ensemble;
  ens.positions = o.ensemble_positions;

  int64_t network_tokens = 0;
  Progress progress("eval " + info.name + " " + o.mode, static_cast<int64_t>(n_windows), "windows");
  synchronize_device(device);
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t first = 0; first < n_windows; first += static_cast<size_t>(o.batch_size)) {
    const size_t count = std::min<size_t>(static_cast<size_t>(o.batch_size), n_windows - first);
    auto tokens = load_windows(file, starts, first, count, T, device);  // (B, T)
    const int64_t B = tokens.size(0);
    if (o.mode == "l2r") {
      auto order = torch::arange(T, torch::dtype(torch::kInt64).device(device)).expand({B, T}).contiguous();
      NllOutput out = model.log_prob(tokens, order, gen);
      totals[0].add_sequences({nll_row_sums(out.nll, out.scored, o.skip_first, true)});
      network_tokens += B * T;
    } else if (o.mode == "random") {
      std::vector<std::vector<std::pair<double, int64_t>>> rows;
      for (int64_t k = 0; k < o.orders; ++k) {
        auto order = random_order.draw(B, T, gen, device);  // (B, T) fresh uniform permutations
        NllOutput out = model.log_prob(tokens, order, gen);
        rows.push_back(nll_row_sums(out.nll, out.scored, o.skip_first, true));
        network_tokens += B * T;
      }
      totals[0].add_sequences(rows);
    } else if (o.mode == "elbo") {
      NllOutput out = model.elbo(tokens, o.mc_steps, gen);
      // The ELBO bounds the joint NLL of all T tokens; its per-token terms without position 0 would bound
      // nothing (not the NLL of the other T−1 tokens). So a bound row scores every position, whatever
      // eval.first_token says, and its protocol says so.
      totals[0].add_sequences({nll_row_sums(out.nll, out.scored, /*skip_first=*/!out.is_bound && o.skip_first, true)});
      network_tokens += B * T * o.mc_steps;
    } else {
      auto base = random_order.draw(B, T, gen, device);  // (B, T) one random base order per sequence
      EnsembleResult r = context_order_ensemble(model, tokens, base, ens, gen);
      for (size_t m = 0; m < n_results; ++m)
        totals[m].add_sequences({nll_row_sums(r.nll[m], r.evaluated, o.skip_first, o.ensemble_positions == 0)});
      network_tokens += B * T * o.ensemble.back();
    }
    progress.advance(B);
  }
  synchronize_device(device);
  const double wall = seconds_since(t0);
  progress.finish();

  std::vector<LikelihoodResult> results(n_results);
  for (size_t m = 0; m < n_results; ++m) {
    LikelihoodResult& r = results[m];
    r.dataset = info.name;
    r.mode = o.mode;
    r.windows_used = static_cast<int64_t>(n_windows);
    r.windows_total = static_cast<int64_t>(starts.size());
    finish_result(totals[m], o.mode == "random" ? o.orders : 1, file.size(), info.bytes, r);
    r.is_bound = o.mode == "elbo";
    r.metric = o.mode == "elbo" ? "nelbo" : "nll";
    if (is_ensemble) {
      r.ensemble_size = o.ensemble[m];
      r.positions = o.ensemble_positions;
      r.metric = "nll_M" + std::to_string(o.ensemble[m]);
    }
    if (o.mode == "elbo") r.mc_steps = o.mc_steps;
    r.protocol = describe_protocol(o, T, info, is_ensemble ? o.ensemble[m] : 0);
    if (n_windows < starts.size())
      r.protocol += "; " + std::to_string(n_windows) + "/" + std::to_string(starts.size()) + " windows";
    r.wall_s = wall;
    r.tok_per_s = wall > 0 ? static_cast<double>(network_tokens) / wall : 0;
  }
  return results;
}

double l2r_throughput(ModelPlugin& model, const TokenFile& file, const EvalOptions& o, torch::Device device,
                      int64_t warmup, int64_t iters) {
  const int64_t T = model.block_size();
  const auto starts = eval_window_starts(file, T);
  if (starts.empty()) throw DataError("'" + file.path() + "' holds no full " + std::to_string(T) + "-token window");
  torch::NoGradGuard no_grad;
  AutocastScope autocast(o.autocast_bf16);
  model.module().eval();
  at::Generator gen = at::detail::createCPUGenerator(o.seed);
  // Reuse the first batch: throughput of the forward, not of the data loader.
  const size_t count = std::min<size_t>(static_cast<size_t>(o.batch_size), starts.size());
  auto tokens = load_windows(file, starts, 0, count, T, device);  // (B, T)
  const int64_t B = tokens.size(0);
  auto order = torch::arange(T, torch::dtype(torch::kInt64).device(device)).expand({B, T}).contiguous();
  for (int64_t i = 0; i < warmup; ++i) model.log_prob(tokens, order, gen);
  synchronize_device(device);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; ++i) model.log_prob(tokens, order, gen);
  synchronize_device(device);
  const double wall = seconds_since(t0);
  return wall > 0 ? static_cast<double>(B * T * iters) / wall : 0;
}

}  // namespace aobench
