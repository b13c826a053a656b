// Implements: plugins/common/sampling.h.
#include "plugins/common/sampling.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include <ATen/autocast_mode.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include "core/device.h"

namespace aobench::common {

AutocastLinearWeights::AutocastLinearWeights(torch::nn::Module& module, torch::Device device,
                                             const std::function<bool(const std::string& name)>& keep_fp32) {
  if (!device.is_cuda() || !at::autocast::is_autocast_enabled(at::kCUDA)) return;
  const auto dtype = at::autocast::get_autocast_dtype(at::kCUDA);
  std::unordered_set<const void*> elsewhere;  // parameters of modules that are not Linear layers
  for (const auto& m : module.modules(/*include_self=*/true))
    if (!m->as<torch::nn::Linear>())
      for (const auto& p : m->parameters(/*recurse=*/false)) elsewhere.insert(p.unsafeGetTensorImpl());
  torch::NoGradGuard no_grad;
  for (const auto& named : module.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    const auto& m = named.value();
    if (!m->as<torch::nn::Linear>() || (keep_fp32 && keep_fp32(named.key()))) continue;
    for (auto& p : m->parameters(/*recurse=*/false)) {
      if (p.scalar_type() != torch::kFloat32 || elsewhere.count(p.unsafeGetTensorImpl())) continue;
      saved_.emplace_back(p, p.data());
      p.set_data(p.data().to(dtype));
    }
  }
}

AutocastLinearWeights::~AutocastLinearWeights() {
  torch::NoGradGuard no_grad;
  for (auto& [p, data] : saved_) p.set_data(data);
}

torch::Tensor autocast_copy(const torch::Tensor& weight) {
  if (!weight.is_cuda() || weight.scalar_type() != torch::kFloat32 || !at::autocast::is_autocast_enabled(at::kCUDA))
    return {};
  torch::NoGradGuard no_grad;
  return weight.detach().to(at::autocast::get_autocast_dtype(at::kCUDA));
}
using torch::indexing::Slice;

namespace {
EnvSwitch fused_sampling_switch("AOBENCH_FUSED_SAMPLING");
EnvSwitch draw_split_switch("AOBENCH_DRAW_SPLIT");
EnvSwitch draw_candidates_switch("AOBENCH_DRAW_CANDIDATES");
EnvSwitch draw_resident_switch("AOBENCH_DRAW_RESIDENT");
}  // namespace

bool fused_sampling_enabled() { return fused_sampling_switch.on(); }
void set_fused_sampling_enabled(bool on) { fused_sampling_switch.set(on); }

torch::Tensor top_p_keep(const torch::Tensor& probs, double top_p) {
  auto [sorted, idx] = probs.sort(/*stable=*/true, -1, /*descending=*/true);
  auto mass_before = sorted.cumsum(-1) - sorted;  // mass strictly above each sorted token
  return torch::zeros_like(mass_before, torch::kBool).scatter(-1, idx, mass_before < top_p);
}

torch::Tensor gumbel_draw_reference(const torch::Tensor& logits, double temperature, double top_p,
                                    const torch::Tensor& u) {
  TORCH_CHECK(temperature > 0.0, "temperature must be positive, got ", temperature);
  TORCH_CHECK(top_p > 0.0 && top_p <= 1.0, "top_p must lie in (0, 1], got ", top_p);
  TORCH_CHECK(u.sizes() == logits.sizes(), "uniforms ", u.sizes(), " vs logits ", logits.sizes());
  auto logp = torch::log_softmax(logits.to(u.scalar_type()) / temperature, -1);  // (.., V)
  if (top_p < 1.0)
    logp = logp.masked_fill(top_p_keep(logp.exp(), top_p).logical_not(), -std::numeric_limits<double>::infinity());
  // Gumbel-max: argmax log p_v − log(−log u_v); u = 0 gives −log(inf) = −inf, never chosen.
  return (logp - torch::log(-torch::log(u))).argmax(-1);  // (..)
}

bool fused_draw_supported(const torch::Tensor& logits) {
#ifdef AOBENCH_FUSED_CUDA
  const auto t = logits.scalar_type();
  return logits.is_cuda() && fused_sampling_enabled() &&
         (t == torch::kFloat32 || t == torch::kBFloat16 || t == torch::kHalf);
#else
  (void)logits;
  return false;
#endif
}

torch::Tensor fused_draw(const torch::Tensor& logits, double temperature, double top_p, at::Generator* gen,
                         const torch::Tensor& noise, int split, int rounds, bool resident) {
  TORCH_CHECK(temperature > 0.0, "temperature must be positive, got ", temperature);
  TORCH_CHECK(top_p > 0.0 && top_p <= 1.0, "top_p must lie in (0, 1], got ", top_p);
#ifdef AOBENCH_FUSED_CUDA
  // The automatic split (several blocks per row when rows are fewer than SMs; docs/results/perf) unless
  // AOBENCH_DRAW_SPLIT=0, which keeps one block per row (the split form's reference in timings).
  if (split == 0 && !draw_split_switch.on()) split = 1;
  // AOBENCH_DRAW_CANDIDATES=0: the exact radix select for every row (the candidate rounds' reference in timings).
  if (!draw_candidates_switch.on()) rounds = 0;
  // AOBENCH_DRAW_RESIDENT=0: one kernel per phase of a split row (the resident form's reference in timings).
  if (!draw_resident_switch.on()) resident = false;
  return fused_draw_cuda(logits, temperature, top_p, gen, noise, split, rounds, resident);
#else
  (void)logits, (void)gen, (void)noise, (void)split, (void)rounds, (void)resident;
  TORCH_CHECK(false, "fused_draw: this build has no CUDA kernels");
#endif
}

bool fused_draw_is_resident(const torch::Tensor& logits, int split) {
#ifdef AOBENCH_FUSED_CUDA
  return draw_resident_switch.on() &&
         fused_draw_resident_cuda(logits, split == 0 && !draw_split_switch.on() ? 1 : split);
#else
  (void)logits, (void)split;
  return false;
#endif
}

at::Generator make_generator(torch::Device device, uint64_t seed) {
  if (device.is_cuda()) {
    auto gen = at::detail::getCUDAHooks().getNewGenerator(device.index() < 0 ? 0 : device.index());
    gen.set_current_seed(seed);
    return gen;
  }
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

torch::Tensor filtered_probs(const torch::Tensor& logits, const DrawOptions& opt) {
  TORCH_CHECK(opt.temperature > 0, "sample: temperature must be > 0, got ", opt.temperature);
  TORCH_CHECK(opt.top_p > 0 && opt.top_p <= 1, "sample: top_p must be in (0, 1], got ", opt.top_p);
  auto dtype = opt.float64 ? torch::kFloat64 : torch::kFloat32;
  auto p = torch::softmax(logits.to(dtype) / opt.temperature, -1);  // (N, V)
  if (opt.top_p < 1) {
    p = torch::where(top_p_keep(p, opt.top_p), p, torch::zeros_like(p));
    p = p / p.sum(-1, true);
  }
  return p;
}

// Legacy float32 exponential-race Gumbel of the reference: argmax(q / E), E = 1e-10 − log(U + 1e-10),
// U float32 uniform (§5.6). q (N, K) float32 → (N).
torch::Tensor legacy_gumbel_argmax(const torch::Tensor& q, at::Generator& gen) {
  auto u = torch::rand(q.sizes(), gen, q.options().dtype(torch::kFloat32));
  auto e = 1e-10 - torch::log(u + 1e-10);
  return (q / e).argmax(-1);
}

int64_t draw_row_chunk(int64_t V) { return std::max<int64_t>(1, (int64_t(1) << 25) / std::max<int64_t>(1, V)); }

namespace {

// The inverse-CDF rule on rows (N, V), in chunks of draw_row_chunk(V) rows.
torch::Tensor inverse_cdf_draw(const torch::Tensor& logits, const DrawOptions& opt, at::Generator& gen) {
  const int64_t N = logits.size(0), V = logits.size(1);
  auto out = torch::empty({N}, logits.options().dtype(torch::kLong));
  if (N == 0) return out;
  for (int64_t s = 0; s < N; s += draw_row_chunk(V)) {
    auto rows = logits.index({Slice(s, std::min(N, s + draw_row_chunk(V)))});
    torch::Tensor tok;
    if (opt.float64) {
      // Inverse CDF with one float64 uniform per row: exact up to float64 rounding of the cumsum.
      auto cdf = filtered_probs(rows, opt).cumsum(-1);  // (n, V)
      auto u =
          torch::rand({rows.size(0), 1}, gen, cdf.options()) * cdf.index({Slice(), Slice(-1, torch::indexing::None)});
      tok = torch::searchsorted(cdf, u, /*out_int32=*/false, /*right=*/true).squeeze(1).clamp_max(V - 1);
    } else {
      tok = legacy_gumbel_argmax(filtered_probs(rows, opt), gen);
    }
    out.index_put_({Slice(s, s + rows.size(0))}, tok);
  }
  return out;
}

}  // namespace

torch::Tensor draw_tokens(const torch::Tensor& logits, const DrawOptions& opt, at::Generator& gen) {
  if (opt.argmax) return logits.argmax(-1);  // (..)
  if (opt.rule == DrawRule::kInverseCdf) {
    auto lead = logits.sizes().slice(0, logits.dim() - 1);
    return inverse_cdf_draw(logits.reshape({-1, logits.size(-1)}), opt, gen).view(lead);
  }
  TORCH_CHECK(opt.temperature > 0.0, "temperature must be positive, got ", opt.temperature);
  TORCH_CHECK(opt.top_p > 0.0 && opt.top_p <= 1.0, "top_p must lie in (0, 1], got ", opt.top_p);
  if (opt.float64 && logits.dim() >= 1 && fused_draw_supported(logits)) {
    // One kernel for softmax, nucleus and Gumbel-max; (.., V) → (..).
    auto lead = logits.sizes().slice(0, logits.dim() - 1);
    return fused_draw(logits.reshape({-1, logits.size(-1)}), opt.temperature, opt.top_p, &gen).view(lead);
  }
  const auto dtype = opt.float64 ? torch::kFloat64 : torch::kFloat32;
  auto u = torch::empty(logits.sizes(), logits.options().dtype(dtype)).uniform_(0.0, 1.0, gen);
  return gumbel_draw_reference(logits, opt.temperature, opt.top_p, u);  // (..)
}

}  // namespace aobench::common
