// Implements: forward-pass, training-step and whole-generation (BM_PluginSample) micro-benchmarks for any
// plugin.
// Times elbo(tokens, mc_steps = 1) under NoGrad and bf16 autocast on CUDA with CUDA events: one network
// forward at (BATCH, block_size) plus the estimator's O(B·T) bookkeeping. For decoder-only plugins (no
// ELBO) it times log_prob under the L2R order, also one forward. Reports achieved TFLOP/s from
// flops_per_token(T)/3 (forward only). Env: AOBENCH_BENCH_PLUGIN (sedd), AOBENCH_BENCH_FLAVOUR (small),
// AOBENCH_BENCH_BATCH (32). Example: AOBENCH_BENCH_PLUGIN=radd aobench_bench --benchmark_filter=PluginForward
// Diagnosis: AOBENCH_SDPA_BACKEND=flash|cudnn|efficient|math allows only that SDPA kernel (a call it cannot
// serve throws "No available kernel"); AOBENCH_BENCH_PROFILE=1 prints the top CUDA kernels of one forward
// (AOBENCH_BENCH_PROFILE_TOP of them, default 25).
// AOBENCH_BENCH_RESULTS=FILE merges each timed benchmark's numbers into FILE as an aobench results.json
// (run "<plugin>/<flavour>", metrics "<bench>_b<B>/tok_s|mfu|step_ms|peak_mem_gib"), which `aobench compare
// BASE.json NEW.json` checks: throughput lower or step time / memory higher past --threshold is a regression.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <benchmark/benchmark.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include "core/device.h"
#include "core/env_info.h"
#include "core/plugin_api.h"
#include "harness/registry.h"
#include "harness/train/graph.h"
#include "harness/train/optim.h"
#include "plugins/common/decode_attention.h"
#include "plugins/common/decode_linear.h"
#include "plugins/common/sampling.h"
#include "reports/results.h"

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

// Runs `fn` once under the Kineto profiler and prints the 25 CUDA kernels with the most total time. Beside each
// kernel's own time, the time it adds to the GPU's timeline: with the kernels in start order, how far its end
// moves the latest end so far (a dependent launched with PDL overlaps the kernel before it, so its own time
// overstates what it costs), and the idle time before it starts (the launch gap). Their sums over all kernels are
// the profiled wall time on the GPU.
template <typename Fn>
void print_kernel_profile(const std::string& label, Fn fn) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const std::set<ActivityType> acts = {ActivityType::CPU, ActivityType::CUDA};
  const torch::profiler::impl::ProfilerConfig cfg(torch::profiler::impl::ProfilerState::KINETO);
  prof::prepareProfiler(cfg, acts);
  prof::enableProfiler(cfg, acts);
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  torch::cuda::synchronize();
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto result = prof::disableProfiler();
  struct Kernel {
    double own = 0, added = 0, idle = 0;  // µs: its durations, what it added to the timeline, the gaps before it
    int calls = 0;
  };
  std::map<std::string, Kernel> per_kernel;  // by name
  std::vector<const torch::autograd::profiler::KinetoEvent*> gpu;
  for (const auto& e : result->events())
    if (e.deviceType() == c10::DeviceType::CUDA) gpu.push_back(&e);
  std::stable_sort(gpu.begin(), gpu.end(), [](auto* a, auto* b) { return a->startNs() < b->startNs(); });
  uint64_t frontier = gpu.empty() ? 0 : gpu.front()->startNs();  // the latest end so far
  for (const auto* e : gpu) {
    auto& k = per_kernel[e->name().substr(0, 90)];
    const uint64_t start = e->startNs(), end = start + e->durationNs(), from = std::max(start, frontier);
    k.own += e->durationNs() / 1e3;
    k.added += end > from ? (end - from) / 1e3 : 0.0;
    k.idle += (from - frontier) / 1e3;
    k.calls += 1;
    frontier = std::max(frontier, end);
  }
  Kernel sum;  // over every kernel
  for (const auto& [name, k] : per_kernel) {
    sum.own += k.own;
    sum.added += k.added;
    sum.idle += k.idle;
  }
  std::vector<std::pair<std::string, Kernel>> rows(per_kernel.begin(), per_kernel.end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.own > b.second.own; });
  // GPU time well under the wall time means the GPU waited for the host (launches, synchronisations).
  std::printf(
      "profile %s: %.2f ms of GPU time in %zu kernels of %zu kinds, %.2f ms wall (profiler on); the "
      "kernels added %.2f ms to the GPU's timeline and it idled %.2f ms between them\n",
      label.c_str(), sum.own / 1e3, gpu.size(), rows.size(), wall_ms, sum.added / 1e3, sum.idle / 1e3);
  std::printf("  %11s %11s %11s %6s\n", "own ms", "added ms", "idle ms", "calls");
  const std::string top_text = env_or("AOBENCH_BENCH_PROFILE_TOP", "25");
  char* end = nullptr;
  const size_t top = std::strtoul(top_text.c_str(), &end, 10);
  if (top_text.empty() || *end != '\0')
    throw std::invalid_argument("AOBENCH_BENCH_PROFILE_TOP='" + top_text + "' is not a count; give e.g. 25 or 200");
  for (size_t i = 0; i < rows.size() && i < top; ++i) {
    const Kernel& k = rows[i].second;
    std::printf("  %11.3f %11.3f %11.3f %5d×  %s\n", k.own / 1e3, k.added / 1e3, k.idle / 1e3, k.calls,
                rows[i].first.c_str());
  }
}

