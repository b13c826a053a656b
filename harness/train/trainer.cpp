// Implements: the training loop (see trainer.h; DESIGN.md §3; spec-ao-gpt §2.2–2.3; spec-sedd-radd §2.6).
// One readable nanoGPT-style loop: sample → (order) → loss/accum → backward, clip, AdamW step, EMA update,
// then logging, validation (EMA weights), checkpoints. Exact resume restores every RNG the loop draws from.
// Data parallel (DESIGN.md §6, torchrun + c10d NCCL): ranks start from rank 0's weights, gradients are
// averaged once per optimizer step, logged/validation losses averaged; world = 1 runs the single-process loop.
#include "harness/train/trainer.h"

#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "core/config.h"
#include "core/config_types.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/progress.h"
#include "core/scoped_signals.h"
#include "datasets/token_file.h"
#include "harness/registry.h"
#include "harness/resolve_config.h"
#include "harness/run_dir.h"
#include "harness/run_record.h"
#include "harness/train/checkpoint.h"
#include "harness/train/distributed.h"
#include "harness/train/ema.h"
#include "harness/train/graph.h"
#include "harness/train/logger.h"
#include "harness/train/lr_schedule.h"
#include "harness/train/optim.h"
#include "harness/train/step_runner.h"
#include "metrics/unigram.h"

namespace aobench {
namespace {

constexpr uint64_t kEvalSeed = 1234;  // validation batches and orders are the same at every evaluation
// Keys a --resume may change without --resume-with-changes: how long to run and what to log or keep, not
// what is trained (the data, batch, schedule and model stay the checkpoint's).
const std::vector<std::string> kResumableKeys = {"perf",
                                                 "train.max_iters",
                                                 "train.max_seconds",
                                                 "train.out_dir",
                                                 "train.log_interval",
                                                 "train.eval_interval",
                                                 "train.eval_iters",
                                                 "train.checkpoint_interval",
                                                 "train.keep_checkpoints",
                                                 "train.ddp_bucket_mb",
                                                 "eval",
                                                 "sample",
                                                 "description",
                                                 "expected"};

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
      if (!a.contains(it.key()))
        return path + "." + it.key() + ": absent (checkpoint) vs " + it.value().dump() + " (config)";
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

// True when metrics.jsonl has a line with `key` (a resumed run keeps its step-0 lines).
bool metrics_have_key(const std::string& metrics_path, const std::string& key) {
  std::ifstream in(metrics_path);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains(key)) return true;
  }
  return false;
}

// A validation loss: the mean over every rank's evaluation batches and its standard error over them.
struct ValLoss {
  double mean = std::nan("");
  double standard_error = std::nan("");  // unbiased sd / √n over the n batch losses; NaN when n < 2
};

// A training run: the constructor sets up model, data, optimizer and run directory from a resolved config
// (and, with resume, the newest checkpoint); run() is the loop.
class Trainer {
 public:
  Trainer(const nlohmann::json& requested_config, bool resume, bool allow_config_changes);
  TrainSummary run();

 private:
  void build_model();
  void open_data();
  void build_optimizer();
  void resume_from_checkpoint(bool allow_config_changes);
  void apply_nan_policy(const StepStats& s, TrainLogger& log);
  void log_unigram_level();
  ValLoss validate();
  std::string checkpoint(double elapsed);
  bool stop_requested(TrainLogger& log);
  torch::nn::Module& net() { return model_->module(); }

