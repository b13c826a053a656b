// Implements: the typed config sections (see config_types.h), read through the path getters of config.h so
// that every error names its key.
#include "core/config_types.h"

#include <algorithm>
#include <cmath>

#include "core/config.h"
#include "core/device.h"
#include "core/errors.h"

namespace aobench {
namespace {

constexpr double kHuge = 1e15;  // "absurd" upper bound for counts

// Reads keys of one config and notes each leaf it reads in `read` (when given).
class Reader {
 public:
  Reader(const nlohmann::json& config, KeysRead* read) : config_(config), read_(read) {}

  std::string string(const std::string& path) { return note(path), get_string(config_, path); }
  bool boolean(const std::string& path) { return note(path), get_bool(config_, path); }
  int64_t integer(const std::string& path) { return note(path), get_int(config_, path); }
  double number_in(const std::string& path, double lo, double hi) {
    return note(path), get_number_in(config_, path, lo, hi);
  }
  // A count in [lo, hi]: "must be a whole number" (train.*) or "must be an integer" (sample.*, speed.*).
  int64_t whole(const std::string& path, double lo, double hi = kHuge) {
    const double v = number_in(path, lo, hi);
    if (std::floor(v) != v) throw ConfigError("config '" + path + "' must be a whole number, got " + std::to_string(v));
    return int64_t(v);
  }
  // whole() for a key that configs written before it existed lack (a run's config.resolved.json, read by
  // sample / speed): `absent` then.
  int64_t whole_or(const std::string& path, double lo, double hi, int64_t absent) {
    std::string pointer = "/" + path;
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    if (config_.contains(nlohmann::json::json_pointer(pointer))) return whole(path, lo, hi);
    note(path);
    return absent;
  }
  int64_t integer_in(const std::string& path, double lo, double hi) {
    const double v = number_in(path, lo, hi);
    if (v != std::floor(v)) throw ConfigError("config '" + path + "' must be an integer, got " + std::to_string(v));
    return static_cast<int64_t>(v);
  }
  // A string that must be one of `allowed`.
  std::string choice(const std::string& path, const std::vector<std::string>& allowed) {
    const std::string v = string(path);
    std::string list;
    for (const auto& a : allowed) {
      if (v == a) return v;
      list += (list.empty() ? "" : ", ") + a;
    }
    throw ConfigError("config '" + path + "' = \"" + v + "\" is not allowed", "use one of: " + list);
  }
  // A list or object read whole (by the caller); an object's leaves are noted one by one.
  const nlohmann::json& node(const std::string& path) {
    const nlohmann::json& j = at_path(config_, path);
    if (j.is_object() && !j.empty())
      for (auto it = j.begin(); it != j.end(); ++it) note(path + "." + it.key());
    else
      note(path);
    return j;
  }

