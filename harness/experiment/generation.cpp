// Implements: the generation stages of `aobench run` and experiment "base" files (see generation.h).
// Each stage calls the library function of the command a user would type (sample → genppl, speed), so
// there is one code path.
#include "harness/experiment/generation.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "core/config.h"
#include "core/errors.h"
#include "harness/experiment/paths.h"
#include "harness/experiment/tiers.h"
#include "harness/tasks.h"
#include "metrics/generation.h"

namespace aobench {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The sample.* keys of one setting: the section's shared "sample" patch, then the setting's own.
json setting_patch(const json& generation, const json& setting) {
  json patch = generation.contains("sample") ? generation["sample"] : json::object();
  patch.merge_patch(setting);
  return patch;
}

bool in_done(const json& done, const std::string& key) {
  return done.contains("generation") &&
         std::find(done["generation"].begin(), done["generation"].end(), json(key)) != done["generation"].end();
}

}  // namespace

json experiment_with_base(json exp, const std::string& origin) {
  if (!exp.contains("base")) return exp;
  if (!exp["base"].is_string())
    throw ConfigError(origin + ": 'base' must be the path of another experiment file, got " + exp["base"].dump());
  // Relative to this file's folder, like its other paths.
  if (exp["base"].get<std::string>().rfind("{out_dir}", 0) == 0)
    throw ConfigError(origin + ": 'base' = " + exp["base"].dump() + " cannot start with {out_dir}",
                      "name the other experiment file relative to this one, e.g. \"paradigms_tiny.json\"");
  const std::string base_path = resolve_experiment_path(exp["base"].get<std::string>(), nullptr, origin, "base");
  // The base at this file's tier, so a generation study samples the models of the same scale; its paths from its
  // own folder, its {out_dir} once merged (the out_dir both then share).
  json base = apply_tier(load_json_file(base_path), exp.value("tier", std::string()), base_path);
  if (!base.is_object()) throw ConfigError(base_path + " (the 'base' of " + origin + ") is not a JSON object");
  // A folder this file names in "paths" replaces the base's of the same name (so --set paths.NAME=DIR given to
  // this file moves the base's data too), resolved from this file.
  if (exp.contains("paths") && exp["paths"].is_object() && base.contains("paths") && base["paths"].is_object())
    for (auto it = exp["paths"].begin(); it != exp["paths"].end(); ++it)
      if (base["paths"].contains(it.key()) && it.value().is_string())
        base["paths"][it.key()] =
            resolve_experiment_path(it.value().get<std::string>(), nullptr, origin, "paths." + it.key());
  base = resolve_experiment_paths(base, base_path, /*keep_out_dir=*/true);
  if (base.contains("base"))
    throw ConfigError(base_path + " (the 'base' of " + origin + ") has a 'base' itself", "one level only");
  for (const char* key : {"out_dir", "prepare", "common", "jobs", "seeds"})
    if (!exp.contains(key) && base.contains(key)) exp[key] = base[key];
  exp.erase("base");
  return exp;
}

void check_generation_section(const json& generation, const std::string& origin) {
  const std::string where = origin + ": generation";
  if (!generation.is_object()) throw ConfigError(where + " must be an object");
  for (auto it = generation.begin(); it != generation.end(); ++it)
    if (it.key() != "jobs" && it.key() != "judge" && it.key() != "sample" && it.key() != "settings" &&
        it.key() != "speed")
      throw ConfigError(where + ": unknown key '" + it.key() + "'", "keys: jobs, judge, sample, settings, speed");
  if (generation.contains("jobs") && !generation["jobs"].is_array())
    throw ConfigError(where + ".jobs must be a list of job names");
  const json settings = generation.value("settings", json::array());
  if (!settings.is_array()) throw ConfigError(where + ".settings must be a list of sample.* patches");
  if (!settings.empty() && !(generation.contains("judge") && generation["judge"].is_string()))
    throw ConfigError(where + " needs \"judge\": a job name of this experiment or a judge path",
                      "the genppl judge: a gpt job, a gpt run directory or a Hugging Face GPT-2 folder");
  for (const auto& s : settings) {
    if (!s.is_object()) throw ConfigError(where + ".settings entries must be objects, got " + s.dump());
    json c = base_config();
    merge_strict(c, {{"sample", setting_patch(generation, s)}}, where + ".settings");
    SampleConfig::from_json(c);
  }
  if (generation.contains("speed")) {
    json speed = generation["speed"];
    if (!speed.is_object()) throw ConfigError(where + ".speed must be an object of speed.* keys");
    json c = base_config();
    const json sample = speed.contains("sample") ? speed["sample"] : json::object();
    speed.erase("sample");
    merge_strict(c, {{"speed", speed}, {"sample", sample}}, where + ".speed");
    SpeedConfig::from_json(c);
    SampleConfig::from_json(c);
  }
}

void run_generation_stages(const json& generation, const std::string& job, const std::string& run,
                           const std::string& run_dir, const std::string& out_dir, const json& perf, json& done,
                           const std::function<void()>& save_done) {
  if (generation.contains("jobs") &&
      std::find(generation["jobs"].begin(), generation["jobs"].end(), json(job)) == generation["jobs"].end())
    return;
  if (!done.contains("generation")) done["generation"] = json::array();
  const json settings = generation.value("settings", json::array());
  for (const auto& setting : settings) {
    const json patch = setting_patch(generation, setting);
    const std::string key = "sample+genppl " + patch.dump();
    if (in_done(done, key)) {
      std::cout << "run: job " << run << ": " << key << " done earlier, skipped\n";
      continue;
    }
    json c = base_config();
    merge_strict(c, {{"sample", patch}}, "generation.settings");
    const SampleConfig o = SampleConfig::from_json(c);
    const std::string samples =
        (fs::path(run_dir) / "samples" /
         (genppl_dataset(o.steps, o.top_p, o.temperature) + "_seed" + std::to_string(o.seed) + ".jsonl"))
            .string();
    // `aobench sample` writes the file atomically: one that exists is complete (a killed genppl re-runs).
    if (!fs::exists(samples)) {
      SampleTask sample;
      sample.run_dir = run_dir;
      sample.out = samples;
      sample.overrides.add({{"sample", patch}}, "generation.settings").add({{"perf", perf}}, "perf");
      announce_task("sample", sample);
      run_sample(sample);
    }
    std::string judge = generation["judge"].get<std::string>();
    if (judge.find('/') == std::string::npos && fs::is_directory(fs::path(out_dir) / judge))
      judge = (fs::path(out_dir) / judge).string();  // a job of this experiment: its seed-0 run
    GenpplTask genppl{samples, judge, run_dir, {}};
    genppl.overrides.add({{"perf", perf}}, "perf");
    announce_task("genppl", genppl);
    run_genppl(genppl);
    done["generation"].push_back(key);
    save_done();
  }
  if (generation.contains("speed")) {
    json speed = generation["speed"];
    const std::string key = "speed " + speed.dump();
    if (in_done(done, key)) {
      std::cout << "run: job " << run << ": " << key << " done earlier, skipped\n";
      return;
    }
    const json sample = speed.contains("sample") ? speed["sample"] : json::object();
    speed.erase("sample");
    SpeedTask task;
    task.run_dir = run_dir;
    task.overrides.add({{"speed", speed}}, "generation.speed")
        .add({{"sample", sample}}, "generation.speed.sample")
        .add({{"perf", perf}}, "perf");
    announce_task("speed", task);
    run_speed(task);
    done["generation"].push_back(key);
    save_done();
  }
}

}  // namespace aobench
