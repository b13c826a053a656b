// Implements: seeds of an experiment (see seeds.h).
#include "harness/experiment/seeds.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "core/config.h"
#include "core/errors.h"

namespace aobench {
using nlohmann::json;

namespace {

const char* kSeedsHint = "seeds is the number of runs per job, an integer from 1 to 1000 (1: the jobs as written)";

}  // namespace

std::vector<std::string> take_settings(std::vector<std::string>& sets, const std::string& key) {
  std::vector<std::string> values;
  const std::string prefix = key + "=";
  for (auto it = sets.begin(); it != sets.end();) {
    if (it->rfind(prefix, 0) != 0) {
      ++it;
      continue;
    }
    values.push_back(it->substr(prefix.size()));
    it = sets.erase(it);
  }
  return values;
}

int take_count_setting(std::vector<std::string>& sets, const std::string& key, int max, const std::string& what,
                       const std::string& hint) {
  int count = 0;
  for (const std::string& text : take_settings(sets, key)) {
    // Digits only: "2.5", "-1", "two" and "" are refused rather than read as a prefix or cast.
    const bool digits = !text.empty() && text.size() <= 9 &&
                        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    const long long n = digits ? std::stoll(text) : 0;
    if (n < 1 || n > max)
      throw ConfigError("--set " + key + "=" + text + ": '" + text + "' is not a number of " + what, hint);
    if (count != 0 && count != n)
      throw ConfigError("--set " + key + " is given twice (" + std::to_string(count) + ", " + text + ")", "name one");
    count = static_cast<int>(n);
  }
  return count;
}

std::string take_text_setting(std::vector<std::string>& sets, const std::string& key, const std::string& what,
                              const std::string& hint) {
  std::string chosen;
  for (const std::string& value : take_settings(sets, key)) {
    if (value.empty()) throw ConfigError("--set " + key + "= needs a " + what, hint);
    if (!chosen.empty() && chosen != value)
      throw ConfigError("--set " + key + " is given twice (" + chosen + ", " + value + ")", "name one");
    chosen = value;
  }
  return chosen;
}

int experiment_count(const json& experiment, const std::string& key, int from_set, int max, const std::string& origin,
                     const std::string& hint) {
  if (from_set > 0) return from_set;
  if (!experiment.is_object() || !experiment.contains(key)) return 1;
  const json& v = experiment[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > max)
    throw ConfigError(origin + ": '" + key + "' must be a positive integer, got " + brief(v), hint);
  return v.get<int>();
}

int take_seeds_setting(std::vector<std::string>& sets) {
  return take_count_setting(sets, "seeds", kMaxSeeds, "seeds", kSeedsHint);
}

int experiment_seeds(const json& experiment, int from_set, const std::string& origin) {
  return experiment_count(experiment, "seeds", from_set, kMaxSeeds, origin, kSeedsHint);
}

std::string seed_run_name(const std::string& job, int k) { return k == 0 ? job : job + "_seed" + std::to_string(k); }

std::vector<SeedRun> seed_runs(const std::vector<std::string>& job_names, int seeds, const std::string& origin) {
  std::vector<SeedRun> runs;
  std::map<std::string, std::string> owner;  // run folder → the job (and seed) that claims it
  for (int k = 0; k < seeds; ++k)
    for (const auto& job : job_names) {
      const std::string run = seed_run_name(job, k);
      const std::string who = k == 0 ? "job " + job : "seed " + std::to_string(k) + " of job " + job;
      const auto [it, fresh] = owner.emplace(run, who);
      if (!fresh)
        throw ConfigError(origin + ": run folder '" + run + "' would hold both " + it->second + " and " + who,
                          "rename the job: with \"seeds\" N, job J also has the folders J_seed1 … J_seed<N-1>");
      runs.push_back({run, job, k, nullptr});
    }
  return runs;
}

json seed_runs_record(const std::vector<std::string>& job_names, int seeds) {
  json runs = json::object();
  for (const auto& job : job_names) {
    json names = json::array();
    for (int k = 0; k < seeds; ++k) names.push_back(seed_run_name(job, k));
    runs[job] = names;
  }
  return runs;
}

std::vector<SeedRun> expand_seeds(const std::vector<std::pair<std::string, json>>& jobs, int seeds,
                                  const std::string& out_dir, const std::string& origin) {
  std::vector<std::string> names;
  std::map<std::string, const json*> config_of;
  for (const auto& [name, config] : jobs) {
    names.push_back(name);
    config_of[name] = &config;
  }
  std::vector<SeedRun> out = seed_runs(names, seeds, origin);
  for (SeedRun& r : out) {
    r.config = *config_of.at(r.job);
    if (r.seed > 0) {
      const int64_t s = get_int(r.config, "train.seed");
      // Before data.seed existed the batches followed train.seed: an absent key reads as the default -1.
      const int64_t data_seed = r.config["data"].contains("seed") ? get_int(r.config, "data.seed") : -1;
      r.config["train"]["seed"] = s + r.seed;
      r.config["data"]["seed"] = data_seed >= 0 ? data_seed : s;
      r.config["train"]["out_dir"] = (std::filesystem::path(out_dir) / r.name).string();
    }
  }
  return out;
}

}  // namespace aobench
