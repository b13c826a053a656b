// Implements: the training loop (see trainer.h; DESIGN.md §3; spec-ao-gpt §2.2–2.3; spec-sedd-radd §2.6).
// One readable nanoGPT-style loop: sample → (order) → loss/accum → backward, clip, AdamW step, EMA update,
// then logging, validation (EMA weights), checkpoints. Exact resume restores every RNG the loop draws from.
// Data parallel (DESIGN.md §6, torchrun + c10d NCCL): ranks start from rank 0's weights, gradients are
// averaged once per optimizer step, logged/validation losses averaged; world = 1 runs the single-process loop.
#include "harness/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include <ATen/autocast_mode.h>

#include "datasets/token_file.h"
#include "harness/checkpoint.h"
#include "core/config.h"
#include "harness/resolve_config.h"
#include "core/device.h"
#include "harness/distributed.h"
#include "harness/ema.h"
#include "core/errors.h"
#include "harness/optim.h"
#include "core/progress.h"
#include "harness/registry.h"
#include "harness/run_dir.h"
#include "harness/run_record.h"

namespace aobench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kPi = 3.14159265358979323846;
constexpr double kHuge = 1e15;   // "absurd" upper bound for counts
constexpr uint64_t kEvalSeed = 1234;  // validation batches and orders are the same at every evaluation
// Keys a --resume may change without --resume-with-changes: how long to run and what to log or keep, not
// what is trained (the data, batch, schedule and model stay the checkpoint's).
const std::vector<std::string> kResumableKeys = {
    "train.max_iters", "train.max_seconds", "train.out_dir", "train.log_interval", "train.eval_interval",
    "train.eval_iters", "train.checkpoint_interval", "train.keep_checkpoints", "eval", "sample",
    "description", "expected"};

// ---------------------------------------------------------------------------------------------------
// Hyper-parameters of the `train` section, validated once (every number through get_number_in).
struct TrainParams {
  std::string out_dir, device, dtype, lr_schedule, nan_policy;
  uint64_t seed = 0;
  int64_t batch_size = 0, accum = 0, max_iters = 0, warmup_iters = 0, lr_decay_iters = 0;
  double max_seconds = 0, learning_rate = 0, min_lr = 0, weight_decay = 0, beta1 = 0, beta2 = 0, eps = 0;
  double grad_clip = 0, ema = 0;
  int64_t log_interval = 0, eval_interval = 0, eval_iters = 0, checkpoint_interval = 0, keep_checkpoints = 0;
};

int64_t get_count(const nlohmann::json& c, const std::string& path, double lo, double hi = kHuge) {
  const double v = get_number_in(c, path, lo, hi);
  if (std::floor(v) != v) throw ConfigError("config '" + path + "' must be a whole number, got " + std::to_string(v));
  return int64_t(v);
}

TrainParams parse_train(const nlohmann::json& c) {
  TrainParams p;
  p.out_dir = get_string(c, "train.out_dir");
  if (p.out_dir.empty()) throw ConfigError("config 'train.out_dir' is empty", "set a run directory");
  p.device = get_string(c, "train.device");
  p.dtype = get_string(c, "train.dtype");
  p.seed = uint64_t(get_count(c, "train.seed", 0, 9.0e15));
  p.batch_size = get_count(c, "train.batch_size", 1, 1e7);
  p.accum = get_count(c, "train.gradient_accumulation_steps", 1, 1e6);
  p.max_iters = get_count(c, "train.max_iters", 0);
  p.max_seconds = get_number_in(c, "train.max_seconds", 0, 1e9);
  p.learning_rate = get_number_in(c, "train.learning_rate", 0, 10);
  p.min_lr = get_number_in(c, "train.min_lr", 0, 10);
  p.warmup_iters = get_count(c, "train.warmup_iters", 0);
  p.lr_decay_iters = get_count(c, "train.lr_decay_iters", 0);
  p.lr_schedule = get_string(c, "train.lr_schedule");
  p.weight_decay = get_number_in(c, "train.weight_decay", 0, 10);
  p.beta1 = get_number_in(c, "train.beta1", 0, 0.999999999);
  p.beta2 = get_number_in(c, "train.beta2", 0, 0.999999999);
  p.eps = get_number_in(c, "train.eps", 0, 1);
  p.grad_clip = get_number_in(c, "train.grad_clip", 0, 1e6);
  p.ema = get_number_in(c, "train.ema", 0, 0.999999999);
  p.log_interval = get_count(c, "train.log_interval", 1);
  p.eval_interval = get_count(c, "train.eval_interval", 0);
  p.eval_iters = get_count(c, "train.eval_iters", 0);
  p.checkpoint_interval = get_count(c, "train.checkpoint_interval", 0);
  p.keep_checkpoints = get_count(c, "train.keep_checkpoints", 0, 1e6);
  p.nan_policy = get_string(c, "train.nan_policy");
  if (p.lr_schedule != "cosine" && p.lr_schedule != "constant")
    throw ConfigError("config 'train.lr_schedule' = \"" + p.lr_schedule + "\" is not a schedule",
                      "use \"cosine\" (nanoGPT warmup + cosine) or \"constant\" (warmup then flat, SEDD/RADD)");
  if (p.nan_policy != "stop" && p.nan_policy != "skip")
    throw ConfigError("config 'train.nan_policy' = \"" + p.nan_policy + "\" is not a policy", "use stop or skip");
  if (p.lr_schedule == "cosine" && p.lr_decay_iters < p.warmup_iters)
    throw ConfigError("config 'train.lr_decay_iters' = " + std::to_string(p.lr_decay_iters) +
                          " is below 'train.warmup_iters' = " + std::to_string(p.warmup_iters),
                      "the cosine decay starts after warm-up; raise lr_decay_iters");
  if (p.min_lr > p.learning_rate)
    throw ConfigError("config 'train.min_lr' exceeds 'train.learning_rate'", "min_lr is the floor of the schedule");
  return p;
}

