// Implements: plugin discovery and loading (DESIGN.md §3).
// Scans the plugin directory (next to the binary, or AOBENCH_PLUGIN_PATH, ':'-separated) for
// libaobench_<name>.so, checks the API version and build fingerprint before anything else, and keeps
// every library loaded until process exit (models must never outlive their code).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/plugin_api.h"

namespace aobench {

struct PluginEntry {
  std::string name;  // from the file name libaobench_<name>.so
  std::string path;
  PluginInfo info;
  const char* (*default_config)();  // the library's default.json text (aobench_plugin_default_config)
};

class PluginRegistry {
 public:
  // The process-wide registry; scans on first use.
  static PluginRegistry& instance();

  const std::vector<PluginEntry>& plugins();
  // A fresh plugin object. Unknown names raise PluginError with "did you mean …? available: …".
  std::unique_ptr<ModelPlugin> create(const std::string& name);
  // The entry of `name`; unknown names as create().
  const PluginEntry& entry(const std::string& name);
  // Directories searched, in order.
  std::vector<std::string> search_dirs() const;

 private:
  PluginRegistry() = default;
  void scan();
  bool scanned_ = false;
  std::vector<PluginEntry> entries_;
};

// Loads one library by path with all checks; used by the registry and by tests of bad plugins.
// Returns its factory and default config; the library stays loaded for the life of the process.
using CreatePluginFn = ModelPlugin* (*)();
struct PluginLibrary {
  CreatePluginFn create;
  const char* (*default_config)();
};
PluginLibrary load_plugin_library(const std::string& path);

// model section defaults for (plugin, flavour): the flavour's keys plus "plugin" and "flavour".
nlohmann::json flavour_defaults(const std::string& plugin, const std::string& flavour);

}  // namespace aobench
