// Implements: replicate groups and their estimates (see replicates.h).
#include "reports/replicates.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

namespace aobench {
using nlohmann::json;

namespace {

std::string fmt(const char* f, double v) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

double last_value(const RunResults& run, const std::string& curve) {
  auto it = run.curves.find(curve);
  return it == run.curves.end() || it->second.empty() ? NAN : it->second.back().second;
}

// The last validation loss after some training: the step-0 point (the untrained model) is no run's result, so a
// run stopped before its first evaluation has none.
double last_trained_val(const RunResults& run) {
  auto it = run.curves.find("loss/val");
  return it == run.curves.end() || it->second.empty() || it->second.back().first <= 0 ? NAN : it->second.back().second;
}

std::optional<int64_t> train_seed(const json& config) {
  if (!config.is_object() || !config.contains("train") || !config["train"].is_object()) return std::nullopt;
  const json& t = config["train"];
  if (!t.contains("seed") || !t["seed"].is_number_integer()) return std::nullopt;
  return t["seed"].get<int64_t>();
}

}  // namespace

json replicate_key(const json& config) {
  json key = config.is_object() ? config : json::object();
  for (const char* section : {"eval", "sample", "speed", "genppl", "description", "expected", "comment"})
    key.erase(section);
  const int64_t seed = train_seed(key).value_or(0);
  if (key.contains("train") && key["train"].is_object()) {
    json& t = key["train"];
    for (const char* k : {"seed", "out_dir", "max_seconds", "log_interval", "eval_interval", "eval_iters",
                          "checkpoint_interval", "keep_checkpoints", "ddp_bucket_mb", "nan_policy"})
      t.erase(k);
  }
  // The data order: data.seed when set (≥ 0), else train.seed seeds the batch sampler.
  if (!key.contains("data") || !key["data"].is_object()) key["data"] = json::object();
  json& d = key["data"];
  const bool own = d.contains("seed") && d["seed"].is_number_integer() && d["seed"].get<int64_t>() >= 0;
  d["seed"] = own ? d["seed"].get<int64_t>() : seed;
  return key;
}

std::vector<RunGroup> replicate_groups(const Results& r) {
  std::map<std::string, RunGroup> by_key;  // dumped key → group
  std::vector<RunGroup> out;
  auto alone = [&](const std::string& name, const RunResults* run) { out.push_back({name, {name}, {run}}); };
  for (const auto& [name, run] : r.runs) {
    // Only a run with a recorded train.seed can be a seed replicate: runs without a config (older files, a Hugging
    // Face model, merged results) would otherwise all share one empty key and be pooled.
    if (!train_seed(run.config)) {
      alone(name, &run);
      continue;
    }
    RunGroup& g = by_key[replicate_key(run.config).dump()];
    g.runs.push_back(name);  // r.runs is sorted: so are the members
    g.members.push_back(&run);
    if (g.name.empty() || name.size() < g.name.size()) g.name = name;
  }
  for (auto& [key, g] : by_key) {
    // Two members with the same train.seed are copies of one run (a renamed or re-run folder), not replicates: the
    // spread over them would be no seed spread. Which copy pairs with the other seeds is ambiguous, so none does.
    std::set<int64_t> seeds;
    for (const RunResults* m : g.members) seeds.insert(*train_seed(m->config));
    if (seeds.size() == g.members.size()) {
      out.push_back(std::move(g));
      continue;
    }
    for (size_t i = 0; i < g.runs.size(); ++i) alone(g.runs[i], g.members[i]);
  }
  std::sort(out.begin(), out.end(), [](const RunGroup& a, const RunGroup& b) { return a.name < b.name; });
  return out;
}

Estimate final_val_loss(const RunGroup& g, std::vector<std::string>* missing) {
  std::vector<double> values, se;
  for (size_t i = 0; i < g.members.size(); ++i) {
    const double v = last_trained_val(*g.members[i]);
    if (!std::isfinite(v)) {
      if (missing) missing->push_back(g.runs[i]);
      continue;
    }
    values.push_back(v);
    // The standard error recorded at the same (last) evaluation, when there is one.
    const auto& c = g.members[i]->curves;
    auto it = c.find("loss/val_se");
    const bool same_step =
        it != c.end() && !it->second.empty() && it->second.back().first == c.at("loss/val").back().first;
    se.push_back(same_step ? it->second.back().second : NAN);
  }
  return estimate_over_replicates(values, se);
}

Estimate metric_over_seeds(const RunGroup& g, const std::string& key, std::vector<std::string>* missing) {
  std::vector<double> values, se;
  for (size_t i = 0; i < g.members.size(); ++i) {
    auto it = g.members[i]->metrics.find(key);
    if (it == g.members[i]->metrics.end() || !std::isfinite(it->second.value)) {
      if (missing) missing->push_back(g.runs[i]);
      continue;
    }
    values.push_back(it->second.value);
    se.push_back(it->second.stderr_ ? *it->second.stderr_ : NAN);
  }
  return estimate_over_replicates(values, se);
}

std::vector<BandPoint> val_loss_band(const RunGroup& g, const std::string& curve) {
  std::map<double, std::vector<double>> at_step;
  for (const RunResults* m : g.members) {
    auto it = m->curves.find(curve);
    if (it == m->curves.end()) return {};
    // One value per step and member: a resumed run logs the steps since its checkpoint again (metrics.jsonl is
    // appended to); the later value is the one the run continued from. Counting both would pool a run twice.
    std::map<double, double> own;
    for (const auto& [step, v] : it->second)
      if (std::isfinite(v)) own[step] = v;
    for (const auto& [step, v] : own) at_step[step].push_back(v);
  }
  std::vector<BandPoint> out;
  for (const auto& [step, vs] : at_step) {
    if (vs.size() != g.members.size()) continue;  // a step some seed has not reached (yet)
    const MeanStderr ms = mean_stderr(vs);
    out.push_back({step, ms.mean, vs.size() >= 2 ? ms.stderr_ * std::sqrt(double(vs.size())) : NAN});
  }
  return out;
}

double unigram_nats(const RunResults& run) { return last_value(run, "unigram/nats"); }

double plateau_exit_step(const RunResults& run) {
  const double u = unigram_nats(run);
  auto it = run.curves.find("loss/val");
  if (!std::isfinite(u) || it == run.curves.end()) return -1;
  for (const auto& [step, v] : it->second)
    if (v < u * (1 - kPlateauMargin)) return step;
  return -1;
}

std::string plateau_text(const RunResults& run) {
  const double u = unigram_nats(run), last = last_trained_val(run);
  if (!std::isfinite(u)) return "unigram level not recorded";
  if (!std::isfinite(last)) return "no validation loss";
  const double s = plateau_exit_step(run);
  if (s >= 0) return "left the plateau at step " + fmt("%.0f", s);
  return "on the plateau: validation loss " + fmt("%.3f", last) + " vs unigram " + fmt("%.3f", u) + " nats (not " +
         fmt("%.0f", kPlateauMargin * 100) + " % below it yet)";
}

std::string estimate_text(const Estimate& e) {
  if (e.n == 0 || !std::isfinite(e.mean)) return "–";
  if (e.n >= 2) return fmt("%.4g", e.mean) + " ± " + fmt("%.2g", e.sd) + " (sd, n = " + std::to_string(e.n) + ")";
  return fmt("%.4g", e.mean) + (std::isfinite(e.se) ? " ± " + fmt("%.2g", e.se) + " (1 run, eval SE)" : " (1 run)");
}

}  // namespace aobench