// Times each benchmark iteration of fn() on the GPU with CUDA events (UseManualTime); returns the mean
// seconds per iteration.
template <typename Fn>
double time_on_gpu(benchmark::State& state, torch::Device dev, Fn fn) {
  auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  double total = 0;
  int64_t n = 0;
  for (auto _ : state) {
    c10::Event start(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
    c10::Event stop(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
    start.record(impl->getStream(dev));
    fn();
    stop.record(impl->getStream(dev));
    stop.synchronize();
    const double s = start.elapsedTime(stop) / 1e3;  // ms → s
    state.SetIterationTime(s);
    total += s;
    ++n;
  }
  return n > 0 ? total / double(n) : 0.0;
}

// Times `calls` calls of fn() captured once in a CUDA graph (as a replayed step launches them: the kernels' time,
// not the host's), after one uncaptured warm-up; `gen`, when given, is registered with the graph so that its
// Philox offsets advance at each replay. Sets the counter `per` to the seconds per call.
void time_captured_calls(benchmark::State& state, torch::Device dev, const std::function<void()>& fn, int calls,
                         const std::string& per, at::Generator* gen = nullptr) {
  fn();  // warm-up, uncaptured: cuBLAS's handle and heuristics, the kernels' first launches
  torch::cuda::synchronize();
  at::cuda::CUDAGraph graph;
  {
    c10::cuda::CUDAStreamGuard side(at::cuda::getStreamFromPool(false, dev.index()));  // captured off the default
    if (gen) graph.register_generator_state(*gen);
    graph.capture_begin();
    fn();
    graph.capture_end();
  }
  graph.replay();
  torch::cuda::synchronize();
  time_on_gpu(state, dev, [&] { graph.replay(); });
  // Seconds per call (the console prints it with a unit prefix, e.g. 75.0us).
  state.counters[per] =
      benchmark::Counter(calls, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// AOBENCH_BENCH_RESULTS: merges one benchmark's numbers into that results.json (created when absent).
// tokens = tokens per timed call; flops_per_token = the FLOPs those tokens cost (train: 6N+…, forward: /3).
void record_result(const std::string& bench, const std::string& label, int64_t B, const aobench::ModelPlugin& model,
                   double seconds, double tokens, double flops_per_token, torch::Device dev) {
  const std::string path = env_or("AOBENCH_BENCH_RESULTS", "");
  if (path.empty() || seconds <= 0) return;
  const std::string device = aobench::device_name(dev);
  const double tok_s = tokens / seconds, peak = aobench::peak_bf16_flops(device);
  const std::string what = bench + " B=" + std::to_string(B) + " T=" + std::to_string(model.block_size()) +
                           ", bf16 autocast, random tokens, CUDA-event time per call (aobench_bench)";
  aobench::Results r;
  r.context = aobench::env_info("cuda", "bfloat16 autocast");
  aobench::RunResults& run = r.runs[label];
  run.plugin = model.info().name;
  run.flavour = label.substr(label.find('/') + 1);
  run.paradigm = aobench::to_string(model.info().paradigm);
  const std::string key = bench + "_b" + std::to_string(B) + "/";
  auto put = [&](const std::string& m, double v, bool higher) {
    aobench::MetricValue mv;
    mv.value = v;
    mv.higher_is_better = higher;
    mv.protocol = what;
    mv.params.family = m;
    run.metrics[key + m] = mv;
  };
  put("tok_s", tok_s, true);
  put("step_ms", 1e3 * seconds, false);
  put("peak_mem_gib", aobench::max_memory_gib(dev), false);
  if (peak > 0) put("mfu", flops_per_token * tok_s / peak, true);
  aobench::Results all;
  if (std::ifstream(path).good()) all = aobench::Results::load(path);
  all.merge(r);
  all.save(path);
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

// bench_model in train mode, and in `batch` one (B, block_size) batch of random tokens for it, B =
// AOBENCH_BENCH_BATCH (16). Decoder-only plugins get one uniform random order per sequence (gpt: identity).
std::unique_ptr<aobench::ModelPlugin> train_bench_model(torch::Device dev, std::string& label,
                                                        aobench::TrainBatch& batch) {
  const int64_t B = std::stoll(env_or("AOBENCH_BENCH_BATCH", "16"));
  auto model = bench_model(dev, label);
  model->module().train();
  const int64_t T = model->block_size();
  auto opts = torch::TensorOptions().dtype(torch::kLong).device(dev);
  batch.tokens = torch::randint(0, model->vocab_size(), {B, T}, opts);
  if (model->info().paradigm != aobench::Paradigm::kMaskedDiffusionEncoder)
    batch.order = model->info().name == "gpt"
                      ? torch::arange(T, opts).expand({B, T}).contiguous()
                      : torch::rand({B, T}, torch::TensorOptions().device(dev)).argsort(int64_t{1});
  return model;
}

// The plugin's training loss on `batch` under bf16 autocast, the cast cache cleared after it.
torch::Tensor autocast_loss(aobench::ModelPlugin& model, const aobench::TrainBatch& batch, at::Generator& gen) {
  aobench::AutocastScope bf16(true);
  return model.loss(batch, gen).loss;
}

// AdamW over the plugin's parameter groups with the paper's settings (β 0.9 / 0.95, weight decay 0.1).
aobench::AdamW bench_adamw(aobench::ModelPlugin& model) {
  std::vector<aobench::AdamWGroup> groups;
  for (auto& g : model.param_groups())
    if (!g.params.empty()) groups.push_back({g.params, g.decay ? 0.1 : 0.0});
  return aobench::AdamW(std::move(groups), 0.9, 0.95, 1e-8);
}

// tok/s, TFLOP/s and peak memory counters and the label of a training-step benchmark of B × T tokens.
void report_train_step(benchmark::State& state, const std::string& label, const aobench::ModelPlugin& model, int64_t B,
                       int64_t T, torch::Device dev) {
  state.counters["tok/s"] = benchmark::Counter(double(B * T), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["TFLOP/s"] = benchmark::Counter(model.flops_per_token(T) * double(B * T) / 1e12,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_GiB"] = aobench::max_memory_gib(dev);
  state.SetLabel(label + " B=" + std::to_string(B) + " T=" + std::to_string(T));
}

// Warms `fn` up (3 calls: kernels, caches, rotary tables) under AOBENCH_SDPA_BACKEND, prints its kernel
// profile as `profile_label` when AOBENCH_BENCH_PROFILE=1, resets the peak-memory counter and returns
// time_on_gpu's mean seconds per call.
template <typename Fn>
double warm_up_and_time(benchmark::State& state, torch::Device dev, const std::string& profile_label, Fn fn) {
  restrict_sdpa(env_or("AOBENCH_SDPA_BACKEND", ""));
  for (int i = 0; i < 3; ++i) fn();
  torch::cuda::synchronize();
  if (env_or("AOBENCH_BENCH_PROFILE", "0") == "1") print_kernel_profile(profile_label, fn);
  aobench::reset_peak_memory(dev);
  return time_on_gpu(state, dev, fn);
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
  const double seconds = warm_up_and_time(state, dev, label, forward);
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  at::autocast::clear_cache();
  record_result("forward", label, B, *model, seconds, double(B * T), model->flops_per_token(T) / 3.0, dev);
  const double fwd_flops = model->flops_per_token(T) / 3.0 * double(B * T);
  state.counters["TFLOP/s"] = benchmark::Counter(fwd_flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["fwd_GFLOP"] = fwd_flops / 1e9;
  state.SetLabel(label + " B=" + std::to_string(B) + " T=" + std::to_string(T));
}

BENCHMARK(BM_PluginForward)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20)
    ->Repetitions(3)
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
  const torch::Device dev(torch::kCUDA, 0);
  std::string label;
  aobench::TrainBatch batch;
  auto model = train_bench_model(dev, label, batch);
  const int64_t B = batch.tokens.size(0), T = batch.tokens.size(1);
  at::Generator gen = at::detail::createCPUGenerator(0);
  auto step = [&] {
    auto loss = autocast_loss(*model, batch, gen);
    loss.backward();
    for (auto& p : model->module().parameters()) p.mutable_grad() = torch::Tensor();
  };
  const double seconds = warm_up_and_time(state, dev, label + " train", step);
  record_result("fwd_bwd", label, B, *model, seconds, double(B * T), model->flops_per_token(T), dev);
  report_train_step(state, label, *model, B, T, dev);
}

// The whole optimizer step of `aobench train` minus data loading: loss + backward, the global gradient norm,
// clip 1.0 and the fused AdamW update (harness/train/optim.h, AdamW groups as the trainer builds them), no host
// read (BM_PluginTrainFullStep; AOBENCH_FUSED_ADAMW=0 times the reference update). `captured`: the same step
// recorded once in a CUDA graph (harness/train/graph.h, as `aobench train` does for a capturable plugin) and
// replayed (BM_PluginTrainGraphStep): the step without the host's per-kernel launches, the floor of a
// captured training step (`aobench train` adds its batch draw, input copies and one host read per step).
void time_full_train_step(benchmark::State& state, bool captured) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("CUDA is not available: this benchmark times GPU training steps");
    return;
  }
  const torch::Device dev(torch::kCUDA, 0);
  std::string label;
  aobench::TrainBatch batch;
  auto model = train_bench_model(dev, label, batch);
  if (captured && !model->info().speed.capturable_loss) {
    state.SkipWithError("the plugin does not declare capturable_loss");
    return;
  }
  if (captured && !model->info().capabilities.any_order) batch.order = torch::Tensor();  // identity implied
  const int64_t B = batch.tokens.size(0), T = batch.tokens.size(1);
  aobench::AdamW optimizer = bench_adamw(*model);
  at::Generator gen = at::detail::createCPUGenerator(0);
  const auto lr = torch::full({}, 1e-4, torch::TensorOptions().dtype(torch::kFloat32).device(dev));
  auto step = [&] {  // no zero_grad here: a replay overwrites the gradients the graph owns
    auto loss = autocast_loss(*model, batch, gen);
    loss.backward();
    const auto norm = optimizer.grad_norm();
    optimizer.step(lr, 1.0, norm, torch::logical_not(torch::isfinite(norm)).to(torch::kFloat32));
  };
  auto eager = [&] {
    optimizer.zero_grad();
    step();
  };
  double seconds = 0;
  if (!captured) {
    seconds = warm_up_and_time(state, dev, label + " full step", eager);
  } else {
    for (int i = 0; i < 3; ++i) eager();  // kernels chosen, optimizer state allocated
    optimizer.zero_grad();
    aobench::TrainStepGraph graph(dev);
    graph.capture(step);
    seconds = warm_up_and_time(state, dev, label + " captured step", [&] { graph.replay(); });
  }
  record_result(captured ? "train_graph_step" : "train_step", label, B, *model, seconds, double(B * T),
                model->flops_per_token(T), dev);
  report_train_step(state, label, *model, B, T, dev);
}
void BM_PluginTrainFullStep(benchmark::State& state) { time_full_train_step(state, false); }
void BM_PluginTrainGraphStep(benchmark::State& state) { time_full_train_step(state, true); }

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
BENCHMARK(BM_Bf16MatmulPeak)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(50)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

BENCHMARK(BM_PluginTrainStep)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_PluginTrainFullStep)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_PluginTrainGraphStep)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

// One whole generation: sample() of AOBENCH_BENCH_BATCH (32) sequences of the model's block_size (or
// AOBENCH_BENCH_LENGTH) tokens in AOBENCH_BENCH_STEPS (1024) steps, top-p 0.95, temperature 0.9, float64
// draws, bf16 autocast, timed with CUDA events after one untimed sample of the same request (an any-order
// sampler captures a CUDA graph per step shape, and steps that place several tokens take many shapes: a
// shorter warm-up left their captures in the first timed repetition). Reports the network calls made and ms
// per call (a diffusion sampler's step).
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
  model->sample(r);  // warm-up: every step shape captured
  ++r.seed;
  torch::cuda::synchronize();
  if (env_or("AOBENCH_BENCH_PROFILE", "0") == "1") print_kernel_profile(label + " sample", [&] { model->sample(r); });
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

// The token draw alone (common::fused_draw, split automatic): `rows` rows of GPT-2-vocabulary bf16 logits,
// N(0, sd²) (sd 0.05: the near-uniform rows of a model at initialisation, as BM_PluginSample's; sd 3: a
// peaked distribution), temperature 0.9, top-p, `rounds` candidate rounds (0: the radix select alone),
// 10 draws captured in one CUDA graph, so that the time is the kernels' (the samplers launch the draw after
// each step's graph). Reports the time per draw.
void BM_FusedDraw(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("CUDA is not available: this benchmark times the GPU draw");
    return;
  }
  namespace common = aobench::common;
  const torch::Device dev(torch::kCUDA, 0);
  const int64_t rows = state.range(0);
  const double top_p = double(state.range(1)) / 100, sd = double(state.range(3)) / 100;
  const int rounds = static_cast<int>(state.range(2));
  const bool resident = state.range(4) != 0;  // the resident form where it fits (fused_draw_is_resident)
  constexpr int kDraws = 10;
  torch::manual_seed(0);
  auto logits = (torch::randn({rows, 50257}, torch::TensorOptions().device(dev)) * sd).to(torch::kBFloat16);
  auto gen = common::make_generator(dev, 0);
  const auto draws = [&] {
    for (int i = 0; i < kDraws; ++i) common::fused_draw(logits, 0.9, top_p, &gen, {}, 0, rounds, resident);
  };
  state.counters["resident"] = resident && common::fused_draw_is_resident(logits) ? 1 : 0;  // the form timed
  time_captured_calls(state, dev, draws, kDraws, "per_draw", &gen);
}
BENCHMARK(BM_FusedDraw)
    ->ArgNames({"rows", "top_p%", "rounds", "sd%", "resident"})
    ->ArgsProduct({{32}, {95}, {0, aobench::common::kDrawRounds}, {5, 300}, {0, 1}})
    ->ArgsProduct({{128, 512}, {95}, {0, aobench::common::kDrawRounds}, {5, 300}, {1}})
    ->Args({32, 100, 0, 5, 0})
    ->Args({32, 100, 0, 5, 1})
    ->Args({128, 100, 0, 5, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// One Linear of a decode step alone: rows × K bf16 input, (N, K) bf16 weight and bias, through
// common::decode_linear's kernel (kernel 1) or cuBLAS's addmm (kernel 0, the path AOBENCH_DECODE_GEMM=0 takes),
// 10 calls captured in one CUDA graph as a decode step replays them. Reports the time per call and the weight's
// bytes over it (the HBM floor: weights read once).
void BM_DecodeLinear(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("CUDA is not available: this benchmark times a GPU kernel");
    return;
  }
  namespace common = aobench::common;
  const torch::Device dev(torch::kCUDA, 0);
  const int64_t rows = state.range(0), N = state.range(1), K = state.range(2);
  const bool kernel = state.range(3) != 0;
  // col_tiles, k_split: a tile of the kernel's (decode_linear.h), 0: the one decode_linear_tile chooses
  std::optional<common::DecodeLinearTile> tile;
  if (state.range(4) != 0) tile = common::DecodeLinearTile{int(state.range(4)), int(state.range(5))};
  if (tile && (!kernel || !common::decode_linear_tile_fits(*tile, N))) {
    state.SkipWithError("this tile does not divide N (or is asked of cuBLAS)");
    return;
  }
  constexpr int kCalls = 10;
  torch::NoGradGuard no_grad;
  const common::DecodeWeightsScope constant_weights;  // as in a sampler: PDL, the weights loaded early
  torch::manual_seed(0);
  const auto o = torch::TensorOptions().device(dev).dtype(torch::kBFloat16);
  const auto x = torch::randn({rows, K}, o), w = torch::randn({N, K}, o) * 0.02, b = torch::randn({N}, o);
  if (kernel && !common::decode_linear_supports(x, w, b)) {
    state.SkipWithError("decode_linear's kernel does not take this shape (or AOBENCH_DECODE_GEMM=0)");
    return;
  }
  torch::Tensor y;
  const auto calls = [&] {
    for (int i = 0; i < kCalls; ++i)
      y = kernel ? common::decode_linear(x, w, b, common::DecodeActivation::none, tile)
                 : common::decode_linear_reference(x, w, b, common::DecodeActivation::none);
  };
  time_captured_calls(state, dev, calls, kCalls, "per_call");
  state.counters["weight_B/s"] =
      benchmark::Counter(double(kCalls) * double(N * K * 2), benchmark::Counter::kIsIterationInvariantRate);
}
// GPT-2 small's c_attn, attention c_proj, c_fc and MLP c_proj at a decode step of 32 rows, and 8 rows, with
// the chosen tile; then every tile at 32 rows (the sweep decode_linear_tile was chosen from).
BENCHMARK(BM_DecodeLinear)
    ->ArgNames({"rows", "N", "K", "kernel", "col_tiles", "k_split"})
    ->ArgsProduct({{32}, {2304}, {768}, {0, 1}, {0}, {0}})
    ->ArgsProduct({{32}, {768}, {768}, {0, 1}, {0}, {0}})
    ->ArgsProduct({{32}, {3072}, {768}, {0, 1}, {0}, {0}})
    ->ArgsProduct({{32, 8}, {768}, {3072}, {0, 1}, {0}, {0}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeLinear)
    ->Name("BM_DecodeLinearTiles")
    ->ArgNames({"rows", "N", "K", "kernel", "col_tiles", "k_split"})
    ->ArgsProduct({{32}, {2304, 3072}, {768}, {1}, {1, 2, 4}, {1, 2, 4, 8}})
    ->ArgsProduct({{32}, {768}, {768, 3072}, {1}, {1, 2, 4}, {1, 2, 4, 8}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// The attention of a decode step alone: the GPT-2 small shape at batch 32 (32 × 12 rows of h 64, bf16, a cache
// of 1024 slots), one new slot at `slot` (the slots held before it), through common::decode_attention's kernel;
// 12 calls on 12 caches (one a layer, as a step reads them: no call finds another's keys in L2) captured in one
// CUDA graph: `pdl` 1 under a DecodeWeightsScope, as a sampler launches them (each call starts its blocks while
// the one before finishes; in a sample that one is the c_proj, here another attention), 0 in stream order. Reports
// the time per call and the cache bytes it reads over that time: (slot + 1) keys and values a row.
void BM_DecodeAttention(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("CUDA is not available: this benchmark times a GPU kernel");
    return;
  }
  namespace common = aobench::common;
  const torch::Device dev(torch::kCUDA, 0);
  constexpr int64_t B = 32, H = 12, h = 64, cap = 1024, kLayers = 12;
  const int64_t slot = state.range(0);
  torch::NoGradGuard no_grad;
  std::optional<common::DecodeWeightsScope> programmatic;
  if (state.range(1) != 0) programmatic.emplace();
  torch::manual_seed(0);
  const auto o = torch::TensorOptions().device(dev).dtype(torch::kBFloat16);
  const auto q = torch::randn({B, H, 1, h}, o), k = torch::randn({B, H, 1, h}, o), v = torch::randn({B, H, 1, h}, o);
  std::vector<torch::Tensor> kb, vb;
  std::vector<common::DecodeScratch> scratch(kLayers);
  for (int64_t l = 0; l < kLayers; ++l) {
    kb.push_back(torch::randn({B, H, cap, h}, o));
    vb.push_back(torch::randn({B, H, cap, h}, o));
  }
  const auto at = torch::full({1}, slot, o.dtype(torch::kLong));
  if (!common::decode_attention_supports(q, k, v, kb[0], vb[0])) {
    state.SkipWithError("decode_attention's kernel does not take this shape (or AOBENCH_FUSED_DECODE=0)");
    return;
  }
  torch::Tensor y;
  const auto calls = [&] {
    for (int64_t l = 0; l < kLayers; ++l) y = common::decode_attention(q, k, v, kb[l], vb[l], at, 1, 0.125, scratch[l]);
  };
  time_captured_calls(state, dev, calls, kLayers, "per_call");
  state.counters["cache_B/s"] = benchmark::Counter(double(kLayers) * double(B * H * (slot + 1) * h * 2 * 2),
                                                   benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_DecodeAttention)
    ->ArgNames({"slot", "pdl"})
    ->ArgsProduct({{0, 64, 128, 256, 512, 768, 1023}, {1, 0}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
