// Implements: forward-pass, training-step and whole-generation (BM_PluginSample) micro-benchmarks for any
// plugin (style.md lesson 13).
// Times elbo(tokens, mc_steps = 1) under NoGrad and bf16 autocast on CUDA with CUDA events: one network
// forward at (BATCH, block_size) plus the estimator's O(B·T) bookkeeping. For decoder-only plugins (no
// ELBO) it times log_prob under the L2R order, also one forward. Reports achieved TFLOP/s from
// flops_per_token(T)/3 (forward only). Env: AOBENCH_BENCH_PLUGIN (sedd), AOBENCH_BENCH_FLAVOUR (small),
// AOBENCH_BENCH_BATCH (32). Example: AOBENCH_BENCH_PLUGIN=radd aobench_bench --benchmark_filter=PluginForward
// Diagnosis: AOBENCH_SDPA_BACKEND=flash|cudnn|efficient|math allows only that SDPA kernel (a call it cannot
// serve throws "No available kernel"); AOBENCH_BENCH_PROFILE=1 prints the top CUDA kernels of one forward.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <ATen/autocast_mode.h>
#include <benchmark/benchmark.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include "harness/plugin_api.h"
#include "harness/registry.h"

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// Restricts scaled_dot_product_attention to one backend (diagnosis of which kernel a plugin gets).
void restrict_sdpa(const std::string& backend) {
  if (backend.empty()) return;
  auto& ctx = at::globalContext();
  ctx.setSDPUseFlash(backend == "flash");
  ctx.setSDPUseCuDNN(backend == "cudnn");
  ctx.setSDPUseMemEfficient(backend == "efficient");
  ctx.setSDPUseMath(backend == "math");
}

// Runs `fn` once under the Kineto profiler and prints the 15 CUDA kernels with the most total time.
template <typename Fn>
void print_kernel_profile(const std::string& label, Fn fn) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const std::set<ActivityType> acts = {ActivityType::CPU, ActivityType::CUDA};
  const torch::profiler::impl::ProfilerConfig cfg(torch::profiler::impl::ProfilerState::KINETO);
  prof::prepareProfiler(cfg, acts);
  prof::enableProfiler(cfg, acts);
  fn();
  torch::cuda::synchronize();
  auto result = prof::disableProfiler();
  std::map<std::string, std::pair<double, int>> per_kernel;  // name → (total µs, calls)
  double total = 0;
  for (const auto& e : result->events()) {
    if (e.deviceType() != c10::DeviceType::CUDA) continue;
    auto& k = per_kernel[e.name().substr(0, 90)];
    k.first += e.durationNs() / 1e3;
    k.second += 1;
    total += e.durationNs() / 1e3;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(per_kernel.begin(), per_kernel.end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.first > b.second.first; });
  std::printf("profile %s: %.2f ms of GPU time in %zu kernel kinds\n", label.c_str(), total / 1e3,
              rows.size());
  for (size_t i = 0; i < rows.size() && i < 15; ++i)
    std::printf("  %8.3f ms %5d×  %s\n", rows[i].second.first / 1e3, rows[i].second.second,
                rows[i].first.c_str());
}

