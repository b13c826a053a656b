// Implements: shared any-order blocks (see any_order.h; spec-ao-gpt §1.1 slot table, §4.1–4.3 sampler).
#include "plugins/common/any_order.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <ATen/detail/CUDAHooksInterface.h>

#include "core/errors.h"
#include "plugins/common/cuda_graph.h"
#include "plugins/common/sampling.h"

namespace aobench::common {

Slots slots_for_order(const torch::Tensor& tokens, const torch::Tensor& order) {
  TORCH_CHECK(tokens.sizes() == order.sizes(), "tokens ", tokens.sizes(), " and order ", order.sizes(),
              " must have the same shape");
  auto x_sigma = tokens.gather(1, order);  // (B, T) tokens in generation order
  return slots_for_chain(x_sigma, order, order);
}

Slots slots_for_chain(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                      const torch::Tensor& targets) {
  TORCH_CHECK(ctx_tokens.dim() == 2 && ctx_tokens.sizes() == ctx_positions.sizes() &&
                  ctx_tokens.sizes() == targets.sizes(),
              "chain slots need (N, S) ctx_tokens, ctx_positions and targets; got ", ctx_tokens.sizes(), ", ",
              ctx_positions.sizes(), ", ", targets.sizes());
  const int64_t S = ctx_tokens.size(1);
  auto none = torch::full({ctx_tokens.size(0), 1}, -1, ctx_tokens.options().dtype(torch::kLong));
  Slots s;
  s.tokens = torch::cat({none, ctx_tokens.narrow(1, 0, S - 1)}, 1);        // (N, S)
  s.positions = torch::cat({none, ctx_positions.narrow(1, 0, S - 1)}, 1);  // (N, S)
  s.targets = targets;
  return s;
}

void KVCache::make_static(torch::Device device) {
  TORCH_CHECK(capacity > 0, "a static KV cache needs a capacity");
  pos = torch::zeros({1}, torch::TensorOptions().dtype(torch::kLong).device(device));
  len = 0;
}

void KVCache::truncate(int64_t keep) {
  if (is_static()) {
    len = keep;
    pos.fill_(keep);
    return;
  }
  for (size_t l = 0; l < k.size(); ++l) {
    k[l] = k[l].narrow(2, 0, keep);
    v[l] = v[l].narrow(2, 0, keep);
  }
}

torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, KVCache* cache,
                     int64_t layer, const std::optional<torch::Tensor>& mask) {
  if (!cache) {
    if (mask) return torch::scaled_dot_product_attention(q, k, v, *mask);
    return torch::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
  }
  if (static_cast<int64_t>(cache->k.size()) <= layer) {
    cache->k.resize(layer + 1);
    cache->v.resize(layer + 1);
    cache->k_buf.resize(layer + 1);
    cache->v_buf.resize(layer + 1);
  }
  auto& ck = cache->k[layer];
  auto& cv = cache->v[layer];
  const int64_t old = ck.defined() ? ck.size(2) : 0, S = k.size(2);
  if (cache->is_static()) {
    auto& kb = cache->k_buf[layer];
    auto& vb = cache->v_buf[layer];
    if (!kb.defined()) {  // zeros: the masked slots never hold NaN
      kb = torch::zeros({k.size(0), k.size(1), cache->capacity, k.size(3)}, k.options());
      vb = torch::zeros({v.size(0), v.size(1), cache->capacity, v.size(3)}, v.options());
    }
    kb.index_copy_(2, cache->step_slots, k);
    vb.index_copy_(2, cache->step_slots, v);
    const int64_t span = cache->step_mask.size(1);
    return torch::scaled_dot_product_attention(q, kb.narrow(2, 0, span), vb.narrow(2, 0, span), cache->step_mask);
  }
  if (cache->capacity > 0) {
    TORCH_CHECK(old + S <= cache->capacity, "KV cache of ", cache->capacity, " slots cannot take ", old + S);
    auto& kb = cache->k_buf[layer];
    auto& vb = cache->v_buf[layer];
    if (!kb.defined()) {
      kb = torch::empty({k.size(0), k.size(1), cache->capacity, k.size(3)}, k.options());
      vb = torch::empty({v.size(0), v.size(1), cache->capacity, v.size(3)}, v.options());
    }
    kb.narrow(2, old, S).copy_(k);
    vb.narrow(2, old, S).copy_(v);
    ck = kb.narrow(2, 0, old + S);  // (B, H, S_cache + S, h) views
    cv = vb.narrow(2, 0, old + S);
  } else {
    ck = ck.defined() ? torch::cat({ck, k}, 2) : k;  // (B, H, S_cache + S, h)
    cv = cv.defined() ? torch::cat({cv, v}, 2) : v;
  }
  if (mask) return torch::scaled_dot_product_attention(q, ck, cv, *mask);
  TORCH_CHECK(ck.size(2) == q.size(2), "a cached attention call with earlier slots needs an explicit mask");
  return torch::scaled_dot_product_attention(q, ck, cv, {}, 0.0, /*is_causal=*/true);
}

