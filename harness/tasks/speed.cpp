// Implements: `aobench speed` (spec-ao-gpt §4.5): wall-clock time of one complete generation of
// speed.batch_size × speed.length tokens for every speed.steps value, warm-up calls excluded, the device
// synchronised and CUDA timed with CUDA events, speed.repeats timed calls → mean ± sd. The model is a
// trained run (--run) or a random init of --set model.plugin / model.flavour (timing needs no weights).
// The sampling knobs (top-p, temperature, float64 draws, schedule) are the sample.* keys. Results land in a
// results.json (reports/results.h): "speed_s<steps>/gen_s" (lower is better) and "…/gen_tok_s", which
// `aobench compare` checks and `aobench report` plots log-log against steps.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "core/config.h"
#include "core/config_types.h"
#include "core/device.h"
#include "core/env_info.h"
#include "core/errors.h"
#include "core/plugin_api.h"
#include "harness/cli.h"
#include "harness/registry.h"
#include "harness/resolve_config.h"
#include "harness/run_record.h"
#include "harness/tasks.h"
#include "harness/train/checkpoint.h"
#include "metrics/generation.h"
#include "reports/results.h"

namespace aobench {
namespace fs = std::filesystem;

std::string SpeedTask::command_line() const {
  std::string line = run_dir.empty() ? "" : "--run " + run_dir;
  line += line.empty() && !overrides.empty() ? overrides.command_line().substr(1) : overrides.command_line();
  return line + (out.empty() ? "" : " --out " + out);
}

void run_speed(const SpeedTask& task) {
  const CoutToStderr data_on_stdout(task.out == "-");
  FILE* table = task.out == "-" ? stderr : stdout;
  const Overrides& overrides = task.overrides;
  std::unique_ptr<ModelPlugin> owned;
  nlohmann::json config;
  std::string name;
  int64_t step = 0;
  torch::Device device = torch::kCPU;
  if (!task.run_dir.empty()) {
    const std::string& run_dir = task.run_dir;
    const fs::path saved_path = fs::path(run_dir) / "config.resolved.json";
    if (!fs::exists(saved_path))
      throw ConfigError("'" + run_dir + "' is not a run directory (no config.resolved.json)",
                        "pass a trained run, or time a random init with --set model.plugin=P --set model.flavour=F");
    const std::vector<std::string> allowed = {"speed", "sample", "perf", "train.device", "train.dtype"};
    config = generation_config(load_json_file(saved_path.string()), overrides, allowed, "speed --run");
    device = select_device(TrainConfig::from_json(config).device);
    LoadedModel loaded = load_model_for_eval(run_dir, device, SampleConfig::from_json(config).ema);
    owned = std::move(loaded.model);
    config = generation_config(loaded.config, overrides, allowed, "speed --run");
    name = run_name(run_dir);
    step = loaded.step;
  } else {
    if (overrides.find("model.plugin") == nullptr)
      throw ConfigError("aobench speed needs --run RUN_DIR or --set model.plugin=P", kSpeedUsage);
    config = resolve_config(nlohmann::json::object(), overrides, "--set");
    const TrainConfig train = TrainConfig::from_json(config);
    device = select_device(train.device);
    owned = PluginRegistry::instance().create(get_string(config, "model.plugin"));
    owned->configure(config.at("model"));
    torch::manual_seed(train.seed);
    owned->build(device);
    name = get_string(config, "model.plugin") + "_" + get_string(config, "model.flavour");
  }
  ModelPlugin& model = *owned;
  const SampleOptions sample(SampleConfig::from_json(config));
  SpeedConfig speed = SpeedConfig::from_json(config);
  speed.length = generation_length(speed.length, model.block_size(), "speed.length", " or time a larger flavour");
  PerfConfig::from_json(config).apply();
  const bool bf16 = use_bf16_autocast(TrainConfig::from_json(config).dtype, device);
  const std::string dev_name = device_name(device);
  std::cout << "speed: " << name << " (" << model.info().name << ", " << to_string(model.info().paradigm) << ") on "
            << dev_name << (bf16 ? ", bf16 autocast" : ", fp32") << ", batch " << speed.batch_size << " × "
            << speed.length << " tokens, top-p " << sample.top_p << ", temperature " << sample.temperature
            << (sample.float64 ? ", float64 draws" : ", float32 draws") << ", " << speed.warmup << " warm-up + "
            << speed.repeats << " timed call(s) per steps value\n";
  // The hardware floor beside every timing (metrics/generation.h): bf16 on a GPU of known bandwidth and peak.
  GenerationShape shape;
  shape.kv_cache = model.info().paradigm != Paradigm::kMaskedDiffusionEncoder;
  shape.batch = speed.batch_size;
  shape.length = speed.length;
  shape.n_layer = config["model"].value("n_layer", int64_t{0});
  shape.n_embd = config["model"].value("n_embd", int64_t{0});
  shape.matmul_params =
      (model.flops_per_token(speed.length) - 12.0 * static_cast<double>(shape.n_layer * shape.n_embd * speed.length)) /
      6.0;
  const double bandwidth = bf16 ? hbm_bandwidth(dev_name) : 0, peak = bf16 ? peak_bf16_flops(dev_name) : 0;
  const bool floor_known = bandwidth > 0 && peak > 0 && shape.n_layer > 0 && shape.matmul_params > 0;
  if (floor_known)
    std::cout << "speed: hardware floor from " << bandwidth / 1e12 << " TB/s and " << peak / 1e12
              << " TFLOP/s (bf16): every matmul weight (" << shape.matmul_params / 1e6
              << " M) read once per network call"
              << (shape.kv_cache ? ", the KV cache of the placed tokens read by each call" : ", no cache")
              << "; the larger of bytes / bandwidth and FLOPs / peak per call\n";
  else
    std::cout << "speed: no hardware floor (it needs bf16 on a GPU whose bandwidth and peak aobench knows: "
                 "AOBENCH_HBM_BANDWIDTH, AOBENCH_PEAK_FLOPS)\n";
  std::fprintf(table, "%8s %12s %10s %14s %8s %10s %9s\n", "steps", "mean s", "sd s", "tokens/s", "calls", "floor s",
               "× floor");  // "×" is two bytes: %9s pads it to 8 columns

  RunResults run;
  run.plugin = model.info().name;
  run.flavour = get_string(config, "model.flavour");
  run.paradigm = to_string(model.info().paradigm);
  for (const auto& p : model.module().parameters()) run.params += p.numel();
  run.steps = step;
  run.config = config;
  AutocastScope autocast(bf16);
  for (int64_t steps : speed.steps) {
    SampleOptions o = sample;
    o.steps = steps;
    o.length = speed.length;
    const SampleRequest req = o.request(speed.batch_size, sample.seed, device);
    const GenerationTiming t = time_generation(model, req, speed.warmup, speed.repeats);
    const double tok_s = speed.batch_size * speed.length / t.mean;
    shape.calls = t.network_calls;
    const GenerationFloor floor = generation_floor(shape, bandwidth, peak);
    std::fprintf(table, "%8lld %12.4f %10.4f %14.0f %8lld", static_cast<long long>(steps), t.mean, t.sd, tok_s,
                 static_cast<long long>(t.network_calls));
    if (floor_known)
      std::fprintf(table, " %10.4f %8.2f\n", floor.seconds, t.mean / floor.seconds);
    else
      std::fprintf(table, " %10s %8s\n", "n/a", "n/a");
    std::fflush(table);
    char protocol[512];
    std::snprintf(protocol, sizeof(protocol),
                  "one generation of %lld × %lld tokens; %lld steps; %lld network calls; top-p %g, temperature %g; "
                  "%s draws, %s; %lld warm-up + %lld timed calls, mean ± stderr over them; %s on %s",
                  static_cast<long long>(speed.batch_size), static_cast<long long>(speed.length),
                  static_cast<long long>(steps), static_cast<long long>(t.network_calls), sample.top_p,
                  sample.temperature, sample.float64 ? "float64" : "float32", bf16 ? "bf16 autocast" : "fp32",
                  static_cast<long long>(speed.warmup), static_cast<long long>(speed.repeats),
                  device.is_cuda() ? "CUDA events" : "steady_clock", dev_name.c_str());
    const double se = t.sd / std::sqrt(static_cast<double>(t.seconds.size()));
    MetricParams params;  // the protocol as fields; speed_dataset(steps) stays the key
    params.steps = steps;
    params.family = "gen_s";
    run.metrics[speed_dataset(steps) + "/gen_s"] = {
        t.mean, se, static_cast<int64_t>(t.seconds.size()), false, false, protocol, params};
    params.family = "gen_tok_s";
    run.metrics[speed_dataset(steps) + "/gen_tok_s"] = {
        tok_s, tok_s * se / t.mean, static_cast<int64_t>(t.seconds.size()), false, true, protocol, params};
    if (floor_known) {
      const std::string basis = std::string(protocol) + "; hardware floor " + std::to_string(floor.seconds) +
                                " s: " + std::to_string(floor.bytes / 1e9) + " GB at " +
                                std::to_string(bandwidth / 1e12) + " TB/s, " + std::to_string(floor.flops / 1e12) +
                                " TFLOP at " + std::to_string(peak / 1e12) + " TFLOP/s";
      params.family = "gen_floor_s";
      run.metrics[speed_dataset(steps) + "/gen_floor_s"] = {floor.seconds, std::nullopt, 1,     false,
                                                            false,         basis,        params};
      params.family = "gen_floor_x";  // the timing over its floor: 1 would be the hardware's limit
      run.metrics[speed_dataset(steps) + "/gen_floor_x"] = {t.mean / floor.seconds,
                                                            se / floor.seconds,
                                                            static_cast<int64_t>(t.seconds.size()),
                                                            false,
                                                            false,
                                                            basis,
                                                            params};
    }
  }

  const std::string out = !task.out.empty()       ? task.out
                          : !task.run_dir.empty() ? (fs::path(task.run_dir) / "results.json").string()
                                                  : "speed_" + name + ".json";
  Results mine;
  mine.context = env_info(device.str(), bf16 ? "bfloat16 autocast" : "float32");
  mine.runs[name] = run;
  // Read-merge-write under a lock; a damaged file keeps these timings beside it (run_record.h).
  merge_into_results_file(mine, out, "speed", "timing", "aobench speed");
  if (out != "-") std::cout << "results: " << out << "\n";
}

}  // namespace aobench