  nlohmann::json config_;  // model section replaced by the plugin's resolved one
  const DistEnv dist_;     // before hp_: the accumulation steps depend on the world size
  const TrainConfig hp_;
  const DataConfig data_;
  const bool main_rank_;
  const torch::Device device_;  // cuda:LOCAL_RANK when world > 1
  DataParallel dp_;             // inactive (no-op) when world == 1
  const bool debug_ddp_, bf16_, resume_;
  std::string plugin_name_, flavour_;
  std::unique_ptr<ModelPlugin> model_;
  PluginInfo info_;
  int64_t T_ = 0, B_ = 0;
  bool decoder_ = true;
  std::shared_ptr<TokenFile> train_file_, val_file_;
  std::unique_ptr<BatchSampler> sampler_;
  at::Generator gen_;  // one CPU generator for orders and the plugin's noise; the sampler owns the data one
  std::unique_ptr<AdamW> optimizer_;
  std::vector<std::string> param_names_;
  std::unique_ptr<Ema> ema_;
  std::optional<StepContext> step_context_;  // what the steps work with
  std::unique_ptr<StepRunner> step_runner_;  // eager, data parallel or captured (step_runner.h)
  std::unique_ptr<RunDir> run_;
  std::unique_ptr<DirLock> lock_;  // one writer per run directory; rank 0 writes for all ranks
  int64_t step_ = 0, tokens_seen_ = 0, nan_skips_ = 0, start_step_ = 0;
  double time_offset_ = 0;         // wall seconds of earlier (resumed) segments
  bool nothing_to_train_ = false;  // resumed at train.max_iters
  bool stop_signal_ = false;       // agreed over ranks: every rank leaves the loop at the same step
};

// The run's hyper-parameters with the per-rank accumulation `world` ranks need for train.global_batch_size.
TrainConfig for_world(TrainConfig hp, int world) {
  hp.gradient_accumulation_steps = hp.accumulation_steps(world);
  return hp;
}

Trainer::Trainer(const nlohmann::json& requested_config, bool resume, bool allow_config_changes)
    : config_(requested_config),
      dist_(dist_env_from_environment()),
      hp_(for_world(TrainConfig::from_json(config_), dist_.world)),
      data_(DataConfig::from_json(config_)),
      main_rank_(dist_.is_main()),
      device_(rank_device(hp_.device, dist_)),
      dp_(dist_, device_, int64_t(hp_.ddp_bucket_mb * (1 << 20))),
      debug_ddp_(std::getenv("AOBENCH_DEBUG_DDP") && std::string(std::getenv("AOBENCH_DEBUG_DDP")) == "1"),
      bf16_(use_bf16_autocast(hp_.dtype, device_)),
      resume_(resume),
      gen_(at::make_generator<at::CPUGeneratorImpl>(hp_.seed + uint64_t(dist_.rank))) {
  PerfConfig::from_json(config_).apply();  // the speed switches of this run, before its model is built
  build_model();
  open_data();
  build_optimizer();
  run_ = std::make_unique<RunDir>(hp_.out_dir);
  if (main_rank_) lock_ = std::make_unique<DirLock>(run_->path() + "/.lock", "aobench train", /*wait=*/false);
  if (resume) {
    resume_from_checkpoint(allow_config_changes);
    if (nothing_to_train_) return;
  } else if (main_rank_) {
    if (latest_checkpoint(run_->path()))
      throw ConfigError("train.out_dir '" + run_->path() + "' already holds checkpoints",
                        "pass --resume to continue that run, or choose another train.out_dir");
    run_->truncate_metrics_after(-1);
  }
  if (main_rank_) {
    run_->write_config(config_);
    std::cout << config_summary(config_, run_->path() + "/config.resolved.json");
    std::cout << "model " << plugin_name_ << "/" << flavour_ << " (" << to_string(info_.paradigm) << ") on "
              << device_name(device_) << (bf16_ ? " bf16 autocast" : " fp32") << (mps_enabled(device_) ? " (MPS)" : "")
              << "; run dir " << run_->path() << "\n";
    if (dp_.active())
      std::cout << "data parallel: " << dist_.world << " ranks (c10d NCCL), " << hp_.gradient_accumulation_steps
                << " × " << B_ << " × " << T_ << " tokens per rank per step\n";
    log_unigram_level();
  }
}