void trunc_normal_(torch::Tensor t, double std) {
  torch::NoGradGuard no_grad;
  // u ~ U(Φ(−3), Φ(3)), x = Φ⁻¹(u)·std = √2·erfinv(2u − 1)·std: exactly N(0, std²) cut at ±3 std.
  const double lo = 0.5 * std::erfc(3.0 / std::sqrt(2.0));
  auto u = torch::empty(t.sizes(), t.options().dtype(torch::kFloat64)).uniform_(lo, 1.0 - lo);
  auto x = torch::erfinv(u * 2.0 - 1.0) * (std::sqrt(2.0) * std);
  t.copy_(x.clamp(-3.0 * std, 3.0 * std));
}

std::vector<int64_t> schedule_counts(int64_t L, int64_t steps, const std::string& schedule) {
  if (schedule != "linear" && schedule != "cosine")
    throw ConfigError("sample schedule '" + schedule + "' is unknown", "use \"linear\" or \"cosine\"");
  steps = std::max<int64_t>(1, std::min(steps, L));
  std::vector<int64_t> n(steps);
  int64_t prev = 0;
  for (int64_t k = 0; k < steps; ++k) {
    int64_t c;
    if (schedule == "linear") {
      c = L * (k + 1) / steps;  // integer arithmetic: deterministic and exact
    } else {
      const double t = 1.0 - static_cast<double>(k + 1) / steps;  // t_{k+1}
      const double s = std::cos((1.0 - t) * M_PI / 2.0);          // s(t) = cos((1−t)π/2)
      c = static_cast<int64_t>(std::floor(L * (1.0 - s) + 1e-9));
    }
    // At least one token per step, and leave at least one for every later step.
    c = std::max(c, prev + 1);
    c = std::min(c, L - (steps - 1 - k));
    n[k] = c;
    prev = c;
  }
  n.back() = L;
  return n;
}

