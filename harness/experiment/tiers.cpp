// Implements: experiment tiers (see tiers.h).
#include "harness/experiment/tiers.h"

#include <algorithm>
#include <filesystem>

#include "core/config.h"
#include "core/errors.h"
#include "core/safetensors.h"
#include "harness/experiment/seeds.h"
#include "reports/verdicts.h"

namespace aobench {
using nlohmann::json;

namespace {

std::string tier_names(const json& tiers) {
  std::string names;
  for (auto it = tiers.begin(); it != tiers.end(); ++it) names += (names.empty() ? "" : ", ") + it.key();
  return names.empty() ? "(none)" : names;
}

}  // namespace

std::string take_tier_setting(std::vector<std::string>& sets) {
  return take_text_setting(sets, "tier", "tier name", "example: --set tier=debug");
}

json apply_tier(const json& experiment, const std::string& tier, const std::string& origin) {
  if (!experiment.is_object()) throw ConfigError(origin + ": an experiment file is a JSON object");
  json exp = experiment;
  const bool has_tiers = exp.contains("tiers");
  if (has_tiers && !exp["tiers"].is_object())
    throw ConfigError(origin + ": 'tiers' must be an object {name: patch}, got " + brief(exp["tiers"]));
  const json tiers = has_tiers ? exp["tiers"] : json::object();
  if (exp.contains("tier") && !exp["tier"].is_string())
    throw ConfigError(origin + ": 'tier' (the default tier) must be a string, got " + brief(exp["tier"]));
  const std::string chosen = !tier.empty() ? tier : exp.value("tier", std::string());
  exp.erase("tiers");
  if (chosen.empty()) return exp;  // no tier named anywhere: the body as written
  if (!tiers.contains(chosen))
    throw ConfigError(origin + ": no tier '" + chosen + "'",
                      has_tiers ? "tiers of this file: " + tier_names(tiers)
                                : "this file declares no \"tiers\"; drop --set tier=" + chosen);
  json patch = tiers[chosen];
  if (!patch.is_object())
    throw ConfigError(origin + ": tiers." + chosen + " must be an object (a merge patch), got " + brief(patch));
  // "jobs" as {name: patch}: merge into the body's job of that name, keeping the list and its order.
  if (patch.contains("jobs") && patch["jobs"].is_object()) {
    if (!exp.contains("jobs") || !exp["jobs"].is_array())
      throw ConfigError(origin + ": tiers." + chosen + ".jobs patches jobs by name, but the body has no 'jobs' list");
    for (auto it = patch["jobs"].begin(); it != patch["jobs"].end(); ++it) {
      auto job = std::find_if(exp["jobs"].begin(), exp["jobs"].end(),
                              [&](const json& j) { return j.is_object() && j.value("name", "") == it.key(); });
      if (job == exp["jobs"].end()) {
        std::string names;
        for (const auto& j : exp["jobs"])
          if (j.is_object() && j.contains("name")) names += (names.empty() ? "" : ", ") + brief(j["name"]);
        throw ConfigError(origin + ": tiers." + chosen + ".jobs." + it.key() + " names no job", "jobs: " + names);
      }
      if (!it.value().is_object())
        throw ConfigError(origin + ": tiers." + chosen + ".jobs." + it.key() + " must be an object, got " +
                          brief(it.value()));
      job->merge_patch(it.value());
    }
    patch.erase("jobs");
  }
  exp.merge_patch(patch);
  exp["tier"] = chosen;
  return exp;
}

json experiment_record(const json& experiment, const std::string& origin) {
  json record = {{"file", origin}};
  for (const char* key : {"tier", "description", "findings", "deviations"})
    if (experiment.contains(key)) record[key] = experiment[key];
  if (record.contains("findings") &&
      (!record["findings"].is_array() ||
       !std::all_of(record["findings"].begin(), record["findings"].end(), [](const json& f) { return f.is_string(); })))
    throw ConfigError(origin + ": 'findings' must be a list of finding names, got " + brief(record["findings"]),
                      "example: \"findings\": [\"1\"]");
  const auto known = known_findings();
  for (const auto& f : record.value("findings", json::array()))
    if (std::find(known.begin(), known.end(), f.get<std::string>()) == known.end()) {
      std::string names;
      for (const auto& k : known) names += (names.empty() ? "" : ", ") + k;
      throw ConfigError(origin + ": no verdict exists for finding '" + f.get<std::string>() + "'",
                        "findings: " + names);
    }
  // The run folders the report should find: every job at every seed.
  const int seeds = experiment_seeds(experiment, 0, origin);
  std::vector<std::string> jobs;
  for (const auto& j : experiment.value("jobs", json::array()))
    if (j.is_object() && j.contains("name") && j["name"].is_string()) jobs.push_back(j["name"].get<std::string>());
  record["seeds"] = seeds;
  record["runs"] = seed_runs_record(jobs, seeds);
  return record;
}

json merge_experiment_records(const json& existing, const json& record) {
  if (!existing.is_object() || existing.value("file", "") == record.value("file", "")) return record;
  json merged = record;
  json findings = existing.value("findings", json::array());
  if (!findings.is_array()) findings = json::array();
  for (const auto& f : record.value("findings", json::array()))
    if (std::find(findings.begin(), findings.end(), f) == findings.end()) findings.push_back(f);
  merged["findings"] = findings;
  // Expected runs never shrink by a run of the other file: the runs of every job of both, united.
  json runs = record.value("runs", json::object());
  const json theirs = existing.value("runs", json::object());
  if (runs.is_object() && theirs.is_object()) {
    for (auto it = theirs.begin(); it != theirs.end(); ++it) {
      if (!it.value().is_array()) continue;
      json& list = runs[it.key()];
      if (!list.is_array()) list = json::array();
      for (const auto& run : it.value())
        if (std::find(list.begin(), list.end(), run) == list.end()) list.push_back(run);
    }
    merged["runs"] = runs;
    auto seeds = [](const json& r) {
      return r.contains("seeds") && r["seeds"].is_number_integer() ? r["seeds"] : json(1);
    };
    merged["seeds"] = std::max(seeds(existing).get<int64_t>(), seeds(record).get<int64_t>());
  }
  // "b | a", unless a already lists b (a re-run of one of the files).
  auto join = [&](const char* key) {
    const std::string a = existing.value(key, std::string()), b = record.value(key, std::string());
    if (a.empty()) return;
    const std::string parts = " | " + a + " | ";
    merged[key] = b.empty() || parts.find(" | " + b + " | ") != std::string::npos ? a : b + " | " + a;
  };
  for (const char* key : {"file", "description", "deviations"}) join(key);
  return merged;
}

void write_experiment_record(const std::string& out_dir, const json& record) {
  const std::string path = (std::filesystem::path(out_dir) / "experiment.json").string();
  json existing;
  if (std::filesystem::exists(path)) {
    try {
      existing = load_json_file(path);
    } catch (const std::exception&) {  // damaged: this run's record replaces it
    }
  }
  write_file_atomic(path, merge_experiment_records(existing, record).dump(2) + "\n");
}

}  // namespace aobench
