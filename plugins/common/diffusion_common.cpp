// Implements: log-linear schedule, time draws, exact masking-chain NLL, categorical draws and the
// masked-diffusion sampler shared by SEDD and RADD (spec-sedd-radd §2.1, §2.4, §3.4, §5.4–§5.6).
// Precision: all probabilities of the default sampling path are float64 (Zheng et al. 2024); the
// float32 Gumbel path is kept only as the labelled legacy reproduction of the reference repos.
#include "plugins/common/diffusion_common.h"

#include <algorithm>
#include <cmath>

#include "core/errors.h"

namespace aobench::common {
using torch::indexing::Slice;

torch::Tensor loglinear_sigma(const torch::Tensor& t, double eps) { return -torch::log1p(-(1 - eps) * t); }

torch::Tensor loglinear_dsigma(const torch::Tensor& t, double eps) { return (1 - eps) / (1 - (1 - eps) * t); }

torch::Tensor sigma_at_mask_rate(const torch::Tensor& rate, double eps) {
  return -torch::log1p(-rate.to(torch::kFloat64).clamp_max(1 - eps));
}

torch::Tensor draw_uniform(int64_t B, bool stratified, at::Generator& gen) {
  auto u = torch::rand({B}, gen, torch::TensorOptions().dtype(torch::kFloat64));
  if (stratified) u = (u + torch::arange(B, u.options())) / double(B);  // one draw per stratum
  return u;
}

NllOutput masked_chain_nll(const torch::Tensor& tokens, const torch::Tensor& order, int64_t mask_id, int64_t chunk,
                           const ChainNet& net) {
  TORCH_CHECK(tokens.dim() == 2 && order.sizes() == tokens.sizes(), "log_prob: tokens and order must be (B, T)");
  const int64_t B = tokens.size(0), T = tokens.size(1);
  auto dev = tokens.device();
  auto order_d = order.to(dev, torch::kLong);
  auto iopt = torch::TensorOptions().dtype(torch::kLong).device(dev);
  // rank[b, pos] = generation step of position pos, so "masked at step k" is rank ≥ k.
  auto rank = torch::empty_like(order_d).scatter_(1, order_d, torch::arange(T, iopt).expand({B, T}).contiguous());
  auto nll = torch::empty({B * T}, torch::TensorOptions().dtype(torch::kFloat64).device(dev));
  chunk = std::max<int64_t>(1, chunk);
  for (int64_t start = 0; start < B * T; start += chunk) {
    auto ids = torch::arange(start, std::min(B * T, start + chunk), iopt);  // flat (b, k) pairs
    auto b = ids.div(T, "floor"), k = ids.remainder(T);
    auto xm = torch::where(rank.index_select(0, b) < k.unsqueeze(1), tokens.index_select(0, b),
                           torch::full({1}, mask_id, iopt));  // (n, T): σ(≥k) masked
    auto pos = order_d.index({b, k});                         // (n) position σ(k)
    auto logits = net(xm, T - k);                             // (n, T, V+1)
    auto row = logits.index({torch::arange(ids.size(0), iopt), pos}).index({Slice(), Slice(0, mask_id)});
    auto lp = torch::log_softmax(row.to(torch::kFloat32), -1);  // (n, V), mask excluded
    auto target = tokens.index({b, pos}).unsqueeze(1);
    nll.index_put_({ids}, -lp.gather(1, target).squeeze(1).to(torch::kFloat64));
  }
  NllOutput out;
  out.nll = nll.view({B, T});
  out.scored = torch::ones({B, T}, torch::TensorOptions().dtype(torch::kBool).device(dev));
  out.is_bound = false;
  return out;
}

std::pair<torch::Tensor, torch::Tensor> unmask_step(const torch::Tensor& x, const torch::Tensor& logits, double rate,
                                                    const DrawOptions& opt, at::Generator& gen) {
  const int64_t B = x.size(0), V = logits.size(-1) - 1;
  auto changed = torch::zeros({B}, x.options().dtype(torch::kBool));
  auto idx = (x == V).nonzero();  // (n, 2) masked positions
  if (idx.size(0) == 0) return {x, changed};
  auto b = idx.select(1, 0), l = idx.select(1, 1);
  // (n, V) logits of the listed positions, mask column dropped: a gather, so only rows drawn from are copied.
  auto rows_at = [&](const torch::Tensor& bi, const torch::Tensor& li) {
    return logits.index({bi, li}).index({Slice(), Slice(0, V)});
  };
  auto y = x.clone();
  if (rate >= 1 || opt.argmax) {
    // Final fill (or greedy): every masked position takes a token.
    TORCH_CHECK(rate >= 1, "argmax draws are only for the final step");
    y.index_put_({b, l}, draw_tokens(rows_at(b, l), opt, gen));
    changed.index_put_({b}, torch::ones_like(b, changed.options()));
    return {y, changed};
  }
  torch::Tensor sel, tok;
  if (opt.float64) {
    // Lemma 1: Bernoulli(rate) on each masked position, then a categorical over p_θ of the chosen ones only.
    sel = torch::rand({idx.size(0)}, gen, logits.options().dtype(torch::kFloat64)) < rate;
    tok = draw_tokens(rows_at(b.index({sel}), l.index({sel})), opt, gen);
  } else {
    auto rows = rows_at(b, l);
    // Reference one-stage draw over [stay, rate·p_y] in float32 (under-samples small masses).
    const int64_t n = idx.size(0), step = draw_row_chunk(V);
    auto choice = torch::empty({n}, x.options());
    for (int64_t s = 0; s < n; s += step) {
      auto r = rows.index({Slice(s, std::min(n, s + step))});
      auto q = torch::cat(
          {torch::full({r.size(0), 1}, 1 - rate, r.options().dtype(torch::kFloat32)), rate * filtered_probs(r, opt)},
          -1);  // (n, V+1)
      choice.index_put_({Slice(s, s + r.size(0))}, legacy_gumbel_argmax(q, gen));
    }
    sel = choice > 0;
    tok = choice.index({sel}) - 1;
  }
  y.index_put_({b.index({sel}), l.index({sel})}, tok);
  changed.index_put_({b.index({sel})}, torch::ones({tok.size(0)}, changed.options()));
  return {y, changed};
}

SampleOutput sample_masked(const SampleRequest& req, const MaskedSamplerOptions& opt, const SamplerNet& net) {
  TORCH_CHECK(req.steps >= 1, "sample: steps must be ≥ 1, got ", req.steps);
  torch::NoGradGuard no_grad;
  const int64_t B = req.batch_size, L = req.length, V = opt.vocab_size;
  auto dev = req.device;
  auto gen = make_generator(dev, req.seed);
  auto iopt = torch::TensorOptions().dtype(torch::kLong).device(dev);
  auto x = torch::full({B, L}, V, iopt);  // all [MASK]
  torch::Tensor prompt, fixed;
  if (req.prompt.defined()) {
    TORCH_CHECK(req.prompt.dim() == 2 && req.prompt.size(0) == B && req.prompt.size(1) == L,
                "sample: prompt must be (batch_size, length) = (", B, ", ", L, ")");
    prompt = req.prompt.to(dev, torch::kLong);
    TORCH_CHECK(prompt.lt(V).all().item<bool>(), "sample: prompt ids must be < vocab_size ", V);
    fixed = prompt >= 0;
  }
  auto apply_prompt = [&] {
    if (fixed.defined()) x = torch::where(fixed, prompt, x);
  };

  SampleOutput out;
  torch::Tensor cache;  // (B, L, V+1) RADD only
  auto dirty = torch::ones({B}, iopt.dtype(torch::kBool));
  auto logits_at = [&](double t) -> torch::Tensor {
    if (opt.time_conditioned) {
      out.network_calls++;
      return net(x, torch::full({B}, t, iopt.dtype(torch::kFloat64)));
    }
    // Time-independent network: re-run only the sequences that changed since the last call.
    auto rows = dirty.nonzero().squeeze(1);
    if (rows.size(0) > 0) {
      out.network_calls++;
      auto fresh = net(x.index_select(0, rows), torch::full({rows.size(0)}, t, iopt.dtype(torch::kFloat64)));
      if (!cache.defined()) cache = torch::empty({B, L, fresh.size(-1)}, fresh.options());
      cache.index_copy_(0, rows, fresh);
      dirty.zero_();
    }
    return cache;
  };

  DrawOptions dopt;
  dopt.rule = DrawRule::kInverseCdf;
  dopt.temperature = req.temperature;
  dopt.top_p = req.top_p;
  dopt.float64 = req.float64_sampling;
  auto ts = torch::linspace(1.0, kSampleEps, req.steps + 1, torch::TensorOptions().dtype(torch::kFloat64));
  auto ta = ts.accessor<double, 1>();
  for (int64_t i = 0; i < req.steps; ++i) {
    apply_prompt();
    if (!(x == V).any().item<bool>()) break;
    const double t = ta[i], s = ta[i + 1];
    const bool last = i == req.steps - 1 && !opt.extra_denoise_step;
    const double rate = last ? 1.0 : (t - s) / t;  // (α_s − α_t)/(1 − α_t) = Δt/t
    dopt.argmax = last && opt.final_argmax;
    auto logits = logits_at(t);
    torch::Tensor changed;
    std::tie(x, changed) = unmask_step(x, logits, rate, dopt, gen);
    dirty |= changed;
  }
  apply_prompt();
  if (opt.extra_denoise_step && (x == V).any().item<bool>()) {
    // SEDD Denoiser (§5.5): one more call at t = eps fills every remaining mask.
    dopt.argmax = opt.final_argmax;
    x = unmask_step(x, logits_at(kSampleEps), 1.0, dopt, gen).first;
  }
  out.tokens = x;
  return out;
}

void read_ddit_config(const ModelConfig& m, const std::string& dropout_hint, DDiTConfig& cfg, int64_t& block_size,
                      int64_t& chain_chunk) {
  cfg.n_layer = m.get_int("n_layer", 1);
  cfg.n_head = m.get_int("n_head", 1);
  cfg.n_embd = m.get_int("n_embd", 2);
  cfg.vocab_size = m.get_int("vocab_size", 2);
  block_size = m.get_int("block_size", 1);
  chain_chunk = m.get_int("chain_chunk", 1);
  if (cfg.n_embd % cfg.n_head != 0 || (cfg.n_embd / cfg.n_head) % 2 != 0)
    throw ConfigError("model.n_embd = " + std::to_string(cfg.n_embd) +
                          ", model.n_head = " + std::to_string(cfg.n_head) + ": head dim must be an even integer",
                      "rotary embeddings rotate half of each head; pick n_embd divisible by 2·n_head");
  cfg.dropout = m.get<double>("dropout");
  if (!(cfg.dropout >= 0 && cfg.dropout < 1))
    throw ConfigError("model.dropout = " + std::to_string(cfg.dropout) + ": must be in [0, 1)", dropout_hint);
}

}  // namespace aobench::common