// Times each benchmark iteration of fn() on the GPU with CUDA events (UseManualTime).
template <typename Fn>
void time_on_gpu(benchmark::State& state, torch::Device dev, Fn fn) {
  auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  for (auto _ : state) {
    c10::Event start(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
    c10::Event stop(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
    start.record(impl->getStream(dev));
    fn();
    stop.record(impl->getStream(dev));
    stop.synchronize();
    state.SetIterationTime(start.elapsedTime(stop) / 1e3);  // ms → s
  }
}

// The plugin and flavour of AOBENCH_BENCH_PLUGIN / AOBENCH_BENCH_FLAVOUR, built on `dev`.
std::unique_ptr<aobench::ModelPlugin> bench_model(torch::Device dev, std::string& label) {
  const std::string plugin = env_or("AOBENCH_BENCH_PLUGIN", "sedd");
  const std::string flavour = env_or("AOBENCH_BENCH_FLAVOUR", "small");
  auto model = aobench::PluginRegistry::instance().create(plugin);
  model->configure(aobench::flavour_defaults(plugin, flavour));
  model->build(dev);
  label = plugin + "/" + flavour;
  return model;
}

void BM_PluginForward(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("CUDA is not available: this benchmark times GPU forwards");
    return;
  }
  const int64_t B = std::stoll(env_or("AOBENCH_BENCH_BATCH", "32"));
  const torch::Device dev(torch::kCUDA, 0);
  std::string label;
  auto model = bench_model(dev, label);
  model->module().eval();
  const int64_t T = model->block_size();
  auto tokens = torch::randint(0, model->vocab_size(), {B, T}, torch::TensorOptions().dtype(torch::kLong).device(dev));
  auto order = torch::arange(T, tokens.options()).expand({B, T}).contiguous();
  const bool encoder = model->info().paradigm == aobench::Paradigm::kMaskedDiffusionEncoder;
  at::Generator gen = at::detail::createCPUGenerator(0);

  torch::NoGradGuard no_grad;
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  auto forward = [&] {
    if (encoder) {
      model->elbo(tokens, 1, gen);
    } else {
      model->log_prob(tokens, order, gen);
    }
  };
  restrict_sdpa(env_or("AOBENCH_SDPA_BACKEND", ""));
  for (int i = 0; i < 3; ++i) forward();  // warm-up: kernels, caches, rotary tables
  torch::cuda::synchronize();
  if (env_or("AOBENCH_BENCH_PROFILE", "0") == "1") print_kernel_profile(label, forward);
  time_on_gpu(state, dev, forward);
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  at::autocast::clear_cache();
  const double fwd_flops = model->flops_per_token(T) / 3.0 * double(B * T);
  state.counters["TFLOP/s"] = benchmark::Counter(fwd_flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["fwd_GFLOP"] = fwd_flops / 1e9;
  state.SetLabel(label + " B=" + std::to_string(B) + " T=" + std::to_string(T));
}

BENCHMARK(BM_PluginForward)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(20)->Repetitions(3)
    ->ReportAggregatesOnly(true);

// One training step's network work: loss(batch) + backward under bf16 autocast (no optimizer update, which
// is the same AdamW for every plugin). Decoder-only plugins get one uniform random order per sequence
// (gpt: identity). Reports tok/s and achieved TFLOP/s from flops_per_token(T); AOBENCH_BENCH_PROFILE=1
// prints the top kernels of one step, which is how two plugins' steps are compared kernel by kernel.
void BM_PluginTrainStep(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("CUDA is not available: this benchmark times GPU training steps");
    return;
  }
  const int64_t B = std::stoll(env_or("AOBENCH_BENCH_BATCH", "16"));
  const torch::Device dev(torch::kCUDA, 0);
  std::string label;
  auto model = bench_model(dev, label);
  model->module().train();
  const int64_t T = model->block_size();
  auto opts = torch::TensorOptions().dtype(torch::kLong).device(dev);
  aobench::TrainBatch batch;
  batch.tokens = torch::randint(0, model->vocab_size(), {B, T}, opts);
  if (model->info().paradigm != aobench::Paradigm::kMaskedDiffusionEncoder)
    batch.order = model->info().name == "gpt" ? torch::arange(T, opts).expand({B, T}).contiguous()
                                  : torch::rand({B, T}, torch::TensorOptions().device(dev)).argsort(int64_t{1});
  at::Generator gen = at::detail::createCPUGenerator(0);
  auto step = [&] {
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    auto loss = model->loss(batch, gen).loss;
    at::autocast::set_autocast_enabled(at::kCUDA, false);
    at::autocast::clear_cache();
    loss.backward();
    for (auto& p : model->module().parameters()) p.mutable_grad() = torch::Tensor();
  };
  restrict_sdpa(env_or("AOBENCH_SDPA_BACKEND", ""));
  for (int i = 0; i < 3; ++i) step();
  torch::cuda::synchronize();
  if (env_or("AOBENCH_BENCH_PROFILE", "0") == "1") print_kernel_profile(label + " train", step);
  time_on_gpu(state, dev, step);
  state.counters["tok/s"] = benchmark::Counter(double(B * T), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["TFLOP/s"] = benchmark::Counter(model->flops_per_token(T) * double(B * T) / 1e12,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(label + " B=" + std::to_string(B) + " T=" + std::to_string(T));
}

// The device's measured bf16 GEMM peak (8192³, the shape cuBLAS runs fastest): the denominator of a FLOP
// floor (forward FLOPs / this rate), which the SEDD sampling-step target of issue C is stated against.
void BM_Bf16MatmulPeak(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("CUDA is not available");
    return;
  }
  const int64_t n = 8192;
  auto opts = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA, 0);
  auto a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts), c = torch::empty({n, n}, opts);
  for (int i = 0; i < 5; ++i) torch::mm_out(c, a, b);
  torch::cuda::synchronize();
  time_on_gpu(state, a.device(), [&] { torch::mm_out(c, a, b); });
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * n * n * n / 1e12, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Bf16MatmulPeak)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(50)->Repetitions(3)
    ->ReportAggregatesOnly(true);

BENCHMARK(BM_PluginTrainStep)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(10)->Repetitions(3)
    ->ReportAggregatesOnly(true);

// One whole generation: sample() of AOBENCH_BENCH_BATCH (32) sequences of the model's block_size (or
// AOBENCH_BENCH_LENGTH) tokens in AOBENCH_BENCH_STEPS (1024) steps, top-p 0.95, temperature 0.9, float64
// draws, bf16 autocast, timed with CUDA events after a warm-up sample of at most 16 steps (the step shapes
// are the same). Reports the network calls made and ms per call (a diffusion sampler's step).
void BM_PluginSample(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("CUDA is not available: this benchmark times GPU sampling");
    return;
  }
  const torch::Device dev(torch::kCUDA, 0);
  std::string label;
  auto model = bench_model(dev, label);
  aobench::SampleRequest r;
  r.batch_size = std::stoll(env_or("AOBENCH_BENCH_BATCH", "32"));
  r.length = std::stoll(env_or("AOBENCH_BENCH_LENGTH", std::to_string(model->block_size())));
  r.steps = std::stoll(env_or("AOBENCH_BENCH_STEPS", "1024"));
  r.temperature = 0.9;
  r.top_p = 0.95;
  r.device = dev;
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  auto warm = r;
  warm.steps = std::min<int64_t>(r.steps, 16);
  model->sample(warm);
  torch::cuda::synchronize();
  int64_t calls = 0;
  time_on_gpu(state, dev, [&] {
    calls = model->sample(r).network_calls;
    ++r.seed;
  });
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  at::autocast::clear_cache();
  state.counters["calls"] = double(calls);
  state.counters["ms/call"] = benchmark::Counter(
      double(calls) / 1e3, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetLabel(label + " B=" + std::to_string(r.batch_size) + " L=" + std::to_string(r.length) +
                 " steps=" + std::to_string(r.steps));
}
// Repetitions from --benchmark_repetitions (a SEDD sample at 1024 steps takes tens of seconds).
BENCHMARK(BM_PluginSample)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
