// Implements: harness/experiment/plan.h.
#include "harness/experiment/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "core/config.h"
#include "core/config_types.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/plugin_api.h"
#include "core/progress.h"
#include "harness/experiment/gpu_sharing.h"
#include "harness/registry.h"

extern "C" const char* aobench_measured_rates_json();

namespace aobench {
using nlohmann::json;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kAssumedMfu = 0.30;  // no measured row at all
// Optimizer-side bytes per parameter: fp32 weight, gradient and AdamW's two moments; an EMA adds a copy.
constexpr double kStateBytes = 16, kEmaBytes = 4;

// One row of configs/measured_rates.json.
struct Rate {
  std::string gpu, plugin, flavour, source;
  int64_t T = 0, batch = 0;
  double tok_s = 0, peak_gib = NAN;
  // "packed": the summed tok/s of `packed_runs` such runs side by side on the GPU, through MPS and in turns.
  int packed_runs = 0;
  double packed_mps = NAN, packed_turns = NAN;
  std::string packed_source;
};

const std::vector<Rate>& measured_rates() {
  static const std::vector<Rate> rates = [] {
    std::vector<Rate> out;
    const json doc = json::parse(aobench_measured_rates_json());
    for (const auto& r : doc.at("rates")) {
      Rate rate;
      rate.gpu = r.at("gpu");
      rate.plugin = r.at("plugin");
      rate.flavour = r.at("flavour");
      rate.source = r.at("source");
      rate.T = r.at("T");
      rate.batch = r.at("batch_size");
      rate.tok_s = r.at("tok_s");
      if (r.at("peak_gib").is_number()) rate.peak_gib = r.at("peak_gib");
      if (r.contains("packed")) {
        const json& k = r.at("packed");
        rate.packed_runs = k.at("runs");
        rate.packed_mps = k.at("mps_tok_s");
        rate.packed_turns = k.at("time_slicing_tok_s");
        rate.packed_source = k.at("source");
      }
      out.push_back(rate);
    }
    return out;
  }();
  return rates;
}

// What a model costs, from a CPU build: parameters and training FLOPs per token at T.
struct ModelCost {
  int64_t params = 0;
  double flops_per_token = 0;
};

class ModelCosts {
 public:
  // The model of a resolved config at sequence length T (its model section as resolved).
  ModelCost of(const json& model, int64_t T) {
    const std::string key = model.dump() + "@" + std::to_string(T);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    auto m = PluginRegistry::instance().create(model.at("plugin").get<std::string>());
    m->configure(model);
    torch::manual_seed(0);
    m->build(torch::kCPU);
    ModelCost c;
    for (const auto& p : m->module().parameters()) c.params += p.numel();
    c.flops_per_token = m->flops_per_token(T);
    return cache_[key] = c;
  }
  // A measured row's model: the plugin's flavour at the row's T.
  ModelCost of(const Rate& r) {
    json model = flavour_defaults(r.plugin, r.flavour);
    model["plugin"] = r.plugin;
    model["flavour"] = r.flavour;
    model["block_size"] = r.T;
    return of(model, r.T);
  }