// The model. The global torch generator (weight init, dropout) is seeded per rank, as nanoGPT does; rank 0's
// weights are then broadcast.
void Trainer::build_model() {
  torch::manual_seed(hp_.seed + uint64_t(dist_.rank));
  plugin_name_ = get_string(config_, "model.plugin");
  flavour_ = get_string(config_, "model.flavour");
  model_ = PluginRegistry::instance().create(plugin_name_);
  model_->configure(config_.at("model"));
  config_["model"] = model_->resolved_model_config(config_.at("model"));  // e.g. the shape of init_from_hf
  try {
    model_->build(device_);
  } catch (const c10::Error& e) {  // e.g. model.block_size=1e9: the allocator's message names no key
    std::string what = e.what_without_backtrace();
    what = what.substr(0, what.find('\n'));
    std::string sizes;
    for (auto it = config_.at("model").begin(); it != config_.at("model").end(); ++it)
      if (it.value().is_number_integer()) sizes += (sizes.empty() ? "" : ", ") + it.key() + "=" + it.value().dump();
    throw ConfigError(
        "cannot build model " + plugin_name_ + "/" + flavour_ + " on " + device_.str() + " (" + sizes + "): " + what,
        "the model does not fit in memory; lower model.block_size, n_embd, n_layer or vocab_size");
  }
  dp_.broadcast_from_main(module_tensors(net()));  // ranks were initialised with different seeds
  info_ = model_->info();
  T_ = model_->block_size();
  B_ = hp_.batch_size;
  decoder_ = info_.paradigm != Paradigm::kMaskedDiffusionEncoder;
}

// Data: windows of T tokens; the model's vocabulary must cover the file's.
void Trainer::open_data() {
  if (data_.train.empty())
    throw ConfigError("config 'data.train' is empty", "set it to a token file made by `aobench prepare`");
  auto open_checked = [&](const std::string& path, const std::string& key) {
    auto f = std::make_shared<TokenFile>(path);
    if (f->header().vocab_size > model_->vocab_size())
      throw ConfigError(key + " '" + path + "' has vocab_size " + std::to_string(f->header().vocab_size) +
                            " but model." + "vocab_size of " + plugin_name_ + "/" + flavour_ + " is " +
                            std::to_string(model_->vocab_size()),
                        "use a model whose vocabulary covers the tokenizer, or re-tokenize the data");
    if (f->size() < T_ + 1)
      throw DataError(key + " '" + path + "' has " + std::to_string(f->size()) + " tokens, fewer than one window of " +
                          std::to_string(T_),
                      "use more data or a smaller model.block_size");
    check_tokenizer(*f, data_.tokenizer, "config 'data.tokenizer'");
    // Every id below the vocabulary, or training dies mid-run inside the embedding naming neither file nor id.
    check_token_ids(*f, model_->vocab_size(), "model " + plugin_name_ + "/" + flavour_ + " (" + key + ")");
    return f;
  };
  train_file_ = open_checked(data_.train, "data.train");
  val_file_ = data_.val.empty() ? nullptr : open_checked(data_.val, "data.val");
  // data.seed ≥ 0 decouples the batches from train.seed (init, orders); -1 keeps the runs made before it.
  const uint64_t data_seed = data_.seed >= 0 ? uint64_t(data_.seed) : hp_.seed;
  sampler_ = std::make_unique<BatchSampler>(train_file_, T_, data_seed, dist_.rank, dist_.world);
}

// The loss of a model that knows token frequencies and no context (metrics/unigram.h: add-one unigram of at most
// the first 2^28 tokens of data.train, every token of the whole T-token windows of data.val, or of data.train
// without one, scored): the plateau an any-order model sits at first. Main rank, before step 1; printed at every
// start, written once per run as the metrics line {"step": 0, "unigram/nats": X}.
void Trainer::log_unigram_level() {
  const UnigramLevel u = unigram_level(*train_file_, val_file_ ? *val_file_ : *train_file_, T_, model_->vocab_size());
  std::cout << "unigram level: " << format_number("%.3f", u.nats) << " nats/token (add-one unigram of data.train"
            << " scored on " << (val_file_ ? "data.val" : "data.train") << "; " << u.train_tokens_counted
            << " tokens counted, " << u.val_tokens_scored << " scored, at most 2^28 of each file)\n";
  if (std::isfinite(u.nats) && !metrics_have_key(run_->metrics_path(), "unigram/nats"))
    run_->append_metrics({{"step", 0}, {"unigram/nats", u.nats}});
}