 private:
  void note(const std::string& path) {
    if (read_) read_->push_back(path);
  }
  const nlohmann::json& config_;
  KeysRead* read_;
};

}  // namespace

DataConfig DataConfig::from_json(const nlohmann::json& resolved, KeysRead* read) {
  Reader r(resolved, read);
  DataConfig d;
  d.train = r.string("data.train");
  d.val = r.string("data.val");
  d.tokenizer = r.string("data.tokenizer");
  d.seed = r.whole_or("data.seed", -1, 9.0e15, -1);
  return d;
}

int64_t TrainConfig::accumulation_steps(int world) const {
  if (global_batch_size == 0) return gradient_accumulation_steps;
  const int64_t per_step = batch_size * world;  // sequences of one micro-step over all ranks
  if (global_batch_size % per_step != 0)
    throw ConfigError("config 'train.global_batch_size' = " + std::to_string(global_batch_size) +
                          " is not a whole number of micro-batches on " + std::to_string(world) + " rank" +
                          (world == 1 ? "" : "s") + ": train.batch_size " + std::to_string(batch_size) + " × " +
                          std::to_string(world) + " = " + std::to_string(per_step) + " sequences per micro-step",
                      "run on a number of GPUs that divides " + std::to_string(global_batch_size / batch_size) +
                          ", or change train.batch_size");
  return global_batch_size / per_step;
}

TrainConfig TrainConfig::from_json(const nlohmann::json& resolved, KeysRead* read) {
  Reader r(resolved, read);
  TrainConfig p;
  p.out_dir = r.string("train.out_dir");
  if (p.out_dir.empty()) throw ConfigError("config 'train.out_dir' is empty", "set a run directory");
  p.device = r.string("train.device");
  p.dtype = r.string("train.dtype");
  p.seed = uint64_t(r.whole("train.seed", 0, 9.0e15));
  p.batch_size = r.whole("train.batch_size", 1, 1e7);
  p.gradient_accumulation_steps = r.whole("train.gradient_accumulation_steps", 1, 1e6);
  p.global_batch_size = r.whole_or("train.global_batch_size", 0, 1e9, 0);  // runs before it: absent
  if (p.global_batch_size > 0 && p.gradient_accumulation_steps != 1)
    throw ConfigError("config sets both 'train.global_batch_size' = " + std::to_string(p.global_batch_size) +
                          " and 'train.gradient_accumulation_steps' = " + std::to_string(p.gradient_accumulation_steps),
                      "set one: global_batch_size is the batch over all GPUs (the accumulation follows from it), "
                      "gradient_accumulation_steps is per GPU");
  if (p.global_batch_size % p.batch_size != 0)
    throw ConfigError("config 'train.global_batch_size' = " + std::to_string(p.global_batch_size) +
                          " is not a multiple of 'train.batch_size' = " + std::to_string(p.batch_size),
                      "the global batch is whole micro-batches of batch_size sequences on every GPU");
  p.max_iters = r.whole("train.max_iters", 0);
  p.max_seconds = r.number_in("train.max_seconds", 0, 1e9);
  p.learning_rate = r.number_in("train.learning_rate", 0, 10);
  p.min_lr = r.number_in("train.min_lr", 0, 10);
  p.warmup_iters = r.whole("train.warmup_iters", 0);
  p.lr_decay_iters = r.whole("train.lr_decay_iters", 0);
  p.lr_schedule = r.string("train.lr_schedule");
  p.weight_decay = r.number_in("train.weight_decay", 0, 10);
  p.beta1 = r.number_in("train.beta1", 0, 0.999999999);
  p.beta2 = r.number_in("train.beta2", 0, 0.999999999);
  p.eps = r.number_in("train.eps", 0, 1);
  p.grad_clip = r.number_in("train.grad_clip", 0, 1e6);
  p.ema = r.number_in("train.ema", 0, 0.999999999);
  p.order = OrderSpec::from_json(r.node("train.order"), "train.order");
  p.log_interval = r.whole("train.log_interval", 1);
  p.eval_interval = r.whole("train.eval_interval", 0);
  p.eval_iters = r.whole("train.eval_iters", 0);
  p.checkpoint_interval = r.whole("train.checkpoint_interval", 0);
  p.keep_checkpoints = r.whole("train.keep_checkpoints", 0, 1e6);
  p.nan_policy = r.string("train.nan_policy");
  p.ddp_bucket_mb = r.number_in("train.ddp_bucket_mb", 1, 65536);
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

EvalConfig EvalConfig::from_json(const nlohmann::json& resolved, KeysRead* read) {
  Reader r(resolved, read);
  EvalConfig o;
  o.mode = r.string("eval.mode");
  if (o.mode != "l2r" && o.mode != "random" && o.mode != "ensemble" && o.mode != "elbo" && o.mode != "infill")
    throw ConfigError("config 'eval.mode' = \"" + o.mode + "\" is not a known mode",
                      "use one of: l2r, random, ensemble, elbo, infill");
  // Cost knobs are bounded, so a typo (orders=1e6, ensemble [1e9]) is an error, not a job that never ends;
  // the bounds sit far past the protocols in use (spec-ao-gpt: ensembles M ≤ 64, about (M−1)·T²/2
  // token-forwards per sequence; configs/: K ≤ 4 orders, ≤ 128 MC steps).
  o.batch_size = static_cast<int64_t>(r.number_in("eval.batch_size", 1, 65536));
  o.max_batches = static_cast<int64_t>(r.number_in("eval.max_batches", 0, 1e12));
  o.orders = static_cast<int64_t>(r.number_in("eval.orders", 1, 10000));
  o.ensemble.clear();
  const auto& ens = r.node("eval.ensemble");
  if (!ens.is_array() || ens.empty())
    throw ConfigError("config 'eval.ensemble' must be a non-empty list of sizes, got " + brief(ens),
                      "example: --set 'eval.ensemble=[1,4,16]'");
  for (const auto& m : ens) {
    if (!m.is_number_integer() || m.get<int64_t>() < 1 || m.get<int64_t>() > 4096)
      throw ConfigError("config 'eval.ensemble' entries must be integers in [1, 4096], got " + brief(m),
                        "each member is one more forward per scored position; e.g. [1, 4, 16]");
    o.ensemble.push_back(m.get<int64_t>());
  }
  o.ensemble_positions = static_cast<int64_t>(r.number_in("eval.ensemble_positions", 0, 1e9));
  o.mc_steps = static_cast<int64_t>(r.number_in("eval.mc_steps", 1, 1e5));
  const std::string first = r.string("eval.first_token");
  if (first != "skip" && first != "score")
    throw ConfigError("config 'eval.first_token' = \"" + first + "\" must be \"skip\" or \"score\"",
                      "skip drops generation index 0 for every model; score needs a model that can score it");
  o.skip_first = first == "skip";
  o.seed = static_cast<uint64_t>(r.number_in("eval.seed", 0, 9.2e18));
  const auto& places = r.node("eval.infill.places");
  const std::vector<std::string> known = {"start", "middle", "end", "spans", "random"};
  if (!places.is_array() || places.empty())
    throw ConfigError("config 'eval.infill.places' must be a non-empty list, got " + brief(places),
                      "example: --set 'eval.infill.places=[\"middle\",\"random\"]'");
  o.infill.places.clear();
  for (const auto& p : places) {
    if (!p.is_string() || std::find(known.begin(), known.end(), p.get<std::string>()) == known.end())
      throw ConfigError("config 'eval.infill.places' entry " + brief(p) + " is not a place",
                        "use start, middle, end (one span there), spans (eval.infill.spans at random places) or "
                        "random (a uniformly random subset)");
    o.infill.places.push_back(p.get<std::string>());
  }
  const auto& ratios = r.node("eval.infill.ratios");
  if (!ratios.is_array() || ratios.empty())
    throw ConfigError("config 'eval.infill.ratios' must be a non-empty list, got " + brief(ratios),
                      "example: --set 'eval.infill.ratios=[0.1,0.5,0.9]'");
  o.infill.ratios.clear();
  for (const auto& x : ratios) {
    if (!x.is_number() || !(x.get<double>() > 0 && x.get<double>() < 1))
      throw ConfigError("config 'eval.infill.ratios' entry " + brief(x) + " must be a number in (0, 1)",
                        "the hidden fraction of each window: 0.1 hides 10 % of its tokens");
    o.infill.ratios.push_back(x.get<double>());
  }
  o.infill.spans = r.integer_in("eval.infill.spans", 1, 1e6);
  const auto& fill = r.node("eval.infill.fill");
  if (!fill.is_array())
    throw ConfigError("config 'eval.infill.fill' must be a list, got " + brief(fill),
                      "example: --set 'eval.infill.fill=[\"greedy\",\"sampled\"]' ([] = no fillings)");
  for (const auto& f : fill) {
    if (!f.is_string() || (f.get<std::string>() != "greedy" && f.get<std::string>() != "sampled"))
      throw ConfigError("config 'eval.infill.fill' entry " + brief(f) + " is not a filling",
                        "use greedy (the most probable token at each draw) or sampled (eval.infill.temperature, "
                        "eval.infill.top_p)");
    o.infill.fill.push_back(f.get<std::string>());
  }
  o.infill.fill_windows = r.integer_in("eval.infill.fill_windows", 1, 1e9);
  o.infill.fill_steps = r.integer_in("eval.infill.fill_steps", 0, 1e9);
  o.infill.temperature = r.number_in("eval.infill.temperature", 1e-6, 1e6);
  o.infill.top_p = r.number_in("eval.infill.top_p", 0, 1);
  if (!(o.infill.top_p > 0))
    throw ConfigError("config 'eval.infill.top_p' must lie in (0, 1], got 0", "1 keeps every token");
  o.infill.judge = r.string("eval.infill.judge");
  return o;
}

SampleConfig SampleConfig::from_json(const nlohmann::json& resolved, KeysRead* read) {
  Reader r(resolved, read);
  SampleConfig o;
  o.num_samples = r.integer_in("sample.num_samples", 1, 1e9);
  o.batch_size = r.integer_in("sample.batch_size", 1, 1e6);
  o.length = r.integer_in("sample.length", 0, 1e9);
  o.steps = r.integer_in("sample.steps", 1, 1e9);
  o.temperature = r.number_in("sample.temperature", 0, 1e9);
  if (!(o.temperature > 0))
    throw ConfigError("config 'sample.temperature' must be > 0, got 0",
                      "for near-greedy decoding use a small value such as 1e-4");
  o.top_p = r.number_in("sample.top_p", 0, 1);
  if (!(o.top_p > 0)) throw ConfigError("config 'sample.top_p' must lie in (0, 1], got 0", "1 keeps every token");
  o.float64 = r.boolean("sample.float64");
  o.seed = static_cast<uint64_t>(r.integer_in("sample.seed", 0, 9e15));
  o.schedule = r.choice("sample.schedule", {"linear", "cosine"});
  o.counts = r.choice("sample.counts", {"deterministic", "bernoulli"});
  o.ema = r.boolean("sample.ema");
  return o;
}

nlohmann::json SampleConfig::to_json() const {
  return {{"num_samples", num_samples}, {"batch_size", batch_size}, {"length", length},   {"steps", steps},
          {"temperature", temperature}, {"top_p", top_p},           {"float64", float64}, {"seed", seed},
          {"schedule", schedule},       {"counts", counts},         {"ema", ema}};
}

SpeedConfig SpeedConfig::from_json(const nlohmann::json& resolved, KeysRead* read) {
  Reader r(resolved, read);
  SpeedConfig o;
  const auto& steps = r.node("speed.steps");
  if (!steps.is_array() || steps.empty())
    throw ConfigError("config 'speed.steps' must be a non-empty list of step counts, got " + steps.dump(),
                      "example: --set 'speed.steps=[64,128,256,512,1024]'");
  o.steps.clear();
  for (const auto& s : steps) {
    if (!s.is_number_integer() || s.get<int64_t>() < 1)
      throw ConfigError("config 'speed.steps' entries must be integers ≥ 1, got " + s.dump());
    o.steps.push_back(s.get<int64_t>());
  }
  o.batch_size = r.integer_in("speed.batch_size", 1, 1e6);
  o.length = r.integer_in("speed.length", 0, 1e9);
  o.repeats = r.integer_in("speed.repeats", 1, 1e6);
  o.warmup = r.integer_in("speed.warmup", 0, 1e6);
  return o;
}

GenpplConfig GenpplConfig::from_json(const nlohmann::json& resolved, KeysRead* read) {
  Reader r(resolved, read);
  GenpplConfig g;
  g.batch_size = r.integer("genppl.batch_size");
  if (g.batch_size < 1) throw ConfigError("config 'genppl.batch_size' must be ≥ 1");
  g.device = r.string("genppl.device");
  return g;
}

// Every perf key with its field: what from_json reads and apply() sets.
const std::pair<const char*, bool PerfConfig::*> kPerfFields[] = {{"fused_ce", &PerfConfig::fused_ce},
                                                                  {"fused_ln", &PerfConfig::fused_ln},
                                                                  {"fused_norms", &PerfConfig::fused_norms},
                                                                  {"fused_adamw", &PerfConfig::fused_adamw},
                                                                  {"fused_linear", &PerfConfig::fused_linear},
                                                                  {"fused_decode", &PerfConfig::fused_decode},
                                                                  {"decode_gemm", &PerfConfig::decode_gemm},
                                                                  {"decode_pdl", &PerfConfig::decode_pdl},
                                                                  {"cuda_graphs", &PerfConfig::cuda_graphs},
                                                                  {"draw_split", &PerfConfig::draw_split},
                                                                  {"draw_candidates", &PerfConfig::draw_candidates},
                                                                  {"draw_resident", &PerfConfig::draw_resident},
                                                                  {"fused_sampling", &PerfConfig::fused_sampling}};

PerfConfig PerfConfig::from_json(const nlohmann::json& resolved, KeysRead* read) {
  PerfConfig o;
  if (!resolved.contains("perf")) return o;
  Reader r(resolved, read);
  for (const auto& [key, field] : kPerfFields) o.*field = r.boolean(std::string("perf.") + key);
  return o;
}

void PerfConfig::apply() const {
  for (const auto& [key, field] : kPerfFields) set_perf_switch(key, this->*field);
}

void validate_sections(const nlohmann::json& resolved) {
  DataConfig::from_json(resolved);
  TrainConfig::from_json(resolved);
  EvalConfig::from_json(resolved);
  SampleConfig::from_json(resolved);
  SpeedConfig::from_json(resolved);
  GenpplConfig::from_json(resolved);
  PerfConfig::from_json(resolved);
}

}  // namespace aobench
