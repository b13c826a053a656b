// Implements: harness/experiment/experiment.h.
#include "harness/experiment/experiment.h"

#include <algorithm>
#include <set>

#include "core/config.h"
#include "core/config_types.h"
#include "core/errors.h"
#include "harness/experiment/generation.h"
#include "harness/experiment/gpu_sharing.h"
#include "harness/experiment/lanes.h"
#include "harness/experiment/paths.h"
#include "harness/experiment/tiers.h"
#include "harness/resolve_config.h"

namespace aobench {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const json& section(const json& exp, const char* key, json::value_t type, const std::string& origin) {
  static const json empty_object = json::object(), empty_array = json::array();
  if (!exp.contains(key)) return type == json::value_t::array ? empty_array : empty_object;
  const json& v = exp[key];
  if (v.type() != type)
    throw ConfigError(origin + ": '" + key + "' must be " + (type == json::value_t::array ? "a list" : "an object") +
                      ", got " + brief(v));
  return v;
}

std::string str_field(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty())
    throw ConfigError(where + " needs a non-empty string \"" + key + "\"",
                      "see the comment in configs/quickstart.json");
  return j[key].get<std::string>();
}

// eval.modes[i] → an EvalMode over the datasets of eval.datasets its filter keeps (check_eval_section has
// checked the filters' names).
EvalMode eval_mode(const json& entry, const json& datasets, const std::string& where) {
  EvalMode m;
  m.entry = entry;
  m.where = where;
  m.patch = entry;
  m.patch.erase("jobs");
  m.patch.erase("datasets");
  m.every_job = !entry.contains("jobs");
  for (const auto& j : entry.value("jobs", json::array())) m.jobs.push_back(j.get<std::string>());
  const json judge =
      m.patch.contains("infill") && m.patch["infill"].is_object() ? m.patch["infill"].value("judge", json()) : json();
  if (judge.is_string() && !judge.get<std::string>().empty() && judge.get<std::string>().find('/') == std::string::npos)
    m.judge_job = judge.get<std::string>();
  const json keep = entry.value("datasets", json());
  for (auto d = datasets.begin(); d != datasets.end(); ++d)
    if (keep.is_null() || std::find(keep.begin(), keep.end(), json(d.key())) != keep.end())
      m.datasets.emplace_back(d.key(), d.value().get<std::string>());
  return m;
}

}  // namespace

bool EvalMode::applies_to(const std::string& job) const {
  return every_job || std::find(jobs.begin(), jobs.end(), job) != jobs.end();
}

std::string EvalMode::done_key() const {
  json used = json::object();
  for (const auto& [name, path] : datasets) used[name] = path;
  return json{{"mode", entry}, {"datasets", used}}.dump();
}