// AdamW with decay / no-decay groups, one fused multi-tensor update per group (harness/train/optim.h); EMA weights.
void Trainer::build_optimizer() {
  std::vector<AdamWGroup> groups;
  for (auto& g : model_->param_groups())
    if (!g.params.empty()) groups.push_back({g.params, g.decay ? hp_.weight_decay : 0.0});
  optimizer_ = std::make_unique<AdamW>(std::move(groups), hp_.beta1, hp_.beta2, hp_.eps);
  param_names_ = optimizer_names(*optimizer_, net());
  if (hp_.ema > 0) ema_ = std::make_unique<Ema>(net(), hp_.ema);
  step_context_.emplace(StepContext{*model_, *optimizer_, dp_, *sampler_, gen_, hp_, device_, bf16_, B_, T_, decoder_,
                                    info_.capabilities.any_order, dist_.rank, debug_ddp_});
  step_runner_ = make_step_runner(*step_context_, info_.speed.capturable_loss);
}

// Weights, optimizer moments, EMA, counters and every RNG stream from the newest checkpoint of the run.
void Trainer::resume_from_checkpoint(bool allow_config_changes) {
  auto ckpt = latest_checkpoint(run_->path());
  if (!ckpt)
    throw CheckpointError("--resume: no checkpoint in '" + run_->path() + "/checkpoints'",
                          "start without --resume, or point train.out_dir at an earlier run");
  CheckpointData data = load_checkpoint(*ckpt);
  const auto& st = data.state;
  if (st.contains("imported_from"))  // aobench import writes weights only: no optimizer moments, no RNG streams
    throw CheckpointError("checkpoint '" + *ckpt +
                              "' was written by `aobench import`: it holds the authors' weights "
                              "but no training state (optimizer moments, RNG streams) to resume from",
                          "evaluate or sample it; training on from an imported checkpoint is not supported");
  if (st.value("plugin", "") != plugin_name_ || st.value("flavour", "") != flavour_)
    throw CheckpointError("checkpoint '" + *ckpt + "' is " + st.value("plugin", "?") + "/" + st.value("flavour", "?") +
                              " but the config asks for " + plugin_name_ + "/" + flavour_,
                          "resume with the config the run was started with, or use a fresh train.out_dir");
  // Another config would silently continue a different run: only run-length and bookkeeping keys may change.
  // Keys added to the defaults since the checkpoint was written count at their default value.
  nlohmann::json then = base_config();
  then["model"] = flavour_defaults(plugin_name_, flavour_);
  then.merge_patch(st.at("config"));
  const auto changed = config_differences(then, config_, kResumableKeys, "checkpoint", "config");
  if (!changed.empty() && !allow_config_changes) {
    std::string list;
    for (const auto& c : changed) list += "\n  " + c;
    throw CheckpointError("checkpoint '" + *ckpt + "' was trained with another config:" + list,
                          "resume with the run's own config (aobench train --config " + run_->path() +
                              "/config.resolved.json --resume), or pass --resume-with-changes to continue "
                              "with these changes");
  }
  const std::string diff = first_difference(st.at("config").at("model"), config_.at("model"), "model");
  if (!diff.empty() && !allow_config_changes)
    throw CheckpointError("checkpoint '" + *ckpt + "' has a different model config: " + diff,
                          "resume with the model config the run was started with");
  load_module_state(net(), data.model, *ckpt + "/model.safetensors");
  optimizer_->load_state(param_names_, data.optimizer, *ckpt + "/optim.safetensors");
  if (ema_) {
    if (data.ema.empty())
      throw CheckpointError("checkpoint '" + *ckpt + "' has no EMA weights but train.ema = " + std::to_string(hp_.ema),
                            "resume with train.ema=0, as the run was started");
    ema_->load_state(data.ema, st.at("ema_updates").get<int64_t>(), *ckpt + "/ema.safetensors");
  }
  step_ = st.at("step").get<int64_t>();
  tokens_seen_ = st.at("tokens").get<int64_t>();
  nan_skips_ = st.value("nan_skips", int64_t(0));
  time_offset_ = st.value("time_s", 0.0);
  // Multi-rank checkpoints hold every rank's RNG streams in "rng_ranks"; "rng" is rank 0's.
  const bool per_rank = st.contains("rng_ranks") && st.at("rng_ranks").size() == size_t(dist_.world);
  if (dp_.active() && !per_rank && main_rank_)
    std::cout << "note: checkpoint has no RNG state for " << dist_.world << " ranks; ranks > 0 draw fresh streams\n";
  const auto& rng = per_rank ? st.at("rng_ranks").at(size_t(dist_.rank)) : st.at("rng");
  if (per_rank || main_rank_) restore_rng_state(rng, *sampler_, gen_, device_);
  // The uninterrupted run's gradient buckets (DataParallel::bucket_order); older checkpoints re-cut as at a start.
  if (dp_.active() && st.contains("ddp_bucket_order"))
    dp_.resume_bucket_order(st.at("ddp_bucket_order").get<std::vector<int64_t>>());
  dp_.broadcast_from_main(module_tensors(net()));
  if (st.contains("extra_state")) model_->load_extra_state(st["extra_state"]);
  if (step_ >= hp_.max_iters) {  // nothing to train: the checkpoint, config and metrics stay as they are
    if (main_rank_)
      std::cout << "checkpoint " << *ckpt << " is at step " << step_ << ", train.max_iters = " << hp_.max_iters
                << ": nothing to train, nothing written\n";
    nothing_to_train_ = true;
    return;
  }
  if (main_rank_) run_->truncate_metrics_after(step_);
  if (main_rank_) std::cout << "resumed from " << *ckpt << " at step " << step_ << "\n";
}

