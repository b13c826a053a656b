// Implements: plugins/common/any_order_sampler.h (spec-ao-gpt §4.1–4.4).
#include "plugins/common/any_order_sampler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/errors.h"
#include "plugins/common/attention.h"
#include "plugins/common/cuda_graph.h"
#include "plugins/common/sampling.h"

namespace aobench::common {

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
  TORCH_CHECK(counts.eq(*n_prompt).all().item<bool>(), "every prompt row must fix the same number of positions");
  // Prompt positions get keys −L..−1 (left to right), free ones keys in [0, 1): one argsort orders both.
  auto pos = torch::arange(L, torch::kFloat64).unsqueeze(0) - L;  // (1, L)
  return torch::where(given, pos, free_keys).argsort(int64_t{1});
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
// cache is static and repeated step shapes are replayed from CUDA graphs. Returns the network calls made.
int64_t run_steps(const SlotForward& forward, const SampleRequest& request, const torch::Tensor& order,
                  torch::Tensor generated, int64_t done, torch::Tensor p_tok, torch::Tensor p_pos,
                  const std::vector<int64_t>& counts, at::Generator& dev_gen, bool capture_steps) {
  const int64_t B = generated.size(0), L = generated.size(1);
  const auto dev = generated.device();
  const auto lopt = torch::TensorOptions().dtype(torch::kLong).device(dev);
  const DrawOptions draw_opt = gumbel_max(request.temperature, request.top_p, request.float64_sampling);
  KVCache cache;
  // Real slots never exceed [None] + L tokens; a step adds its n_new − 1 duplicates on top.
  int64_t max_new = 0;
  for (size_t i = 0; i < counts.size(); ++i) max_new = std::max(max_new, counts[i] - (i ? counts[i - 1] : 0));
  cache.capacity = L + 1 + max_new;
  if (capture_steps && dev.is_cuda()) cache.make_static(dev);
  // A static-cache step: S = n_prev + n_new − 1 slots written at device-side slots pos … pos + S − 1, new
  // slot i seeing the cache, the step's slots before min(i, n_prev − 1) and itself; attention over the first
  // `span` slots (all of them with the decode kernel, which reads only those up to the step's). Its mask and
  // slots come from the device counter pos, so a step's shapes depend only on (S, n_new, span) and every
  // repeated one is replayed from a CUDA graph (captured at its second step). The inputs are copied into fixed
  // memory, one set per S. At most kMaxGraphs shapes are captured (each holds its own memory pool); the others
  // run uncaptured, the same code.
  constexpr int kMaxGraphs = 32;
  struct Shape {
    StepGraph graph;
    int steps = 0;
    bool eager = false;  // left uncaptured: kMaxGraphs were taken when it repeated
  };
  std::map<std::tuple<int64_t, int64_t, int64_t>, Shape> shapes;
  int captured = 0;
  std::map<int64_t, Slots> step_in;
  // A step's S = n_prev + n_new − 1 slots into `in` (B, S): the n_prev real slots not yet cached, then n_new − 1
  // copies of the last one (the duplicates that carry the other queries); their targets: the real slots' next
  // positions, then the step's queries q_pos (B, n_new). Copied in place, so a one-token step costs three copies.
  auto fill_slots = [&](Slots& in, int64_t n_prev, int64_t n_new, const torch::Tensor& q_pos) {
    in.tokens.narrow(1, 0, n_prev).copy_(p_tok);
    in.positions.narrow(1, 0, n_prev).copy_(p_pos);
    if (n_new > 1) {
      in.tokens.narrow(1, n_prev, n_new - 1).copy_(p_tok.narrow(1, n_prev - 1, 1).expand({B, n_new - 1}));
      in.positions.narrow(1, n_prev, n_new - 1).copy_(p_pos.narrow(1, n_prev - 1, 1).expand({B, n_new - 1}));
    }
    if (n_prev > 1) in.targets.narrow(1, 0, n_prev - 1).copy_(p_pos.narrow(1, 1, n_prev - 1));
    in.targets.narrow(1, n_prev - 1, n_new).copy_(q_pos);
  };
  auto static_step = [&](int64_t n_prev, int64_t n_new, const torch::Tensor& q_pos) {
    const int64_t S = n_prev + n_new - 1, old = cache.length(), span = cache.span_for(S);
    auto& in = step_in[S];
    if (!in.tokens.defined()) in = {torch::empty({B, S}, lopt), torch::empty({B, S}, lopt), torch::empty({B, S}, lopt)};
    fill_slots(in, n_prev, n_new, q_pos);
    auto step = [&] {
      cache.begin_step(S, /*seen=*/n_prev - 1);
      auto y = forward(in, &cache, std::nullopt, n_new);
      cache.pos.add_(n_prev);  // keep the real slots: the duplicates' are overwritten by the next step
      return y;
    };
    auto& shape = shapes[std::make_tuple(S, n_new, span)];
    if (shape.steps++ == 1) {  // its second step: StepGraph captures it, unless kMaxGraphs are taken
      shape.eager = captured == kMaxGraphs;
      if (!shape.eager) ++captured;
    }
    auto logits = shape.eager ? step() : shape.graph.run(dev, step);
    cache.len = old + n_prev;
    return logits;
  };
  int64_t prev = 0, calls = 0;
  for (int64_t n_cum : counts) {
    if (n_cum == prev) continue;  // a Lemma-1 step that unmasks nothing needs no network call
    const int64_t n_new = n_cum - prev, n_prev = p_tok.size(1), old = cache.length();
    auto q_pos = order.narrow(1, done, n_new);  // (B, n_new) targets of this step
    torch::Tensor logits;                       // (B, n_new, V)
    if (cache.is_static()) {
      logits = static_step(n_prev, n_new, q_pos);
    } else {
      const int64_t S = n_prev + n_new - 1;
      Slots s{torch::empty({B, S}, lopt), torch::empty({B, S}, lopt), torch::empty({B, S}, lopt)};
      fill_slots(s, n_prev, n_new, q_pos);
      logits = forward(s, &cache, step_visibility(old + S, torch::full({1}, old, lopt), n_prev - 1, S), n_new);
      cache.truncate(old + n_prev);  // drop the duplicates' keys/values: only real tokens stay
    }
    ++calls;
    auto x = draw_tokens(logits, draw_opt, dev_gen);
    generated.narrow(1, done, n_new).copy_(x);
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