double lr_at(const TrainParams& p, int64_t it) {
  if (p.lr_schedule == "constant") {
    // SEDD/RADD: lr·min(step/warmup, 1) with step counted from 1.
    if (p.warmup_iters > 0 && it < p.warmup_iters) return p.learning_rate * double(it + 1) / double(p.warmup_iters);
    return p.learning_rate;
  }
  // nanoGPT get_lr.
  if (it < p.warmup_iters) return p.learning_rate * double(it + 1) / double(p.warmup_iters + 1);
  if (it > p.lr_decay_iters) return p.min_lr;
  if (p.lr_decay_iters == p.warmup_iters) return p.learning_rate;
  const double ratio = double(it - p.warmup_iters) / double(p.lr_decay_iters - p.warmup_iters);  // in [0, 1]
  const double coeff = 0.5 * (1.0 + std::cos(kPi * ratio));
  return p.min_lr + coeff * (p.learning_rate - p.min_lr);
}

// ---------------------------------------------------------------------------------------------------
// Signals: the first only sets a flag (the loop finishes its step, checkpoints and returns) and says so;
// a second exits at once (the last complete checkpoint stays: checkpoints are written atomically).
volatile std::sig_atomic_t g_signal = 0;
extern "C" void on_signal(int sig) {
  if (g_signal != 0) {
    static const char kNow[] = "\nsecond signal: exiting now (the last checkpoint is kept)\n";
    (void)!::write(STDERR_FILENO, kNow, sizeof kNow - 1);
    ::_exit(128 + sig);
  }
  g_signal = sig;
  static const char kMsg[] = "\nstopping after this step… (again to exit at once)\n";
  (void)!::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
}

struct SignalGuard {
  struct sigaction old_int {}, old_term {};
  SignalGuard() {
    g_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~SignalGuard() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
  }
};

// bf16 autocast for the forward on CUDA (fp32 master weights, no GradScaler: spec-ao-gpt §2.2).
struct AutocastGuard {
  bool on, prev_enabled = false;
  at::ScalarType prev_dtype = at::kFloat;
  explicit AutocastGuard(bool enable) : on(enable) {
    if (!on) return;
    prev_enabled = at::autocast::is_autocast_enabled(at::kCUDA);
    prev_dtype = at::autocast::get_autocast_dtype(at::kCUDA);
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  }
  ~AutocastGuard() {
    if (!on) return;
    at::autocast::set_autocast_enabled(at::kCUDA, prev_enabled);
    at::autocast::set_autocast_dtype(at::kCUDA, prev_dtype);
    at::autocast::clear_cache();
  }
};

// RNG / sampler states travel as hex strings in state.json.
std::string to_hex(const torch::Tensor& bytes) {
  const torch::Tensor b = bytes.to(torch::kCPU).contiguous();
  TORCH_CHECK(b.scalar_type() == torch::kUInt8, "RNG state must be uint8");
  const uint8_t* p = b.data_ptr<uint8_t>();
  std::string out;
  out.reserve(size_t(b.numel()) * 2);
  for (int64_t i = 0; i < b.numel(); ++i) out += "0123456789abcdef"[p[i] >> 4], out += "0123456789abcdef"[p[i] & 15];
  return out;
}