// train.nan_policy for a step whose loss or gradient norm is not finite (the update was skipped on the
// device): "stop" throws naming the culprit; "skip" drops the batch and counts it.
void Trainer::apply_nan_policy(const StepStats& s, TrainLogger& log) {
  optimizer_->undo_step_count();
  std::string culprit = "loss";
  if (std::isfinite(s.loss)) {
    culprit = "gradient norm";
    for (auto& p : net().named_parameters())
      if (p.value().grad().defined() && !torch::isfinite(p.value().grad()).all().item<bool>()) {
        culprit = "gradient of parameter '" + p.key() + "'";
        break;
      }
  }
  if (hp_.nan_policy == "stop") {
    log.clear();
    throw TrainingError("non-finite " + culprit + " at step " + std::to_string(step_) + " (loss " +
                            format_number("%g", s.loss) + ", grad_norm " + format_number("%g", s.grad_norm) +
                            "); no update made",
                        "the last good checkpoint is in " + run_->path() +
                            "/checkpoints; lower train.learning_rate or set train.nan_policy=skip");
  }
  ++nan_skips_;
  step_runner_->zero_grad();
  log.note("step " + std::to_string(step_) + ": non-finite " + culprit + ", batch skipped (" +
           std::to_string(nan_skips_) + " so far)");
}

// Validation loss on fixed batches (fixed-seed sampler and order generator), EMA weights when present;
// averaged over ranks, each of which scored its own shard. Its standard error treats the eval_iters × world
// batch losses of all ranks as one sample: each rank sums its squared deviations from the global mean.
ValLoss Trainer::validate() {
  if (!val_file_ || hp_.eval_iters == 0) return {};
  torch::NoGradGuard no_grad;
  net().eval();
  if (ema_) ema_->swap_in();
  BatchSampler vs(val_file_, T_, kEvalSeed, dist_.rank, dist_.world);
  at::Generator vg = at::make_generator<at::CPUGeneratorImpl>(kEvalSeed);
  double sum = 0;
  std::vector<double> batch_losses;
  for (int64_t i = 0; i < hp_.eval_iters; ++i) {
    TrainBatch batch = draw_batch(*step_context_, vs, vg);
    AutocastScope ac(bf16_);
    batch_losses.push_back(model_->loss(batch, vg).loss.item<double>());
    sum += batch_losses.back();
  }
  if (ema_) ema_->swap_out();
  net().train();
  const double local = sum / double(hp_.eval_iters);
  ValLoss v;
  v.mean = dp_.active() ? dp_.average({local})[0] : local;
  double squares = 0;  // Σ (loss − mean)² over this rank's batches
  for (double x : batch_losses) squares += (x - v.mean) * (x - v.mean);
  if (dp_.active()) squares = dp_.average({squares})[0] * dist_.world;
  const double n = double(hp_.eval_iters) * dist_.world;
  if (n >= 2) v.standard_error = std::sqrt(squares / (n - 1) / n);
  return v;
}