Experiment load_experiment(const std::string& origin, std::vector<std::string> sets) {
  Experiment e;
  e.origin = origin;
  const int lanes_set = take_runs_per_device_setting(sets);        // --set runs_per_device=N (lanes.h)
  const std::string sharing_set = take_gpu_sharing_setting(sets);  // --set gpu_sharing=V (gpu_sharing.h)
  json exp = load_json_file(origin);
  if (!exp.is_object()) throw ConfigError(origin + ": an experiment file is a JSON object");
  const int seeds_set = take_seeds_setting(sets);          // --set seeds=N (seeds.h)
  exp = apply_tier(exp, take_tier_setting(sets), origin);  // --set tier=NAME (tiers.h)
  apply_path_settings(exp, sets, origin);                  // --set paths.NAME=PATH (paths.h)
  exp = experiment_with_base(exp, origin);      // "base": out_dir, prepare, common, jobs, seeds of another file
  exp = resolve_experiment_paths(exp, origin);  // {data}, {out_dir}, {here}; relative to the file (paths.h)
  for (auto it = exp.begin(); it != exp.end(); ++it)
    if (!std::set<std::string>{"description", "comment", "expected", "out_dir", "prepare", "common", "jobs", "eval",
                               "generation", "tier", "findings", "deviations", "seeds", "runs_per_device",
                               "gpu_sharing", "paths"}
             .count(it.key()))
      throw ConfigError(origin + ": unknown key '" + it.key() + "'",
                        "valid keys: description, comment, expected, base, out_dir, paths, prepare, common, jobs, "
                        "eval, generation, tier, tiers, seeds, runs_per_device, gpu_sharing, findings, deviations");
  e.seeds = experiment_seeds(exp, seeds_set, origin);
  e.runs_per_device = experiment_runs_per_device(exp, lanes_set, origin);
  if (!sharing_set.empty())
    e.gpu_sharing = parse_gpu_sharing(sharing_set, "--set gpu_sharing=" + sharing_set);
  else if (exp.contains("gpu_sharing"))
    e.gpu_sharing = parse_gpu_sharing(
        exp["gpu_sharing"].is_string() ? exp["gpu_sharing"].get<std::string>() : exp["gpu_sharing"].dump(),
        origin + ": 'gpu_sharing'");
  exp["seeds"] = e.seeds;
  e.record = experiment_record(exp, origin);  // tier and findings: the verdicts of the report
  e.out_dir = str_field(exp, "out_dir", origin);
  if (exp.contains("description")) e.description = str_field(exp, "description", origin);

  const json& prepare = section(exp, "prepare", json::value_t::array, origin);
  for (size_t i = 0; i < prepare.size(); ++i) {
    const std::string where = origin + ": prepare[" + std::to_string(i) + "]";
    if (!prepare[i].is_object()) throw ConfigError(where + " must be an object");
    e.prepare.push_back({str_field(prepare[i], "name", where), PrepareSpec::from_json(prepare[i], where), where});
  }

  section(exp, "common", json::value_t::object, origin);  // its type; resolve_experiment_jobs merges it
  const json& jobs = section(exp, "jobs", json::value_t::array, origin);
  if (jobs.empty()) throw ConfigError(origin + ": 'jobs' is empty", "add {\"name\": ..., \"config\": {...}}");
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string name = str_field(jobs[i], "name", origin + ": jobs[" + std::to_string(i) + "]");
    if (std::find(e.jobs.begin(), e.jobs.end(), name) != e.jobs.end())
      throw ConfigError(origin + ": jobs[" + std::to_string(i) + "]: job name '" + name + "' is used twice",
                        "every job needs its own name: it is the run directory <out_dir>/<name>");
    e.jobs.push_back(name);
  }
  seed_runs(e.jobs, e.seeds, origin);  // two runs sharing a folder fail here, before the plugins are asked
  const json& eval = section(exp, "eval", json::value_t::object, origin);
  check_eval_section(eval, e.jobs, origin);

  // Every run resolved with the --set values and every section checked.
  e.runs = expand_seeds(resolve_experiment_jobs(exp, Overrides::from_sets(sets), origin), e.seeds, e.out_dir.string(),
                        origin);
  for (const auto& r : e.runs) validate_sections(r.config);
  const json& datasets = section(eval, "datasets", json::value_t::object, origin + " eval");
  const json& modes = section(eval, "modes", json::value_t::array, origin + " eval");
  for (size_t i = 0; i < modes.size(); ++i) {
    e.modes.push_back(eval_mode(modes[i], datasets, origin + ": eval.modes[" + std::to_string(i) + "]"));
    const EvalMode& m = e.modes.back();
    if (!m.judge_job.empty()) {  // a job name: a gpt job of this file
      const auto judge =
          std::find_if(e.runs.begin(), e.runs.end(), [&](const auto& r) { return r.job == m.judge_job; });
      if (judge == e.runs.end())
        throw ConfigError(
            m.where + ": infill.judge = \"" + m.judge_job + "\" is not a job of this experiment",
            "name a gpt job of the file, or give a gpt run folder or Hugging Face GPT-2 folder as a path");
      if (get_string(judge->config, "model.plugin") != "gpt")
        throw ConfigError(m.where + ": infill.judge = \"" + m.judge_job + "\" is a " +
                              get_string(judge->config, "model.plugin") + " job; the judge must be a gpt job",
                          "name a left-to-right gpt job of the file");
    }
    for (const auto& r : e.runs)  // a typo in a mode fails now, not after the training before it
      if (r.seed == 0 && m.applies_to(r.job)) {
        json config = r.config;
        merge_strict(config, {{"eval", m.patch}}, m.where);
        EvalConfig::from_json(config);
      }
  }
  if (exp.contains("generation")) {
    check_generation_section(exp["generation"], origin);
    e.generation = exp["generation"];
    e.judge = e.generation.value("judge", std::string());
  }
  return e;
}

}  // namespace aobench
