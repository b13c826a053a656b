// Implements: config resolution against the plugin registry (see resolve_config.h).
#include "harness/resolve_config.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "core/errors.h"
#include "harness/registry.h"

namespace aobench {

json resolve_config(const json& experiment, const Overrides& overrides, const std::string& experiment_origin) {
  // Which plugin and flavour? Experiment first, then --set model.plugin / model.flavour.
  std::string plugin = "gpt", flavour = "debug";
  if (experiment.contains("model") && experiment["model"].is_object()) {
    const json& m = experiment["model"];
    for (const char* key : {"plugin", "flavour"})
      if (m.contains(key) && !m[key].is_string())
        throw ConfigError(experiment_origin + ": 'model." + key + "' must be a string, got " + brief(m[key]));
    if (m.contains("plugin")) plugin = m["plugin"].get<std::string>();
    if (m.contains("flavour")) flavour = m["flavour"].get<std::string>();
  }
  for (auto [key, name] : {std::pair{"model.plugin", &plugin}, std::pair{"model.flavour", &flavour}})
    if (const json* v = overrides.find(key)) {
      if (!v->is_string()) throw ConfigError(std::string("--set ") + key + " must name one, got " + brief(*v));
      *name = v->get<std::string>();
    }
  json config = base_config();
  config["model"] = flavour_defaults(plugin, flavour);
  merge_strict(config, experiment, experiment_origin);
  overrides.apply_to(config);
  return config;
}

void check_eval_section(const json& eval, const std::vector<std::string>& job_names, const std::string& origin) {
  const json none = json::object(), no_modes = json::array();
  const json& datasets = eval.contains("datasets") ? eval["datasets"] : none;
  const json& modes = eval.contains("modes") ? eval["modes"] : no_modes;
  if (!datasets.is_object()) throw ConfigError(origin + ": eval.datasets must be an object {name: path}");
  if (!modes.is_array()) throw ConfigError(origin + ": eval.modes must be a list of eval patches");
  for (auto d = datasets.begin(); d != datasets.end(); ++d)
    if (!d.value().is_string()) throw ConfigError(origin + ": eval.datasets." + d.key() + " must be a path");
  for (const auto& mode : modes) {
    if (!mode.is_object())
      throw ConfigError(origin + ": eval.modes entries must be objects (eval patches), got " + brief(mode),
                        "example: {\"mode\": \"random\", \"orders\": 4}");
    for (const char* filter : {"jobs", "datasets"})
      if (mode.contains(filter) && !mode[filter].is_array())
        throw ConfigError(origin + ": eval.modes[]." + filter + " must be a list of names, got " + brief(mode[filter]));
    for (const auto& n : mode.value("jobs", json::array()))
      if (!n.is_string() || std::find(job_names.begin(), job_names.end(), n.get<std::string>()) == job_names.end())
        throw ConfigError(origin + ": eval.modes[] " + brief(mode) + ": 'jobs' names " + brief(n) + ", which is no job",
                          "jobs: " + join_names(job_names));
    for (const auto& n : mode.value("datasets", json::array()))
      if (!n.is_string() || !datasets.contains(n.get<std::string>()))
        throw ConfigError(origin + ": eval.modes[] " + brief(mode) + ": 'datasets' names " + brief(n) +
                              ", which is not in eval.datasets",
                          "add it to eval.datasets or fix the name");
  }
}

std::vector<std::pair<std::string, json>> resolve_experiment_jobs(const json& experiment, const Overrides& overrides,
                                                                  const std::string& origin) {
  const json common = experiment.value("common", json::object());
  const std::filesystem::path out_dir = experiment.value("out_dir", std::string());
  std::vector<std::pair<std::string, json>> resolved;
  const json jobs = experiment.value("jobs", json::array());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string where = origin + ": jobs[" + std::to_string(i) + "]";
    const std::string name = jobs[i].is_object() ? jobs[i].value("name", std::string()) : std::string();
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      throw ConfigError(where + ": job name '" + name + "' must be a plain directory name");
    json patch = common;
    if (jobs[i].contains("config")) patch.merge_patch(jobs[i]["config"]);
    patch["train"]["out_dir"] = (out_dir / name).string();
    if (experiment.contains("description")) patch["description"] = experiment["description"];
    resolved.emplace_back(name, resolve_config(patch, overrides, where));
  }
  return resolved;
}

std::string config_summary(const json& config, const std::string& full_path) {
  const bool has_model = config.contains("model") && config["model"].is_object();
  const json& m = has_model ? config["model"] : base_config()["model"];
  const std::string plugin = m.contains("plugin") && m["plugin"].is_string() ? m["plugin"].get<std::string>() : "";
  const std::string flavour = m.contains("flavour") && m["flavour"].is_string() ? m["flavour"].get<std::string>() : "";
  json defaults = base_config();
  try {
    defaults["model"] = flavour_defaults(plugin, flavour);
  } catch (const std::exception&) {  // no such plugin here: every model key counts as changed
  }
  std::vector<std::pair<std::string, json>> leaves, default_leaves;
  flatten_config(config, "", leaves);
  flatten_config(defaults, "", default_leaves);
  const std::map<std::string, json> default_of(default_leaves.begin(), default_leaves.end());
  // section → "key=value" items, in the config's order; values cut at 60 characters.
  std::vector<std::pair<std::string, std::vector<std::string>>> sections;
  for (const auto& [path, value] : leaves) {
    const auto dot = path.find('.');
    if (dot == std::string::npos || path == "model.plugin" || path == "model.flavour") continue;  // description
    const auto d = default_of.find(path);
    if (d != default_of.end() && d->second == value) continue;
    std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > 60) text = text.substr(0, 57) + "...";
    const std::string section = path.substr(0, dot);
    if (sections.empty() || sections.back().first != section) sections.push_back({section, {}});
    sections.back().second.push_back(path.substr(dot + 1) + "=" + text);
  }
  std::ostringstream out;
  out << "config: " << plugin << "/" << flavour << "; keys that differ from the defaults (all keys: " << full_path
      << "):\n";
  if (sections.empty()) out << "  (none)\n";
  for (const auto& [section, items] : sections) {
    std::string line = "  " + section + ":";
    for (const auto& item : items) {
      if (line.size() + 1 + item.size() > 110 && line.size() > section.size() + 3) {
        out << line << "\n";
        line = std::string(section.size() + 3, ' ');
      }
      line += " " + item;
    }
    out << line << "\n";
  }
  return out.str();
}

}  // namespace aobench
