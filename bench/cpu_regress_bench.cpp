// Implements: the CPU micro-benchmarks of the regression baseline (scripts/regress.sh, bench/baseline/): the
// data loader (BatchSampler windows from a token file), and for every plugin at debug size one training
// step (loss, backward, gradient norm, clip, AdamW as the trainer runs them), one evaluation forward (exact
// L2R log_prob for decoders, a one-timestep ELBO for encoders) and one short generation. CPU and float32
// only, so they run on the 2-core CI machine; wall time per call, repetitions from --benchmark_repetitions.
// Filter: --benchmark_filter=Cpu (the GPU suites of plugin_step_bench.cpp skip without CUDA anyway).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "core/plugin_api.h"
#include "datasets/token_file.h"
#include "harness/registry.h"
#include "harness/train/optim.h"

namespace {

constexpr int64_t kBatch = 8;

// The debug flavour of `plugin` on the CPU, in train mode, with a (kBatch, T) batch of random tokens and
// uniform random orders for decoders (gpt: identity). Fixed seeds: every run times the same work.
std::unique_ptr<aobench::ModelPlugin> debug_model(const std::string& plugin, aobench::TrainBatch& batch) {
  torch::manual_seed(0);
  auto model = aobench::PluginRegistry::instance().create(plugin);
  model->configure(aobench::flavour_defaults(plugin, "debug"));
  model->build(torch::kCPU);
  model->module().train();
  const int64_t T = model->block_size();
  batch.tokens = torch::randint(0, model->vocab_size(), {kBatch, T}, torch::kLong);
  if (model->info().paradigm != aobench::Paradigm::kMaskedDiffusionEncoder)
    batch.order = plugin == "gpt" ? torch::arange(T, torch::kLong).expand({kBatch, T}).contiguous()
                                  : torch::rand({kBatch, T}).argsort(int64_t{1});
  return model;
}

void BM_CpuTrainStep(benchmark::State& state, const std::string& plugin) {
  aobench::TrainBatch batch;
  auto model = debug_model(plugin, batch);
  std::vector<aobench::AdamWGroup> groups;
  for (auto& g : model->param_groups())
    if (!g.params.empty()) groups.push_back({g.params, g.decay ? 0.1 : 0.0});
  aobench::AdamW optimizer(std::move(groups), 0.9, 0.95, 1e-8);
  at::Generator gen = at::detail::createCPUGenerator(0);
  for (auto _ : state) {
    optimizer.zero_grad();
    auto loss = model->loss(batch, gen).loss;
    loss.backward();
    const auto norm = optimizer.grad_norm();
    optimizer.step(1e-4, 1.0, norm, torch::logical_not(torch::isfinite(norm)).to(torch::kFloat32));
    benchmark::DoNotOptimize(loss.item<float>());
  }
  state.SetLabel(plugin + "/debug B=" + std::to_string(kBatch) + " T=" + std::to_string(model->block_size()));
}

void BM_CpuEval(benchmark::State& state, const std::string& plugin) {
  aobench::TrainBatch batch;
  auto model = debug_model(plugin, batch);
  model->module().eval();
  const bool encoder = model->info().paradigm == aobench::Paradigm::kMaskedDiffusionEncoder;
  const int64_t T = model->block_size();
  const torch::Tensor l2r = torch::arange(T, torch::kLong).expand({kBatch, T}).contiguous();
  at::Generator gen = at::detail::createCPUGenerator(0);
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    // Encoders' exact log_prob costs T calls; the ELBO with one timestep is their evaluation forward.
    const auto out = encoder ? model->elbo(batch.tokens, 1, gen) : model->log_prob(batch.tokens, l2r, gen);
    benchmark::DoNotOptimize(out.nll.sum().item<double>());
  }
  state.SetLabel(plugin + (encoder ? " elbo(mc=1)" : " log_prob(l2r)") + " B=" + std::to_string(kBatch));
}

void BM_CpuSample(benchmark::State& state, const std::string& plugin) {
  aobench::TrainBatch batch;
  auto model = debug_model(plugin, batch);
  model->module().eval();
  aobench::SampleRequest r;
  r.batch_size = 2;
  r.length = 64;
  r.steps = 16;
  r.temperature = 0.9;
  r.top_p = 0.95;
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    benchmark::DoNotOptimize(model->sample(r).tokens.sum().item<int64_t>());
    ++r.seed;
  }
  state.SetLabel(plugin + " B=2 L=64 steps=16");
}

// The trainer's data path: (16, 128) windows drawn from a 4 M-token file (uint16, byte vocabulary).
void BM_CpuBatchSampler(benchmark::State& state) {
  const auto path =
      std::filesystem::temp_directory_path() / ("aobench_bench_tokens_" + std::to_string(::getpid()) + ".bin");
  std::vector<uint32_t> tokens(4'000'000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint32_t((i * 2654435761u) >> 7) % 257;
  aobench::write_token_file(path.string(), tokens, 257);
  {
    auto file = std::make_shared<aobench::TokenFile>(path.string());
    aobench::BatchSampler sampler(file, 128, 1337);
    for (auto _ : state) benchmark::DoNotOptimize(sampler.next(16).data_ptr<int64_t>());
  }
  std::filesystem::remove(path);
  state.SetItemsProcessed(state.iterations() * 16 * 128);
}
BENCHMARK(BM_CpuBatchSampler)->Unit(benchmark::kMicrosecond);

// One registration per plugin the regression baseline covers (the five paradigms).
const bool kRegistered = [] {
  for (const std::string plugin : {"gpt", "sigma_gpt", "ao_gpt", "sedd", "radd"}) {
    benchmark::RegisterBenchmark(("BM_CpuTrainStep/" + plugin).c_str(), BM_CpuTrainStep, plugin)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("BM_CpuEval/" + plugin).c_str(), BM_CpuEval, plugin)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("BM_CpuSample/" + plugin).c_str(), BM_CpuSample, plugin)
        ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace
