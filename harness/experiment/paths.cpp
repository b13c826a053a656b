// Implements: the paths of an experiment file (harness/experiment/paths.h).
#include "harness/experiment/paths.h"

#include <cctype>
#include <filesystem>
#include <iostream>

#include "core/errors.h"
#include "datasets/data_dir.h"

namespace aobench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kHint =
    "paths start with {data}/, {out_dir}/, {here}/ or {NAME}/ of the file's \"paths\", or are relative to the "
    "experiment file";

bool is_path_name(const std::string& name) {
  if (name.empty() || !(std::islower(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char c : name)
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  return name != "data" && name != "out_dir" && name != "here";
}

// The file's "paths", each resolved (they may start with {data} or {here}); ConfigError naming a bad one.
std::map<std::string, std::string> named_paths(const json& exp, const std::string& origin) {
  std::map<std::string, std::string> named;
  if (!exp.contains("paths")) return named;
  if (!exp["paths"].is_object())
    throw ConfigError(origin + ": 'paths' must be an object {NAME: PATH}, got " + exp["paths"].dump(),
                      "e.g. \"paths\": {\"openwebtext\": \"{data}/openwebtext\"}, used as {openwebtext}/…");
  for (auto it = exp["paths"].begin(); it != exp["paths"].end(); ++it) {
    const std::string key = "paths." + it.key();
    if (!is_path_name(it.key()))
      throw ConfigError(origin + ": " + key + ": a path name is lower case letters, digits and _",
                        "data, out_dir and here are taken");
    if (!it.value().is_string() || it.value().get<std::string>().empty())
      throw ConfigError(origin + ": " + key + " must be a non-empty path, got " + it.value().dump(), kHint);
    named[it.key()] = resolve_experiment_path(it.value().get<std::string>(), nullptr, origin, key);
  }
  return named;
}

}  // namespace

std::string resolve_experiment_path(const std::string& path, const std::string* out_dir, const std::string& origin,
                                    const std::string& key, const std::map<std::string, std::string>* named) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  const fs::path here = fs::path(origin).parent_path();
  std::string rest = path;
  fs::path root = here;
  if (path[0] == '{') {
    const size_t close = path.find('}');
    const std::string name = path.substr(0, close == std::string::npos ? path.size() : close + 1);
    rest = close == std::string::npos ? "" : path.substr(close + 1);
    if (!rest.empty() && rest[0] != '/')
      throw ConfigError(origin + ": " + key + " = \"" + path + "\": a placeholder is followed by '/'", kHint);
    if (!rest.empty()) rest.erase(0, 1);
    if (name == "{data}") {
      const std::string data = shared_data_dir();
      if (data.empty()) return path;  // refused where it is read (require_data_folder)
      root = data;
    } else if (name == "{out_dir}") {
      if (!out_dir) return path;
      root = *out_dir;
    } else if (name == "{here}") {
      root = here;
    } else if (named && named->count(name.substr(1, name.size() - 2))) {
      root = named->at(name.substr(1, name.size() - 2));
    } else {
      throw ConfigError(origin + ": " + key + " = \"" + path + "\": unknown placeholder " + name, kHint);
    }
  } else if (path.rfind("runs/", 0) == 0) {
    // Files written before the placeholders named runs/ of the working directory this way.
    std::cerr << "warning: " << origin << ": " << key << " = \"" << path << "\" is relative to the file's folder ("
              << (here / path).lexically_normal().string()
              << "); write {out_dir}/… for the experiment's folder under the working directory\n";
  }
  const fs::path joined = rest.empty() ? root : root / rest;
  std::string out = joined.lexically_normal().string();
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out.empty() ? "." : out;
}

void require_data_folder(const std::string& path, const std::string& where) {
  if (path.rfind("{data}", 0) != 0) return;
  throw ConfigError(where + ": \"" + path + "\" needs the shared data folder, and there is none (looked in " +
                        shared_data_dir_rule() + ")",
                    "set AOBENCH_DATA_DIR to the folder that holds gpt2/, train/, wikitext/ …");
}