torch::Tensor from_hex(const std::string& hex, const std::string& what) {
  if (hex.size() % 2) throw CheckpointError("checkpoint RNG state '" + what + "' has odd hex length");
  torch::Tensor t = torch::empty({int64_t(hex.size() / 2)}, torch::kUInt8);
  uint8_t* p = t.data_ptr<uint8_t>();
  auto nib = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw CheckpointError("checkpoint RNG state '" + what + "' is not hex");
  };
  for (size_t i = 0; i < hex.size() / 2; ++i) p[i] = uint8_t(nib(hex[2 * i]) << 4 | nib(hex[2 * i + 1]));
  return t;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// First differing leaf between two model sections, as "key: a vs b" ("" when equal).
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& path) {
  if (a.is_object() && b.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      const std::string p = path + "." + it.key();
      if (!b.contains(it.key())) return p + ": " + it.value().dump() + " (checkpoint) vs absent (config)";
      std::string d = first_difference(it.value(), b[it.key()], p);
      if (!d.empty()) return d;
    }
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key())) return path + "." + it.key() + ": absent (checkpoint) vs " + it.value().dump() + " (config)";
    return "";
  }
  if (a != b) return path + ": " + a.dump() + " (checkpoint) vs " + b.dump() + " (config)";
  return "";
}

// Parameter names in the optimizer's order: AdamW::state() keys its moments by them
// ("<name>.exp_avg", "<name>.exp_avg_sq", "<name>.step").
std::vector<std::string> optimizer_names(const AdamW& opt, torch::nn::Module& module) {
  std::map<const void*, std::string> by_impl;
  for (auto& p : module.named_parameters()) by_impl[p.value().unsafeGetTensorImpl()] = p.key();
  std::vector<std::string> out;
  for (const auto& p : opt.params()) {
    auto it = by_impl.find(p.unsafeGetTensorImpl());
    TORCH_CHECK(it != by_impl.end(), "optimizer parameter is not a parameter of the model");
    out.push_back(it->second);
  }
  return out;
}

// Every parameter and buffer, the state rank 0 broadcasts so that all ranks start identical.
std::vector<torch::Tensor> module_tensors(torch::nn::Module& module) {
  std::vector<torch::Tensor> out;
  for (auto& p : module.named_parameters()) out.push_back(p.value());
  for (auto& b : module.named_buffers()) out.push_back(b.value());
  return out;
}

// AOBENCH_DEBUG_DDP=1: an FNV-1a hash of every parameter's bytes, to show that ranks hold identical weights.
std::string parameter_checksum(torch::nn::Module& module) {
  uint64_t h = 1469598103934665603ull;
  double sum = 0;
  for (auto& p : module.named_parameters()) {
    const torch::Tensor t = p.value().detach().to(torch::kCPU).contiguous();
    const auto* b = static_cast<const uint8_t*>(t.data_ptr());
    for (size_t i = 0; i < t.nbytes(); ++i) h = (h ^ b[i]) * 1099511628211ull;
    sum += t.to(torch::kFloat64).sum().item<double>();
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "fnv1a %016llx sum %.17g", static_cast<unsigned long long>(h), sum);
  return buf;
}

// Lowest "loss/val" in metrics.jsonl (kept lines of a resumed run) and its step; (NaN, -1) when none.
std::pair<double, int64_t> best_logged_val(const std::string& metrics_path) {
  std::pair<double, int64_t> best{std::nan(""), -1};
  std::ifstream in(metrics_path);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("loss/val") || !j["loss/val"].is_number() || !j.contains("step") ||
        !j["step"].is_number_integer())
      continue;
    const double v = j["loss/val"].get<double>();
    if (std::isfinite(v) && !(v >= best.first)) best = {v, j["step"].get<int64_t>()};
  }
  return best;
}

}  // namespace

std::string summary_line(const TrainSummary& s) {
  std::ostringstream o;
  o << s.steps << " steps, " << s.tokens << " tokens (" << format_count(double(s.tokens)) << ") in "
    << format_duration(s.wall_s) << "; val loss ";
  if (std::isfinite(s.best_val_loss))
    o << "best " << fmt("%.4f", s.best_val_loss) << " (step " << s.best_val_step << "), final "
      << (std::isfinite(s.final_val_loss) ? fmt("%.4f", s.final_val_loss) : std::string("n/a"));
  else
    o << "n/a";
  o << "; " << format_count(double(s.params)) << " parameters";
  if (s.nan_skips) o << "; " << s.nan_skips << " batches skipped (non-finite)";
  return o.str();
}

double learning_rate_at(const nlohmann::json& train_config, int64_t it) {
  return lr_at(parse_train(nlohmann::json{{"train", train_config}}), it);
}

// ---------------------------------------------------------------------------------------------------
TrainSummary run_training(const nlohmann::json& requested_config, bool resume, bool allow_config_changes) {
  nlohmann::json config = requested_config;   // model section replaced by the plugin's resolved one below
  const TrainParams hp = parse_train(config);
  const DistEnv dist = dist_env_from_environment();
  const bool main_rank = dist.is_main();
  const torch::Device device = rank_device(hp.device, dist);   // cuda:LOCAL_RANK when world > 1
  DataParallel dp(dist, device);                               // inactive (no-op) when world == 1
  const char* debug_env = std::getenv("AOBENCH_DEBUG_DDP");
  const bool debug_ddp = debug_env && std::string(debug_env) == "1";
  const bool bf16 = use_bf16_autocast(hp.dtype, device);

  // Model. The global torch generator (weight init, dropout) is seeded per rank, as nanoGPT does.
  torch::manual_seed(hp.seed + uint64_t(dist.rank));
  const std::string plugin_name = get_string(config, "model.plugin");
  const std::string flavour = get_string(config, "model.flavour");
  std::unique_ptr<ModelPlugin> model = PluginRegistry::instance().create(plugin_name);
  model->configure(config.at("model"));
  config["model"] = model->resolved_model_config(config.at("model"));   // e.g. the shape of init_from_hf
  try {
    model->build(device);
  } catch (const c10::Error& e) {   // e.g. model.block_size=1e9: the allocator's message names no key
    std::string what = e.what_without_backtrace();
    what = what.substr(0, what.find('\n'));
    std::string sizes;
    for (auto it = config.at("model").begin(); it != config.at("model").end(); ++it)
      if (it.value().is_number_integer()) sizes += (sizes.empty() ? "" : ", ") + it.key() + "=" + it.value().dump();
    throw ConfigError("cannot build model " + plugin_name + "/" + flavour + " on " + device.str() + " (" + sizes +
                          "): " + what,
                      "the model does not fit in memory; lower model.block_size, n_embd, n_layer or vocab_size");
  }
  torch::nn::Module& net = model->module();
  dp.broadcast_from_main(module_tensors(net));   // ranks were initialised with different seeds
  const PluginInfo info = model->info();
  const int64_t T = model->block_size(), B = hp.batch_size;

  // Data: windows of T tokens; the model's vocabulary must cover the file's.
  const std::string train_path = get_string(config, "data.train"), val_path = get_string(config, "data.val");
  if (train_path.empty())
    throw ConfigError("config 'data.train' is empty", "set it to a token file made by `aobench prepare`");
  auto open_checked = [&](const std::string& path, const std::string& key) {
    auto f = std::make_shared<TokenFile>(path);
    if (f->header().vocab_size > model->vocab_size())
      throw ConfigError(key + " '" + path + "' has vocab_size " + std::to_string(f->header().vocab_size) +
                            " but model." + "vocab_size of " + plugin_name + "/" + flavour + " is " +
                            std::to_string(model->vocab_size()),
                        "use a model whose vocabulary covers the tokenizer, or re-tokenize the data");
    if (f->size() < T + 1)
      throw DataError(key + " '" + path + "' has " + std::to_string(f->size()) + " tokens, fewer than one window of " +
                          std::to_string(T),
                      "use more data or a smaller model.block_size");
    // Every id below the vocabulary, or training dies mid-run inside the embedding naming neither file nor id.
    check_token_ids(*f, model->vocab_size(), "model " + plugin_name + "/" + flavour + " (" + key + ")");
    return f;
  };
  auto train_file = open_checked(train_path, "data.train");
  std::shared_ptr<TokenFile> val_file = val_path.empty() ? nullptr : open_checked(val_path, "data.val");
  BatchSampler sampler(train_file, T, hp.seed, dist.rank, dist.world);
  // One CPU generator for orders and the plugin's noise; the sampler owns the data generator.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(hp.seed + uint64_t(dist.rank));
  const bool decoder = info.paradigm != Paradigm::kMaskedDiffusionEncoder;
  const OrderSpec order_spec = OrderSpec::from_json(config.at("train").at("order"), "train.order");

  // Optimizer: AdamW with decay / no-decay groups, one fused multi-tensor update per group (harness/optim.h).
  std::vector<AdamWGroup> groups;
  for (auto& g : model->param_groups())
    if (!g.params.empty()) groups.push_back({g.params, g.decay ? hp.weight_decay : 0.0});
  AdamW optimizer(std::move(groups), hp.beta1, hp.beta2, hp.eps);
  const std::vector<torch::Tensor>& params = optimizer.params();
  const std::vector<std::string> param_names = optimizer_names(optimizer, net);
  std::unique_ptr<Ema> ema = hp.ema > 0 ? std::make_unique<Ema>(net, hp.ema) : nullptr;

  RunDir run(hp.out_dir);
  std::unique_ptr<DirLock> lock;   // one writer per run directory; rank 0 writes for all ranks
  if (main_rank) lock = std::make_unique<DirLock>(run.path() + "/.lock", "aobench train", /*wait=*/false);
  int64_t step = 0, tokens_seen = 0, nan_skips = 0;
  double time_offset = 0;   // wall seconds of earlier (resumed) segments
  if (resume) {
    auto ckpt = latest_checkpoint(run.path());
    if (!ckpt)
      throw CheckpointError("--resume: no checkpoint in '" + run.path() + "/checkpoints'",
                            "start without --resume, or point train.out_dir at an earlier run");
    CheckpointData data = load_checkpoint(*ckpt);
    const auto& st = data.state;
    if (st.value("plugin", "") != plugin_name || st.value("flavour", "") != flavour)
      throw CheckpointError("checkpoint '" + *ckpt + "' is " + st.value("plugin", "?") + "/" + st.value("flavour", "?") +
                                " but the config asks for " + plugin_name + "/" + flavour,
                            "resume with the config the run was started with, or use a fresh train.out_dir");
    // Another config would silently continue a different run: only run-length and bookkeeping keys may change.
    // Keys added to the defaults since the checkpoint was written count at their default value.
    nlohmann::json then = base_config();
    then["model"] = flavour_defaults(plugin_name, flavour);
    then.merge_patch(st.at("config"));
    const auto changed = config_differences(then, config, kResumableKeys, "checkpoint", "config");
    if (!changed.empty() && !allow_config_changes) {
      std::string list;
      for (const auto& c : changed) list += "\n  " + c;
      throw CheckpointError("checkpoint '" + *ckpt + "' was trained with another config:" + list,
                            "resume with the run's own config (aobench train --config " + run.path() +
                                "/config.resolved.json --resume), or pass --resume-with-changes to continue "
                                "with these changes");
    }
    const std::string diff = first_difference(st.at("config").at("model"), config.at("model"), "model");
    if (!diff.empty() && !allow_config_changes)
      throw CheckpointError("checkpoint '" + *ckpt + "' has a different model config: " + diff,
                            "resume with the model config the run was started with");
    load_module_state(net, data.model, *ckpt + "/model.safetensors");
    optimizer.load_state(param_names, data.optimizer, *ckpt + "/optim.safetensors");
    if (ema) {
      if (data.ema.empty())
        throw CheckpointError("checkpoint '" + *ckpt + "' has no EMA weights but train.ema = " + std::to_string(hp.ema),
                              "resume with train.ema=0, as the run was started");
      ema->load_state(data.ema, st.at("ema_updates").get<int64_t>(), *ckpt + "/ema.safetensors");
    }
    step = st.at("step").get<int64_t>();
    tokens_seen = st.at("tokens").get<int64_t>();
    nan_skips = st.value("nan_skips", int64_t(0));
    time_offset = st.value("time_s", 0.0);
    // Multi-rank checkpoints hold every rank's RNG streams in "rng_ranks"; "rng" is rank 0's.
    const bool per_rank = st.contains("rng_ranks") && st.at("rng_ranks").size() == size_t(dist.world);
    if (dp.active() && !per_rank && main_rank)
      std::cout << "note: checkpoint has no RNG state for " << dist.world
                << " ranks; ranks > 0 draw fresh streams\n";
    const auto& rng = per_rank ? st.at("rng_ranks").at(size_t(dist.rank)) : st.at("rng");
    if (per_rank || main_rank) {
      sampler.set_state(from_hex(rng.at("data").get<std::string>(), "data"));
      gen.set_state(from_hex(rng.at("order").get<std::string>(), "order"));
      at::Generator cpu_default = at::detail::getDefaultCPUGenerator();   // shares the global generator state
      cpu_default.set_state(from_hex(rng.at("torch_cpu").get<std::string>(), "torch_cpu"));
      if (device.is_cuda() && rng.contains("cuda")) {
        at::Generator cuda_default = at::globalContext().defaultGenerator(device);
        cuda_default.set_state(from_hex(rng.at("cuda").get<std::string>(), "cuda"));
      }
    }
    dp.broadcast_from_main(module_tensors(net));
    if (st.contains("extra_state")) model->load_extra_state(st["extra_state"]);
    if (step >= hp.max_iters) {   // nothing to train: the checkpoint, config and metrics stay as they are
      if (main_rank)
        std::cout << "checkpoint " << *ckpt << " is at step " << step << ", train.max_iters = " << hp.max_iters
                  << ": nothing to train, nothing written\n";
      TrainSummary done;
      done.run_dir = run.path();
      done.steps = step;
      done.final_val_loss = std::nan("");
      return done;
    }
    if (main_rank) run.truncate_metrics_after(step);
    if (main_rank) std::cout << "resumed from " << *ckpt << " at step " << step << "\n";
  } else if (main_rank) {
    if (latest_checkpoint(run.path()))
      throw ConfigError("train.out_dir '" + run.path() + "' already holds checkpoints",
                        "pass --resume to continue that run, or choose another train.out_dir");
    run.truncate_metrics_after(-1);
  }
  if (main_rank) {
    run.write_config(config);
    std::cout << config_summary(config, run.path() + "/config.resolved.json");
    std::cout << "model " << plugin_name << "/" << flavour << " (" << to_string(info.paradigm) << ") on "
              << device_name(device) << (bf16 ? " bf16 autocast" : " fp32") << "; run dir " << run.path() << "\n";
    if (dp.active())
      std::cout << "data parallel: " << dist.world << " ranks (c10d NCCL), " << B * T * hp.accum
                << " tokens per rank per step\n";
  }

  const double peak = peak_bf16_flops(device_name(device));
  const double flops_tok = model->flops_per_token(T);
  const bool tty = main_rank && ::isatty(STDOUT_FILENO);
  bool progress_shown = false;

  auto draw_batch = [&](BatchSampler& s, at::Generator& g) {
    TrainBatch batch;
    // Pinned host copy: the upload queues behind the running step instead of waiting for it.
    batch.tokens = device.is_cuda() ? s.next(B).pin_memory().to(device, /*non_blocking=*/true)
                                    : s.next(B);                        // (B, T)
    if (decoder) batch.order = order_spec.draw(B, T, g, device);         // (B, T)
    return batch;
  };

  // Validation loss on fixed batches (fixed-seed sampler and order generator), EMA weights when present.
  auto evaluate = [&]() -> double {
    if (!val_file || hp.eval_iters == 0) return std::nan("");
    torch::NoGradGuard no_grad;
    net.eval();
    if (ema) ema->swap_in();
    BatchSampler vs(val_file, T, kEvalSeed, dist.rank, dist.world);
    at::Generator vg = at::make_generator<at::CPUGeneratorImpl>(kEvalSeed);
    double sum = 0;
    for (int64_t i = 0; i < hp.eval_iters; ++i) {
      TrainBatch batch = draw_batch(vs, vg);
      AutocastGuard ac(bf16);
      sum += model->loss(batch, vg).loss.item<double>();
    }
    if (ema) ema->swap_out();
    net.train();
    const double local = sum / double(hp.eval_iters);
    return dp.active() ? dp.average({local})[0] : local;   // each rank scored its own shard
  };

  auto checkpoint = [&](double elapsed) -> std::string {   // collective when data parallel
    nlohmann::json rng = {{"data", to_hex(sampler.get_state())},
                          {"order", to_hex(gen.get_state())},
                          {"torch_cpu", to_hex(at::detail::getDefaultCPUGenerator().get_state())}};
    if (device.is_cuda()) rng["cuda"] = to_hex(at::globalContext().defaultGenerator(device).get_state());
    const std::vector<std::string> rank_rngs =
        dp.active() ? dp.gather_to_main(rng.dump()) : std::vector<std::string>{};
    if (!main_rank) return "";
    CheckpointData data;
    data.model = module_state(net);
    if (ema) data.ema = ema->state();
    data.optimizer = optimizer.state(param_names);
    data.state = {{"plugin", plugin_name}, {"flavour", flavour}, {"plugin_version", info.version},
                  {"tokens", tokens_seen}, {"time_s", elapsed}, {"nan_skips", nan_skips},
                  {"ema_updates", ema ? ema->num_updates() : 0}, {"ema_decay", hp.ema}, {"rng", rng},
                  {"extra_state", model->extra_state()}, {"config", config}};
    if (dp.active()) {
      data.state["world_size"] = dist.world;
      for (const auto& r : rank_rngs) data.state["rng_ranks"].push_back(nlohmann::json::parse(r));
    }
    const std::string dir = save_checkpoint(run.path(), step, std::move(data), hp.keep_checkpoints);
    record_training_run(run.path(), config, *model, step, tokens_seen, flops_tok);   // results.json: the run's record
    return dir;
  };

  TrainSummary summary;
  summary.run_dir = run.path();
  summary.final_val_loss = std::nan("");
  if (resume && main_rank)   // earlier segments' validation losses count for "best"
    std::tie(summary.best_val_loss, summary.best_val_step) = best_logged_val(run.metrics_path());
  auto record_val = [&](double v) {   // final and best validation loss for the summary line
    summary.final_val_loss = v;
    if (std::isfinite(v) && !(v >= summary.best_val_loss)) {   // best is NaN before the first
      summary.best_val_loss = v;
      summary.best_val_step = step;
    }
  };
  SignalGuard signals;
  net.train();
  reset_peak_memory(device);
  const auto t_start = Clock::now();
  auto t_log = t_start;
  int64_t tokens_at_log = tokens_seen, last_ckpt_step = -1, last_eval_step = -1;
  const int64_t tokens_per_step = B * T * hp.accum * dist.world;
  const int64_t start_step = step;
  bool stop_signal = false;   // agreed over ranks: every rank leaves the loop at the same step
  auto elapsed_s = [&] { return std::chrono::duration<double>(Clock::now() - t_start).count(); };

  while (step < hp.max_iters) {
    const double lr = lr_at(hp, step);
    optimizer.zero_grad();

    torch::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
    std::map<std::string, double> extra;
    for (int64_t micro = 0; micro < hp.accum; ++micro) {
      TrainBatch batch = draw_batch(sampler, gen);
      LossOutput out;
      {
        AutocastGuard ac(bf16);
        out = model->loss(batch, gen);
      }
      (out.loss / double(hp.accum)).backward();   // mean over micro-batches (spec-ao-gpt §2.2)
      loss_sum += out.loss.detach().to(torch::kFloat64) / double(hp.accum);
      for (const auto& [k, v] : out.metrics) extra[k] += v / double(hp.accum);
    }
    // Single-process steps queue loss, norm and update without waiting for the device; the one host read
    // per step comes after the update is queued (below).
    double loss = std::nan("");
    if (dp.active()) {
      loss = loss_sum.item<double>();
      // Mean gradient over ranks (one all-reduce per optimizer step, none per micro-step); the logged
      // loss and metrics are rank means, so every rank takes the same finite / non-finite decision.
      dp.average_gradients(params);
      std::vector<double> scalars{loss};
      for (const auto& kv : extra) scalars.push_back(kv.second);
      scalars = dp.average(scalars);
      if (debug_ddp && step == start_step)
        std::cout << "ddp-debug rank " << dist.rank << " step " << step + 1 << ": local loss "
                  << fmt("%.6f", loss) << ", mean over ranks " << fmt("%.6f", scalars[0]) << "\n" << std::flush;
      loss = scalars[0];
      size_t i = 1;
      for (auto& kv : extra) kv.second = scalars[i++];
      loss_sum.fill_(loss);   // the rank mean decides the skip on every rank alike
    }
    // Global-norm clipping (the logged norm is the pre-clip one; grad_clip 0 = measure only) and the AdamW
    // update, skipped on the device when the loss or the norm is not finite (no update made).
    const torch::Tensor stats = torch::stack({loss_sum, optimizer.grad_norm().to(torch::kFloat64)});   // (2)
    optimizer.step(lr, hp.grad_clip, stats[1], stats.isfinite().all().logical_not().to(torch::kFloat32));
    const torch::Tensor stats_host = stats.to(torch::kCPU);
    loss = stats_host[0].item<double>();
    const double grad_norm = stats_host[1].item<double>();

    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
      optimizer.undo_step_count();
      std::string culprit = "loss";
      if (std::isfinite(loss)) {
        culprit = "gradient norm";
        for (auto& p : net.named_parameters())
          if (p.value().grad().defined() && !torch::isfinite(p.value().grad()).all().item<bool>()) {
            culprit = "gradient of parameter '" + p.key() + "'";
            break;
          }
      }
      if (hp.nan_policy == "stop") {
        if (tty && progress_shown) std::cout << "\r\033[K" << std::flush;
        throw TrainingError("non-finite " + culprit + " at step " + std::to_string(step) + " (loss " +
                                fmt("%g", loss) + ", grad_norm " + fmt("%g", grad_norm) + "); no update made",
                            "the last good checkpoint is in " + run.path() +
                                "/checkpoints; lower train.learning_rate or set train.nan_policy=skip");
      }
      ++nan_skips;
      optimizer.zero_grad();
      if (main_rank)
        std::cout << (tty && progress_shown ? "\r\033[K" : "") << "step " << step << ": non-finite " << culprit
                  << ", batch skipped (" << nan_skips << " so far)\n";
      progress_shown = false;
    } else if (ema) {
      ema->update();
    }
    ++step;
    tokens_seen += tokens_per_step;
    summary.final_train_loss = loss;

    if (main_rank && (step % hp.log_interval == 0 || step == hp.max_iters)) {
      // tokens_seen counts all ranks (world × per-rank), so tok_s is the summed throughput.
      const double dt = std::chrono::duration<double>(Clock::now() - t_log).count();
      const double tok_s = dt > 0 ? double(tokens_seen - tokens_at_log) / dt : 0.0;
      const double mfu = peak > 0 ? flops_tok * tok_s / (peak * dist.world) : std::nan("");
      const double mem = max_memory_gib(device);
      std::ostringstream line;
      line << "step " << step << "/" << hp.max_iters << " | loss " << fmt("%.4f", loss) << " | lr "
           << fmt("%.2e", lr) << " | grad_norm " << fmt("%.2f", grad_norm) << " | " << format_count(tok_s)
           << " tok/s | mfu " << (std::isfinite(mfu) ? fmt("%.1f%%", 100 * mfu) : std::string("n/a")) << " | mem "
           << fmt("%.1f GiB", mem);
      if (nan_skips) line << " | skipped " << nan_skips;
      std::cout << (tty && progress_shown ? "\r\033[K" : "") << line.str() << "\n" << std::flush;
      progress_shown = false;
      nlohmann::json m = {{"step", step}, {"loss/train", loss}, {"lr", lr}, {"grad_norm", grad_norm},
                          {"throughput/tok_s", tok_s}, {"mfu", std::isfinite(mfu) ? nlohmann::json(mfu) : nullptr},
                          {device.is_cuda() ? "memory/max_allocated_gib" : "memory/max_rss_gib", mem},
                          {"tokens", tokens_seen}, {"time_s", time_offset + elapsed_s()}, {"nan_skips", nan_skips}};
      for (const auto& [k, v] : extra) m["train/" + k] = v;
      run.append_metrics(m);
      t_log = Clock::now();
      tokens_at_log = tokens_seen;
    } else if (tty) {
      const double frac = double(step) / double(hp.max_iters);
      const double eta = elapsed_s() / double(std::max<int64_t>(1, step - start_step)) * double(hp.max_iters - step);
      std::cout << "\r  step " << step << "/" << hp.max_iters << " [" << fmt("%5.1f%%", 100 * frac) << "] loss "
                << fmt("%.4f", loss) << " ETA " << format_duration(eta) << "\033[K" << std::flush;
      progress_shown = true;
    }

    if (hp.eval_interval > 0 && step % hp.eval_interval == 0 && val_file) {
      record_val(evaluate());
      last_eval_step = step;
      if (main_rank && std::isfinite(summary.final_val_loss)) {
        std::cout << (tty && progress_shown ? "\r\033[K" : "") << "step " << step << " | val loss "
                  << fmt("%.4f", summary.final_val_loss) << (ema ? " (EMA weights)" : "") << "\n";
        progress_shown = false;
        run.append_metrics({{"step", step}, {"loss/val", summary.final_val_loss}});
      }
    }
    if (hp.checkpoint_interval > 0 && step % hp.checkpoint_interval == 0) {
      checkpoint(time_offset + elapsed_s());
      last_ckpt_step = step;
    }
    stop_signal = g_signal != 0;
    bool stop_time = hp.max_seconds > 0 && elapsed_s() >= hp.max_seconds;
    if (dp.active()) {
      const std::vector<double> any = dp.average({stop_signal ? 1.0 : 0.0, stop_time ? 1.0 : 0.0});
      stop_signal = any[0] > 0, stop_time = any[1] > 0;
    }
    if (stop_signal) break;
    if (stop_time) {
      if (main_rank)
        std::cout << (tty && progress_shown ? "\r\033[K" : "") << "train.max_seconds = " << hp.max_seconds
                  << " reached at step " << step << "\n";
      progress_shown = false;
      break;
    }
  }
  if (tty && progress_shown) std::cout << "\r\033[K" << std::flush;

  const bool interrupted = dp.active() ? stop_signal : g_signal != 0;
  if (!interrupted && val_file && hp.eval_interval > 0 && last_eval_step != step && step > 0) {
    record_val(evaluate());
    if (main_rank && std::isfinite(summary.final_val_loss)) {
      std::cout << "step " << step << " | val loss " << fmt("%.4f", summary.final_val_loss) << "\n";
      run.append_metrics({{"step", step}, {"loss/val", summary.final_val_loss}});
    }
  }
  std::string ckpt_dir = run.path() + "/checkpoints/step_" + std::to_string(step);
  if (last_ckpt_step != step) ckpt_dir = checkpoint(time_offset + elapsed_s());
  summary.steps = step;
  summary.nan_skips = nan_skips;
  summary.tokens = tokens_seen;
  summary.wall_s = time_offset + elapsed_s();
  for (const auto& p : net.parameters()) summary.params += p.numel();
  if (interrupted) {
    summary.interrupted = true;
    summary.signal = g_signal != 0 ? int(g_signal) : SIGTERM;   // a peer rank was signalled
    if (main_rank)
      std::cout << "interrupted at step " << step << "; checkpoint written to " << ckpt_dir
                << "; resume with: aobench train --config " << run.path() << "/config.resolved.json --resume\n";
  } else if (main_rank) {
    std::cout << "done: " << summary_line(summary) << "; checkpoint " << ckpt_dir << "\n";
  }
  if (debug_ddp)
    std::cout << "ddp-debug rank " << dist.rank << "/" << dist.world << " final parameters: "
              << parameter_checksum(net) << "\n" << std::flush;
  dp.barrier();   // no rank exits (tearing down NCCL) while a peer is still in a collective
  return summary;
}

}  // namespace aobench