// Writes checkpoints/step_<step> (collective when data parallel: rank 0 gathers every rank's RNG streams).
std::string Trainer::checkpoint(double elapsed) {
  const nlohmann::json rng = step_runner_->rng_state();
  const std::vector<std::string> rank_rngs = dp_.active() ? dp_.gather_to_main(rng.dump()) : std::vector<std::string>{};
  const std::vector<int64_t> bucket_order = dp_.bucket_order();  // collective
  if (!main_rank_) return "";
  CheckpointData data;
  data.model = module_state(net());
  if (ema_) data.ema = ema_->state();
  data.optimizer = optimizer_->state(param_names_);
  data.state = {{"plugin", plugin_name_},
                {"flavour", flavour_},
                {"plugin_version", info_.version},
                {"tokens", tokens_seen_},
                {"time_s", elapsed},
                {"nan_skips", nan_skips_},
                {"ema_updates", ema_ ? ema_->num_updates() : 0},
                {"ema_decay", hp_.ema},
                {"rng", rng},
                {"extra_state", model_->extra_state()},
                {"config", config_}};
  if (dp_.active()) {
    data.state["world_size"] = dist_.world;
    for (const auto& r : rank_rngs) data.state["rng_ranks"].push_back(nlohmann::json::parse(r));
    if (!bucket_order.empty()) data.state["ddp_bucket_order"] = bucket_order;
  }
  const std::string dir = save_checkpoint(run_->path(), step_, std::move(data), hp_.keep_checkpoints);
  // results.json: the run's record (paradigm, params, tokens, FLOPs), so reports need no plugin.
  record_training_run(run_->path(), config_, *model_, step_, tokens_seen_, model_->flops_per_token(T_));
  return dir;
}

// A signal, or train.max_seconds reached; agreed over ranks, so every rank leaves the loop at the same step.
bool Trainer::stop_requested(TrainLogger& log) {
  stop_signal_ = g_signal != 0;
  bool stop_time = hp_.max_seconds > 0 && log.elapsed_s() >= hp_.max_seconds;
  if (dp_.active()) {
    const std::vector<double> any = dp_.average({stop_signal_ ? 1.0 : 0.0, stop_time ? 1.0 : 0.0});
    stop_signal_ = any[0] > 0, stop_time = any[1] > 0;
  }
  if (stop_signal_) return true;
  if (!stop_time) return false;
  std::ostringstream note;
  note << "train.max_seconds = " << hp_.max_seconds << " reached at step " << step_;
  log.note(note.str());
  return true;
}