at::Generator make_generator(torch::Device device, uint64_t seed) {
  if (device.is_cuda()) {
    auto gen = at::detail::getCUDAHooks().getNewGenerator(device.index() < 0 ? 0 : device.index());
    gen.set_current_seed(seed);
    return gen;
  }
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

torch::Tensor draw_tokens(const torch::Tensor& logits, double temperature, double top_p, bool float64,
                          at::Generator& gen) {
  TORCH_CHECK(temperature > 0.0, "temperature must be positive, got ", temperature);
  TORCH_CHECK(top_p > 0.0 && top_p <= 1.0, "top_p must lie in (0, 1], got ", top_p);
  if (float64 && logits.dim() >= 1 && fused_draw_supported(logits)) {
    // One kernel for softmax, nucleus and Gumbel-max (sampling.h); (.., V) → (..).
    auto lead = logits.sizes().slice(0, logits.dim() - 1);
    return fused_draw(logits.reshape({-1, logits.size(-1)}), temperature, top_p, &gen).view(lead);
  }
  const auto dtype = float64 ? torch::kFloat64 : torch::kFloat32;
  auto u = torch::empty(logits.sizes(), logits.options().dtype(dtype)).uniform_(0.0, 1.0, gen);
  return gumbel_draw_reference(logits, temperature, top_p, u);  // (B, n)
}

torch::Tensor sampling_orders(const SampleRequest& request, at::Generator& gen, int64_t* n_prompt) {
  const int64_t B = request.batch_size, L = request.length;
  auto free_keys = torch::rand({B, L}, gen, torch::kFloat64);  // (B, L) random rank of free positions
  if (!request.prompt.defined()) {
    *n_prompt = 0;
    return free_keys.argsort(int64_t{1});
  }
  TORCH_CHECK(request.prompt.dim() == 2 && request.prompt.size(0) == B && request.prompt.size(1) == L,
              "prompt must be (batch_size, length) = (", B, ", ", L, "), got ", request.prompt.sizes());
  auto given = request.prompt.to(torch::kCPU).ge(0);  // (B, L)
  auto counts = given.sum(1);
  *n_prompt = counts[0].item<int64_t>();
  TORCH_CHECK(counts.eq(*n_prompt).all().item<bool>(),
              "every prompt row must fix the same number of positions");
  // Prompt positions get keys −L..−1 (left to right), free ones keys in [0, 1): one argsort orders both.
  auto pos = torch::arange(L, torch::kFloat64).unsqueeze(0) - L;  // (1, L)
  return torch::where(given, pos, free_keys).argsort(int64_t{1});
}

void check_model_keys(const nlohmann::json& cfg, const nlohmann::json& defaults_json) {
  if (!cfg.is_object()) throw ConfigError("'model' must be a JSON object", "e.g. {\"flavour\": \"debug\"}");
  const auto& flavours = defaults_json.at("flavours");
  const auto& keys = flavours.begin().value();
  for (auto it = cfg.begin(); it != cfg.end(); ++it) {
    if (it.key() == "plugin" || it.key() == "flavour" || keys.contains(it.key())) continue;
    std::string known;
    for (auto k = keys.begin(); k != keys.end(); ++k) known += (known.empty() ? "" : ", ") + k.key();
    throw ConfigError("unknown key 'model." + it.key() + "'", "known keys: " + known);
  }
}

void check_model_sizes(std::initializer_list<std::pair<const char*, int64_t>> sizes, int64_t n_embd,
                       int64_t n_head, double dropout) {
  for (auto [key, v] : sizes)
    if (v <= 0) throw ConfigError(std::string("'model.") + key + "' must be positive, got " + std::to_string(v));
  if (n_embd % n_head != 0)
    throw ConfigError("'model.n_embd' (" + std::to_string(n_embd) + ") must be a multiple of 'model.n_head' (" +
                          std::to_string(n_head) + ")",
                      "the head dim is n_embd / n_head (64 in the paper)");
  if (!(dropout >= 0.0 && dropout < 1.0)) throw ConfigError("'model.dropout' must lie in [0, 1)");
}

double any_order_flops_per_token(const torch::nn::Module& net, int64_t n_layer, int64_t n_embd, int64_t T,
                                 const std::vector<std::string>& lookups) {
  double n = 0;
  for (const auto& p : net.named_parameters()) {
    const auto& k = p.key();
    if (k.rfind("wpe", 0) == 0 || k.rfind("wtpe", 0) == 0 || k == "wnonee") continue;
    auto in_k = [&](const std::string& l) { return k.find(l) != std::string::npos; };
    if (std::any_of(lookups.begin(), lookups.end(), in_k)) continue;
    n += p.value().numel();
  }
  return 6.0 * n + 12.0 * n_layer * n_embd * T;
}

double masked_fraction(const std::string& schedule, int64_t k, int64_t steps) {
  if (schedule != "linear" && schedule != "cosine")
    throw ConfigError("sample schedule '" + schedule + "' is unknown", "use \"linear\" or \"cosine\"");
  if (k >= steps) return 0.0;
  const double r = static_cast<double>(k) / steps;  // 1 − t_k
  return schedule == "linear" ? 1.0 - r : std::cos(r * M_PI / 2.0);
}

std::vector<int64_t> bernoulli_counts(int64_t L, int64_t steps, const std::string& schedule, at::Generator& gen) {
  steps = std::max<int64_t>(1, steps);
  std::vector<int64_t> n;
  int64_t done = 0;
  for (int64_t k = 0; k < steps && done < L; ++k) {
    const double m_now = masked_fraction(schedule, k, steps), m_next = masked_fraction(schedule, k + 1, steps);
    const double p = k == steps - 1 ? 1.0 : (m_now - m_next) / m_now;  // (α_s − α_t)/(1 − α_t)
    // Stage 1 of Lemma 1: an independent Bernoulli(p) per still-masked position.
    done += torch::rand({L - done}, gen, torch::kFloat64).lt(p).sum().item<int64_t>();
    n.push_back(done);
  }
  return n;
}

namespace {

// The step loop of §4.2 for rows that share one count schedule. generated (b, L) holds the `done` given
// tokens in generation order and receives the rest; order (b, L); p_tok/p_pos (b, n_prev) are the real
// slots not yet in the cache. counts are cumulative over the free positions. With capture_steps on a GPU the
// cache is static and one-token steps are replayed from CUDA graphs. Returns the network calls made.
int64_t run_steps(const SlotForward& forward, const SampleRequest& request, const torch::Tensor& order,
                  torch::Tensor generated, int64_t done, torch::Tensor p_tok, torch::Tensor p_pos,
                  const std::vector<int64_t>& counts, at::Generator& dev_gen, bool capture_steps) {
  const int64_t B = generated.size(0), L = generated.size(1);
  const auto dev = generated.device();
  const auto lopt = torch::TensorOptions().dtype(torch::kLong).device(dev);
  const auto bopt = torch::TensorOptions().dtype(torch::kBool).device(dev);
  KVCache cache;
  // Real slots never exceed [None] + L tokens; a step adds its n_new − 1 duplicates on top.
  int64_t max_new = 0;
  for (size_t i = 0; i < counts.size(); ++i)
    max_new = std::max(max_new, counts[i] - (i ? counts[i - 1] : 0));
  cache.capacity = L + 1 + max_new;
  if (capture_steps && dev.is_cuda()) cache.make_static(dev);
  // A static-cache step (S slots, `mask` (S, old + S) as below): keys at device-side slots, attention over
  // the first `span` slots; with S = 1 the shapes are static and the step is replayed from a CUDA graph.
  std::map<int64_t, StepGraph> graphs;
  Slots step_in;  // (B, 1) inputs of the captured steps, in fixed memory
  auto static_step = [&](const Slots& s, const std::function<torch::Tensor()>& make_mask, int64_t n_new,
                         int64_t S) {
    const int64_t old = cache.length(), span = cache.span_for(S);
    torch::Tensor logits;
    if (S == 1) {
      if (!step_in.tokens.defined())
        step_in = {torch::empty_like(s.tokens), torch::empty_like(s.positions), torch::empty_like(s.targets)};
      step_in.tokens.copy_(s.tokens);
      step_in.positions.copy_(s.positions);
      step_in.targets.copy_(s.targets);
      logits = graphs[span].run(dev, [&] {
        cache.step_slots = cache.pos.clone();  // (1); the mask (1, span): the cache and the slot itself
        cache.step_mask = torch::arange(span, lopt).unsqueeze(0) <= cache.step_slots.unsqueeze(1);
        auto y = forward(step_in, &cache, std::nullopt, 1);
        cache.pos.add_(1);
        return y;
      });
    } else {
      cache.step_slots = torch::arange(old, old + S, lopt);
      cache.step_mask = torch::cat({make_mask(), torch::zeros({S, span - old - S}, bopt)}, 1);
      logits = forward(s, &cache, std::nullopt, n_new);
      cache.pos.fill_(old + S);
    }
    cache.len = old + S;
    return logits;
  };
  int64_t prev = 0, calls = 0;
  for (int64_t n_cum : counts) {
    if (n_cum == prev) continue;  // a Lemma-1 step that unmasks nothing needs no network call
    const int64_t n_new = n_cum - prev, n_prev = p_tok.size(1), old = cache.length();
    auto q_pos = order.narrow(1, done, n_new);  // (B, n_new) targets of this step
    Slots s;
    s.tokens = torch::cat({p_tok, p_tok.narrow(1, n_prev - 1, 1).expand({B, n_new - 1})}, 1);
    s.positions = torch::cat({p_pos, p_pos.narrow(1, n_prev - 1, 1).expand({B, n_new - 1})}, 1);
    s.targets = torch::cat({p_pos.narrow(1, 1, n_prev - 1), q_pos}, 1);
    const int64_t S = n_prev + n_new - 1;
    // mask (S, old + S): the whole cache, causal among new slots, diagonal-only in the query block.
    auto make_mask = [&] {
      auto causal = torch::ones({S, S}, bopt).tril();
      auto qblock = causal.narrow(0, n_prev - 1, n_new).narrow(1, n_prev - 1, n_new);
      qblock.copy_(torch::eye(n_new, torch::TensorOptions().device(dev)).to(torch::kBool));
      return torch::cat({torch::ones({S, old}, bopt), causal}, 1);
    };
    auto logits = cache.is_static() ? static_step(s, make_mask, n_new, S)
                                    : forward(s, &cache, make_mask(), n_new);  // (B, n_new, V)
    ++calls;
    auto x = draw_tokens(logits, request.temperature, request.top_p, request.float64_sampling, dev_gen);
    generated.narrow(1, done, n_new).copy_(x);
    cache.truncate(old + n_prev);  // drop the duplicates' keys/values: only real tokens stay
    p_tok = x;
    p_pos = q_pos;
    done += n_new;
    prev = n_cum;
  }
  return calls;
}

}  // namespace

SampleOutput sample_any_order(torch::nn::Module& net, const SlotForward& forward, const SampleRequest& request,
                              int64_t vocab, int64_t block_size, bool start_slot, bool capture_steps) {
  if (request.length > block_size || request.length < 1)
    throw ConfigError("sample length " + std::to_string(request.length) +
                          " must lie in [1, block_size=" + std::to_string(block_size) + "]",
                      "set sample.length");
  EvalMode eval_mode(net);
  torch::NoGradGuard no_grad;
  const int64_t B = request.batch_size, L = request.length;
  const auto dev = request.device;
  auto cpu_gen = at::make_generator<at::CPUGeneratorImpl>(request.seed);
  int64_t n_prompt = 0;
  auto order = sampling_orders(request, cpu_gen, &n_prompt).to(dev);  // (B, L)
  auto dev_gen = make_generator(dev, request.seed + 1);
  auto lopt = torch::TensorOptions().dtype(torch::kLong).device(dev);

  auto generated = torch::empty({B, L}, lopt);  // tokens in generation order
  int64_t done = n_prompt;
  if (n_prompt > 0) {
    auto prompt = request.prompt.to(dev);
    generated.narrow(1, 0, n_prompt).copy_(prompt.gather(1, order.narrow(1, 0, n_prompt)));
  }
  torch::Tensor p_tok, p_pos;  // (B, n_prev): the real slots not yet in the cache
  if (start_slot) {
    auto none = torch::full({B, 1}, -1, lopt);
    p_tok = torch::cat({none, generated.narrow(1, 0, n_prompt)}, 1);
    p_pos = torch::cat({none, order.narrow(1, 0, n_prompt)}, 1);
  } else {
    if (n_prompt == 0) {  // the first token is given in idiap σ-GPT: EOS (= vocab − 1) at σ(0)
      generated.narrow(1, 0, 1).fill_(vocab - 1);
      done = 1;
    }
    p_tok = generated.narrow(1, 0, done);
    p_pos = order.narrow(1, 0, done);
  }

  if (request.counts != "deterministic" && request.counts != "bernoulli")
    throw ConfigError("sample counts '" + request.counts + "' is unknown",
                      "use \"deterministic\" (the reference's integer schedule) or \"bernoulli\" (Lemma 1)");
  SampleOutput out;
  if (done < L && request.counts == "deterministic") {
    const auto counts = schedule_counts(L - done, request.steps, request.schedule);
    out.network_calls =
        run_steps(forward, request, order, generated, done, p_tok, p_pos, counts, dev_gen, capture_steps);
  } else if (done < L) {
    // Lemma 1: every row draws its own counts, so rows run one at a time (each its own cache).
    for (int64_t b = 0; b < B; ++b) {
      const auto counts = bernoulli_counts(L - done, request.steps, request.schedule, cpu_gen);
      out.network_calls += run_steps(forward, request, order.narrow(0, b, 1), generated.narrow(0, b, 1), done,
                                     p_tok.narrow(0, b, 1), p_pos.narrow(0, b, 1), counts, dev_gen, capture_steps);
    }
  }
  // Un-shuffle: out[σ(i)] = generated[i].
  out.tokens = torch::empty_like(generated).scatter_(1, order, generated);
  out.order = order;
  return out;
}

}  // namespace aobench::common