 private:
  std::map<std::string, ModelCost> cache_;
};

// The GPU of a device name as configs/measured_rates.json names it; an H100 PCIe is no H100 (SXM) there.
std::string gpu_class(const std::string& name) {
  if (name.find("H100") != std::string::npos && name.find("PCIe") != std::string::npos) return "H100 PCIe";
  for (const char* c : {"H200", "H100", "A100"})
    if (name.find(c) != std::string::npos) return c;
  return name;
}

// The first row that `match` accepts: this GPU's rows before the others (those only when `same_gpu_only` is false).
std::optional<Rate> closest(const std::string& gpu, const std::function<bool(const Rate&)>& match, bool same_gpu_only) {
  for (int pass = 0; pass < (same_gpu_only ? 1 : 2); ++pass)
    for (const Rate& r : measured_rates())
      if ((pass == 0) == (r.gpu == gpu) && match(r)) return r;
  return std::nullopt;
}

double step_work(const Rate& r, ModelCosts& costs) {
  return static_cast<double>(r.batch * r.T) * costs.of(r).flops_per_token;
}

// The row of `plugin` whose work per step (B·T·FLOPs per token) is nearest `work` by ratio, this GPU's rows first.
std::optional<Rate> nearest_work(const std::string& gpu, const std::string& plugin, double work, ModelCosts& costs) {
  for (int pass = 0; pass < 2; ++pass) {
    std::optional<Rate> best;
    double best_gap = INFINITY;
    for (const Rate& r : measured_rates())
      if (r.plugin == plugin && (pass == 0) == (r.gpu == gpu)) {
        const double gap = std::fabs(std::log(work / step_work(r, costs)));
        if (gap < best_gap) best_gap = gap, best = r;
      }
    if (best) return best;
  }
  return std::nullopt;
}

double smallest_work(const std::string& plugin, ModelCosts& costs) {
  double smallest = INFINITY;
  for (const Rate& r : measured_rates())
    if (r.plugin == plugin) smallest = std::min(smallest, step_work(r, costs));
  return smallest;
}

std::string percent(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f %%", 100 * v);
  return b;
}
std::string fixed(double v, const char* fmt) {
  char b[32];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

}  // namespace

ExperimentPlan plan_experiment(const Experiment& exp, const std::string& gpu) {
  ExperimentPlan plan;
  plan.origin = exp.origin;
  plan.tier = exp.record.value("tier", std::string());
  plan.runs_per_device = exp.runs_per_device;
  const bool in_turns = exp.gpu_sharing == GpuSharing::kTimeSlicing;
  plan.sharing = in_turns                              ? "in turns"
                 : exp.gpu_sharing == GpuSharing::kMps ? "through MPS"
                                                       : "through MPS where nvidia-cuda-mps-control is on PATH";
  if (!gpu.empty()) {
    plan.gpu = gpu;
    plan.gpu_origin = "named";
  } else if (torch::cuda::is_available()) {
    plan.gpu = device_name(torch::Device(torch::kCUDA, 0));
    plan.gpu_origin = "detected";
  } else {
    plan.gpu = "NVIDIA H200";
    plan.gpu_origin = "assumed: no GPU here; --gpu NAME names another";
  }
  plan.peak_flops = peak_bf16_flops(plan.gpu);
  if (!(plan.peak_flops > 0))
    throw ConfigError("--gpu '" + plan.gpu + "': no bf16 peak is known for it",
                      "name an H200, H100 or A100, or give the peak: AOBENCH_PEAK_FLOPS=989e12");
  const std::string cls = gpu_class(plan.gpu);
  ModelCosts costs;
  std::vector<std::string> sources;
  auto cite = [&](const Rate& r) {
    const std::string s = r.gpu + " " + r.plugin + "/" + r.flavour + " T=" + std::to_string(r.T) +
                          " B=" + std::to_string(r.batch) + ": " + format_count(r.tok_s) + " tok/s (" + r.source + ")";
    auto it = std::find(sources.begin(), sources.end(), s);
    if (it == sources.end()) it = sources.insert(sources.end(), s);
    return "[" + std::to_string(it - sources.begin() + 1) + "]";
  };

  for (const auto& job : exp.jobs) {
    const SeedRun* first = nullptr;
    int runs = 0;
    for (const auto& r : exp.runs)
      if (r.job == job) first = first ? first : &r, ++runs;
    const json& config = first->config;
    const TrainConfig train = TrainConfig::from_json(config);
    const json& model = config.at("model");
    JobPlan p;
    p.job = job;
    p.runs = runs;
    p.model = model.at("plugin").get<std::string>() + "/" + model.at("flavour").get<std::string>();
    const std::string plugin = model.at("plugin"), flavour = model.at("flavour");
    p.T = model.at("block_size").get<int64_t>();
    p.batch = train.batch_size * train.accumulation_steps(1);  // sequences per step, on any number of GPUs
    p.steps = train.max_iters;
    p.tokens = p.steps * p.batch * p.T;
    const ModelCost cost = costs.of(model, p.T);
    p.params = cost.params;
    p.train_flops = cost.flops_per_token * static_cast<double>(p.tokens);

    // Rate: measured for this model and micro-batch on this GPU, else the MFU of the closest rows; none for a model
    // far smaller than every measured one (its steps are bound by launches, not FLOPs: no MFU carries over).
    const int64_t micro = train.batch_size;
    const double work = static_cast<double>(micro * p.T) * cost.flops_per_token;  // FLOPs of one micro-step
    auto same_model = [&](const Rate& r) { return r.plugin == plugin && r.flavour == flavour; };
    // A row's MFU on the GPU it was measured on (the table's peak: AOBENCH_PEAK_FLOPS is the planned GPU's).
    auto mfu_of = [&](const Rate& r) { return r.tok_s * costs.of(r).flops_per_token / known_peak_bf16_flops(r.gpu); };
    if (auto r = closest(
            cls, [&](const Rate& x) { return same_model(x) && x.T == p.T && x.batch == micro; }, true)) {
      p.tok_s = r->tok_s;
      p.rate_source = "measured " + cite(*r);
      if (r->packed_runs > 0) {
        p.packed_tok_s = in_turns ? r->packed_turns : r->packed_mps;
        p.packed_runs = r->packed_runs;
        p.packed_source = std::to_string(r->packed_runs) + " runs side by side " +
                          (in_turns ? "in turns" : "through MPS") + ": " + format_count(p.packed_tok_s) +
                          " tok/s in all (" + r->packed_source + ")";
      }
    } else if (auto r = closest(
                   cls, [&](const Rate& x) { return same_model(x) && x.T == p.T; }, false)) {
      p.tok_s = mfu_of(*r) * plan.peak_flops / cost.flops_per_token;
      p.rate_source =
          "MFU " + percent(mfu_of(*r)) + " of the same model at batch " + std::to_string(r->batch) + " " + cite(*r);
    } else if (auto size = closest(
                   cls, [&](const Rate& x) { return x.flavour == flavour && x.T == p.T; }, false)) {
      // Another model of this size, times how this plugin's MFU compares with that model's at a size both have.
      double mfu = mfu_of(*size);
      std::string how = "MFU " + percent(mfu) + " of " + size->plugin + " at this size " + cite(*size);
      for (const Rate& mine : measured_rates()) {
        if (mine.plugin != plugin) continue;
        auto theirs = closest(
            mine.gpu,
            [&](const Rate& x) {
              return x.plugin == size->plugin && x.flavour == mine.flavour && x.T == mine.T && x.batch == mine.batch;
            },
            true);
        if (!theirs) continue;
        mfu *= mfu_of(mine) / mfu_of(*theirs);
        how += " × " + plugin + "/" + size->plugin + " at " + mine.flavour + " " + cite(mine) + cite(*theirs);
        break;
      }
      p.tok_s = mfu * plan.peak_flops / cost.flops_per_token;
      p.rate_source = how;
    } else if (auto r = nearest_work(cls, plugin, work, costs)) {
      // The same plugin at the size whose work per step is nearest; none below a quarter of the smallest measured
      // step (a step that small is bound by kernel launches, not FLOPs).
      if (work < smallest_work(plugin, costs) / 4) {
        p.tok_s = NAN;
        p.rate_source = "no estimate: " + format_count(work) +
                        " FLOPs per step, under a quarter of the smallest measured " + plugin +
                        " step; so small a step is bound by kernel launches";
      } else {
        p.tok_s = mfu_of(*r) * plan.peak_flops / cost.flops_per_token;
        p.rate_source = "MFU " + percent(mfu_of(*r)) + " of the same plugin at " + r->flavour +
                        " T=" + std::to_string(r->T) + " B=" + std::to_string(r->batch) + " " + cite(*r);
      }
    } else {
      p.tok_s = kAssumedMfu * plan.peak_flops / cost.flops_per_token;
      p.rate_source = "assumed MFU " + percent(kAssumedMfu) + " (no measured row of this plugin or size)";
    }
    p.gpu_hours = static_cast<double>(p.tokens) / p.tok_s / 3600.0;

    // Peak memory: the optimizer state of the parameters plus activations, these scaled by B·T from a measured row
    // of the same model (any GPU), else the bf16 estimate 34·d·L + 6·V bytes per token (no recomputation).
    const double state = static_cast<double>(p.params) * (kStateBytes + (train.ema > 0 ? kEmaBytes : 0));
    const double bt = static_cast<double>(micro * p.T);  // tokens of one micro-step
    std::optional<Rate> mem;
    for (const Rate& r : measured_rates())
      if (same_model(r) && std::isfinite(r.peak_gib) && (!mem || std::abs(r.T - p.T) < std::abs(mem->T - p.T))) mem = r;
    if (mem) {
      const double their_state = static_cast<double>(costs.of(*mem).params) * kStateBytes;
      const double act =
          std::max(0.0, mem->peak_gib * kGiB - their_state) * bt / static_cast<double>(mem->batch * mem->T);
      p.peak_gib = (state + act) / kGiB;
      p.peak_source = mem->batch == micro && mem->T == p.T ? "measured " + cite(*mem) : "scaled by B·T " + cite(*mem);
    } else {
      const double d = model.value("n_embd", 0.0), L = model.value("n_layer", 0.0), V = model.value("vocab_size", 0.0);
      p.peak_gib = (state + bt * (34 * d * L + 6 * V)) / kGiB;
      p.peak_source = "formula";
    }
    plan.jobs.push_back(p);
  }
  plan.sources = sources;
  return plan;
}

std::string ExperimentPlan::text() const {
  std::ostringstream o;
  int runs = 0;
  double tokens = 0, flops = 0, hours = 0;
  int unknown = 0;  // jobs without a rate
  for (const auto& j : jobs) {
    runs += j.runs;
    tokens += double(j.tokens) * j.runs;
    flops += j.train_flops * j.runs;
    if (std::isfinite(j.gpu_hours)) hours += j.gpu_hours * j.runs;
    unknown += std::isfinite(j.gpu_hours) ? 0 : 1;
  }
  o << "plan: " << origin << (tier.empty() ? "" : " at tier " + tier) << ", " << runs << " runs of " << jobs.size()
    << " jobs, on " << gpu << " (" << gpu_origin << "; bf16 peak " << format_count(peak_flops)
    << "FLOP/s); nothing is read "
    << "or trained\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-16s %-18s %8s %6s %8s %8s %9s %11s %5s %9s  %s\n", "job", "model", "params", "T",
                "batch", "steps", "tokens", "train FLOPs", "runs", "GPU-hours", "estimates");
  o << line;
  for (const auto& j : jobs) {
    std::snprintf(line, sizeof line, "%-16s %-18s %8s %6lld %8lld %8lld %9s %11s %5d %9s  ", j.job.c_str(),
                  j.model.c_str(), format_count(double(j.params)).c_str(), (long long)j.T, (long long)j.batch,
                  (long long)j.steps, format_count(double(j.tokens)).c_str(), fixed(j.train_flops, "%.2e").c_str(),
                  j.runs, std::isfinite(j.gpu_hours) ? fixed(j.gpu_hours * j.runs, "%.3g").c_str() : "n/a");
    o << line
      << (std::isfinite(j.tok_s) ? format_count(j.tok_s) + " tok/s per run alone (" + j.rate_source + ")"
                                 : j.rate_source)
      << "; peak " << fixed(j.peak_gib, "%.1f") << " GiB (" << j.peak_source << ")\n";
  }
  o << "total: " << runs << " runs, " << format_count(tokens) << " tokens, " << fixed(flops, "%.2e") << " FLOPs, "
    << fixed(hours, "%.3g") << " GPU-hours of training"
    << (unknown ? " (" + std::to_string(unknown) + " jobs without an estimate)" : "") << " on " << gpu_class(gpu)
    << "s (evaluation and generation not counted; one run alone on a GPU)\n";
  if (runs_per_device > 1) {
    // Packed: the summed rate measured for as many runs side by side, where a job has one; else as one run alone.
    const int side_by_side = std::min(runs_per_device, runs);
    double packed = 0;
    std::vector<std::string> notes;
    int alone = 0;
    for (const auto& j : jobs) {
      if (std::isfinite(j.packed_tok_s) && side_by_side >= j.packed_runs) {
        packed += static_cast<double>(j.tokens) * j.runs / j.packed_tok_s / 3600.0;
        if (std::find(notes.begin(), notes.end(), j.packed_source) == notes.end()) notes.push_back(j.packed_source);
      } else if (std::isfinite(j.gpu_hours)) {
        packed += j.gpu_hours * j.runs;
        ++alone;
      }
    }
    o << "packed: runs_per_device " << runs_per_device << ", " << sharing << ": " << fixed(packed, "%.3g")
      << " GPU-hours of training";
    for (const auto& n : notes) o << "; " << n;
    if (alone)
      o << "; " << alone << " jobs without a packed measurement for " << side_by_side << " runs at once "
        << "counted as one run alone";
    o << "\n";
  }
  for (size_t i = 0; i < sources.size(); ++i) o << "[" << i + 1 << "] " << sources[i] << "\n";
  return o.str();
}

}  // namespace aobench