TrainSummary Trainer::run() {
  TrainSummary summary;
  summary.run_dir = run_->path();
  summary.steps = step_;
  summary.final_val_loss = std::nan("");
  if (nothing_to_train_) return summary;
  if (resume_ && main_rank_)  // earlier segments' validation losses count for "best"
    std::tie(summary.best_val_loss, summary.best_val_step) = best_logged_val(run_->metrics_path());
  auto record_val = [&](double v) {  // final and best validation loss for the summary line
    summary.final_val_loss = v;
    if (std::isfinite(v) && !(v >= summary.best_val_loss)) {  // best is NaN before the first
      summary.best_val_loss = v;
      summary.best_val_step = step_;
    }
  };
  g_signal = 0;
  const ScopedSignals signals(on_signal);
  TrainStreamScope stream(device_, step_runner_->captures());
  net().train();
  reset_peak_memory(device_);
  start_step_ = step_;
  TrainLogger log(*run_, main_rank_, device_, hp_.max_iters, hp_.log_interval, model_->flops_per_token(T_),
                  peak_bf16_flops(device_name(device_)), dist_.world, step_, tokens_seen_, time_offset_);
  const int64_t tokens_per_step = B_ * T_ * hp_.gradient_accumulation_steps * dist_.world;
  int64_t last_ckpt_step = -1, last_eval_step = -1;
  // The curves start where training does: the untrained model's validation loss (≈ ln V) at step 0. validate()
  // draws from its own fixed-seed generators, so the training stream is the same with or without it.
  if (step_ == 0 && hp_.eval_interval > 0 && val_file_) {
    const ValLoss val = validate();
    record_val(val.mean);
    last_eval_step = 0;
    log.val(0, val.mean, val.standard_error, ema_ ? " (EMA weights)" : "");
  }

  while (step_ < hp_.max_iters) {
    const double lr = learning_rate_at(hp_, step_);
    const StepStats s = step_runner_->step(lr, step_ + 1, log);
    if (!std::isfinite(s.loss) || !std::isfinite(s.grad_norm))
      apply_nan_policy(s, log);  // no update made
    else if (ema_)
      ema_->update();
    ++step_;
    tokens_seen_ += tokens_per_step;
    summary.final_train_loss = s.loss;
    // The plugin's diagnostics (e.g. ao_gpt's adaLN gates) on logged steps only, after the step's host read.
    const auto diagnostics = log.logs_step(step_) ? model_->diagnostics() : std::map<std::string, double>{};
    log.step(step_, s.loss, lr, s.grad_norm, tokens_seen_, nan_skips_, s.extra, diagnostics);
    if (hp_.eval_interval > 0 && step_ % hp_.eval_interval == 0 && val_file_) {
      const ValLoss val = validate();
      record_val(val.mean);
      last_eval_step = step_;
      log.val(step_, val.mean, val.standard_error, ema_ ? " (EMA weights)" : "");
    }
    if (hp_.checkpoint_interval > 0 && step_ % hp_.checkpoint_interval == 0) {
      checkpoint(log.run_time_s());
      last_ckpt_step = step_;
    }
    if (stop_requested(log)) break;
  }
  log.clear();

  const bool interrupted = dp_.active() ? stop_signal_ : g_signal != 0;
  if (!interrupted && val_file_ && hp_.eval_interval > 0 && last_eval_step != step_ && step_ > 0) {
    const ValLoss val = validate();
    record_val(val.mean);
    log.val(step_, val.mean, val.standard_error, "");
  }
  std::string ckpt_dir = run_->path() + "/checkpoints/step_" + std::to_string(step_);
  if (last_ckpt_step != step_) ckpt_dir = checkpoint(log.run_time_s());
  summary.steps = step_;
  summary.nan_skips = nan_skips_;
  summary.tokens = tokens_seen_;
  summary.wall_s = log.run_time_s();
  summary.graph_from_step = step_runner_->graph_from_step();
  for (const auto& p : net().parameters()) summary.params += p.numel();
  if (interrupted) {
    summary.interrupted = true;
    summary.signal = g_signal != 0 ? int(g_signal) : SIGTERM;  // a peer rank was signalled
    if (main_rank_)
      std::cout << "interrupted at step " << step_ << "; checkpoint written to " << ckpt_dir
                << "; resume with: aobench train --config " << run_->path() << "/config.resolved.json --resume\n";
  } else if (main_rank_) {
    std::cout << "done: " << summary_line(summary) << "; checkpoint " << ckpt_dir << "\n";
  }
  if (debug_ddp_)
    std::cout << "ddp-debug rank " << dist_.rank << "/" << dist_.world
              << " final parameters: " << parameter_checksum(net()) << "\n"
              << std::flush;
  dp_.barrier();  // no rank exits (tearing down NCCL) while a peer is still in a collective
  return summary;
}

}  // namespace

std::string summary_line(const TrainSummary& s) {
  std::ostringstream o;
  o << s.steps << " steps, " << s.tokens << " tokens (" << format_count(double(s.tokens)) << ") in "
    << format_duration(s.wall_s) << "; val loss ";
  if (std::isfinite(s.best_val_loss))
    o << "best " << format_number("%.4f", s.best_val_loss) << " (step " << s.best_val_step << "), final "
      << (std::isfinite(s.final_val_loss) ? format_number("%.4f", s.final_val_loss) : std::string("n/a"));
  else
    o << "n/a";
  o << "; " << format_count(double(s.params)) << " parameters";
  if (s.nan_skips) o << "; " << s.nan_skips << " batches skipped (non-finite)";
  return o.str();
}

TrainSummary run_training(const nlohmann::json& config, bool resume, bool allow_config_changes) {
  validate_sections(config);  // before the run folder exists: a sample.* typo must not wait for `sample`
  Trainer trainer(config, resume, allow_config_changes);
  return trainer.run();
}

}  // namespace aobench