json resolve_experiment_paths(json exp, const std::string& origin, bool keep_out_dir) {
  std::string out_dir;
  if (exp.contains("out_dir") && exp["out_dir"].is_string()) {
    out_dir = exp["out_dir"].get<std::string>();
    for (const char* other : {"{data}", "{out_dir}"})
      if (out_dir.rfind(other, 0) == 0)
        throw ConfigError(origin + ": out_dir = \"" + out_dir + "\": " + other + " cannot place the out_dir",
                          "out_dir is relative to the working directory, or starts with {here}/");
    if (out_dir.rfind("{here}", 0) == 0) out_dir = resolve_experiment_path(out_dir, nullptr, origin, "out_dir");
    exp["out_dir"] = out_dir;
  }
  const std::string* out = keep_out_dir ? nullptr : &out_dir;
  const std::map<std::string, std::string> named = named_paths(exp, origin);
  if (!named.empty()) exp["paths"] = named;
  // A path or a list of them, in place; `key` names it in errors.
  auto resolve = [&](json& value, const std::string& key) {
    auto one = [&](json& v, const std::string& k) {
      if (!v.is_string()) throw ConfigError(origin + ": " + k + " must be a path (a string), got " + v.dump(), kHint);
      v = resolve_experiment_path(v.get<std::string>(), out, origin, k, &named);
    };
    if (!value.is_array()) return one(value, key);
    for (size_t i = 0; i < value.size(); ++i) one(value[i], key + "[" + std::to_string(i) + "]");
  };
  auto data_paths = [&](json& config, const std::string& where) {
    if (!config.is_object() || !config.contains("data") || !config["data"].is_object()) return;
    for (const char* k : {"train", "val"})
      if (config["data"].contains(k)) resolve(config["data"][k], where + ".data." + k);
  };
  if (exp.contains("prepare") && exp["prepare"].is_array())
    for (size_t i = 0; i < exp["prepare"].size(); ++i) {
      json& entry = exp["prepare"][i];
      if (!entry.is_object()) continue;  // cmd_run names the wrong type
      for (const char* k : {"input", "output", "val_output", "val-output", "vocab-dir", "vocab_dir"})
        if (entry.contains(k)) resolve(entry[k], "prepare[" + std::to_string(i) + "]." + k);
    }
  if (exp.contains("common")) data_paths(exp["common"], "common");
  if (exp.contains("jobs") && exp["jobs"].is_array())
    for (size_t i = 0; i < exp["jobs"].size(); ++i)
      if (exp["jobs"][i].is_object() && exp["jobs"][i].contains("config"))
        data_paths(exp["jobs"][i]["config"], "jobs[" + std::to_string(i) + "].config");
  if (exp.contains("eval") && exp["eval"].is_object() && exp["eval"].contains("datasets") &&
      exp["eval"]["datasets"].is_object())
    for (auto it = exp["eval"]["datasets"].begin(); it != exp["eval"]["datasets"].end(); ++it)
      resolve(it.value(), "eval.datasets." + it.key());
  // A judge is a job of the experiment (a name) or a run folder / Hugging Face model (a path): `section`'s.
  auto resolve_judge = [&](json& section, const std::string& key) {
    if (section.is_object() && section.contains("judge") && section["judge"].is_string() &&
        section["judge"].get<std::string>().find('/') != std::string::npos)
      resolve(section["judge"], key);
  };
  if (exp.contains("eval") && exp["eval"].is_object() && exp["eval"].contains("modes") &&
      exp["eval"]["modes"].is_array())
    for (size_t i = 0; i < exp["eval"]["modes"].size(); ++i)
      if (exp["eval"]["modes"][i].is_object() && exp["eval"]["modes"][i].contains("infill"))
        resolve_judge(exp["eval"]["modes"][i]["infill"], "eval.modes[" + std::to_string(i) + "].infill.judge");
  if (exp.contains("generation")) resolve_judge(exp["generation"], "generation.judge");
  return exp;
}

void apply_path_settings(json& exp, std::vector<std::string>& sets, const std::string& origin) {
  for (auto it = sets.begin(); it != sets.end();) {
    if (it->rfind("paths.", 0) != 0) {
      ++it;
      continue;
    }
    const size_t eq = it->find('=');
    const std::string name = it->substr(6, eq == std::string::npos ? std::string::npos : eq - 6);
    const std::string value = eq == std::string::npos ? "" : it->substr(eq + 1);
    if (!exp.contains("paths") || !exp["paths"].is_object() || !exp["paths"].contains(name)) {
      std::string names;
      if (exp.contains("paths") && exp["paths"].is_object())
        for (auto p = exp["paths"].begin(); p != exp["paths"].end(); ++p)
          names += (names.empty() ? "" : ", ") + p.key();
      throw ConfigError("--set " + *it + ": " + origin + " declares no path '" + name + "'",
                        names.empty() ? "this file has no \"paths\"" : "its paths: " + names);
    }
    if (value.empty())
      throw ConfigError("--set " + *it + ": the path is empty", "e.g. --set paths." + name + "=/scratch/" + name);
    // Relative to the working directory, as on any command line; "{name}/…" stays a placeholder.
    const bool keep = fs::path(value).is_absolute() || value[0] == '{';
    exp["paths"][name] = keep ? value : fs::absolute(value).lexically_normal().string();
    it = sets.erase(it);
  }
}

}  // namespace aobench
