// Implements: plugin registry (see registry.h).
#include "harness/registry.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>

#include "core/errors.h"

namespace aobench {
namespace fs = std::filesystem;

PluginLibrary load_plugin_library(const std::string& path) {
  // Never unloaded: intentionally leaked so plugin code outlives every object it created.
  auto* lib = new boost::dll::shared_library();
  try {
    lib->load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    delete lib;
    throw PluginError("cannot load plugin library '" + path + "': " + e.what(),
                      "rebuild it with the harness (cmake --build build), or remove it from the plugin directory");
  }
  if (!lib->has("aobench_plugin_api_version") || !lib->has("aobench_create_plugin"))
    throw PluginError(
        "'" + path + "' is not an aobench plugin (no aobench_plugin_api_version symbol)",
        "plugins end with AOBENCH_PLUGIN(YourClass) (see README 'Adding a plugin'); delete a library that "
        "is not one from the plugin directory");
  const uint32_t version = lib->get<uint32_t()>("aobench_plugin_api_version")();
  if (version != kPluginApiVersion)
    throw PluginError("plugin '" + path + "' was built against plugin API version " + std::to_string(version) +
                          ", this harness has API version " + std::to_string(kPluginApiVersion),
                      "rebuild the plugin against this harness's core/plugin_api.h");
  if (!lib->has("aobench_plugin_fingerprint"))
    throw PluginError("plugin '" + path +
                          "' has no aobench_plugin_fingerprint symbol, so its compiler and LibTorch "
                          "cannot be checked against the harness's [" +
                          build_fingerprint() + "]",
                      "rebuild it with the AOBENCH_PLUGIN(YourClass) macro of this harness's plugin_api.h");
  {
    const char* raw = lib->get<const char*()>("aobench_plugin_fingerprint")();
    const std::string fp = raw ? raw : "(null)";
    if (fp != build_fingerprint())
      throw PluginError(
          "plugin '" + path + "' was built with [" + fp + "], the harness with [" + build_fingerprint() + "]",
          "rebuild plugin and harness with the same compiler and LibTorch");
  }
  if (!lib->has("aobench_plugin_default_config"))
    throw PluginError("plugin '" + path + "' has no aobench_plugin_default_config symbol (its default.json)",
                      "rebuild it with the AOBENCH_PLUGIN(YourClass) macro of this harness's plugin_api.h");
  return {lib->get<ModelPlugin*()>("aobench_create_plugin"), lib->get<const char*()>("aobench_plugin_default_config")};
}

// create() of the library at `path`; a library whose factory returns null is refused by name.
static std::unique_ptr<ModelPlugin> create_from(const std::string& path) {
  std::unique_ptr<ModelPlugin> plugin(load_plugin_library(path).create());
  if (!plugin)
    throw PluginError("plugin '" + path + "': aobench_create_plugin() returned null",
                      "the plugin's constructor must succeed; rebuild it, or remove it from the plugin directory");
  return plugin;
}

PluginRegistry& PluginRegistry::instance() {
  static PluginRegistry registry;
  return registry;
}

std::vector<std::string> PluginRegistry::search_dirs() const {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("AOBENCH_PLUGIN_PATH"); env && *env) {
    std::stringstream ss(env);
    for (std::string d; std::getline(ss, d, ':');)
      if (!d.empty()) dirs.push_back(d);
  } else {
    dirs.push_back(boost::dll::program_location().parent_path().string());
  }
  return dirs;
}

void PluginRegistry::scan() {
  scanned_ = true;
  const auto dirs = search_dirs();
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
      throw PluginError("plugin directory '" + dir + "' does not exist",
                        "set AOBENCH_PLUGIN_PATH to the folder holding libaobench_<name>.so (normally build/)");
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string f = e.path().filename().string();
      if (f.rfind("libaobench_", 0) == 0 && e.path().extension() == ".so") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const std::string stem = f.stem().string();  // libaobench_<name>
      const std::string name = stem.substr(std::string("libaobench_").size());
      if (std::any_of(entries_.begin(), entries_.end(), [&](const PluginEntry& p) { return p.name == name; }))
        continue;  // earlier directories win
      std::unique_ptr<ModelPlugin> probe = create_from(f.string());
      entries_.push_back({name, f.string(), probe->info(), load_plugin_library(f.string()).default_config});
    }
  }
}

const std::vector<PluginEntry>& PluginRegistry::plugins() {
  if (!scanned_) scan();
  return entries_;
}

std::unique_ptr<ModelPlugin> PluginRegistry::create(const std::string& name) { return create_from(entry(name).path); }

const PluginEntry& PluginRegistry::entry(const std::string& name) {
  for (const auto& e : plugins())
    if (e.name == name) return e;
  std::vector<std::string> names;
  for (const auto& e : entries_) names.push_back(e.name);
  const std::string near = closest_name(name, names);
  throw PluginError("unknown plugin '" + name + "'",
                    (near.empty() ? std::string() : "did you mean '" + near + "'? ") + "available: " +
                        (names.empty() ? "(none found in " + join_names(search_dirs()) + ")" : join_names(names)));
}

nlohmann::json flavour_defaults(const std::string& plugin, const std::string& flavour) {
  const nlohmann::json defaults = nlohmann::json::parse(PluginRegistry::instance().entry(plugin).default_config());
  const auto& flavours = defaults.at("flavours");
  if (!flavours.contains(flavour)) {
    std::vector<std::string> names;
    for (auto it = flavours.begin(); it != flavours.end(); ++it) names.push_back(it.key());
    const std::string near = closest_name(flavour, names);
    throw ConfigError(
        "plugin '" + plugin + "' has no flavour '" + flavour + "' (model.flavour)",
        (near.empty() ? std::string() : "did you mean '" + near + "'? ") + "flavours: " + join_names(names));
  }
  nlohmann::json m = flavours[flavour];
  m["plugin"] = plugin;
  m["flavour"] = flavour;
  return m;
}

}  // namespace aobench
