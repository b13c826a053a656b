// Implements: `aobench list` — every plugin found, with version and paradigm.
#include <iomanip>
#include <iostream>

#include "harness/cli.h"
#include "harness/commands.h"
#include "harness/registry.h"

namespace aobench {

static int cmd_list(const std::vector<std::string>& args) {
  po::options_description desc("list options");
  po::variables_map vm;
  if (!parse_options("aobench list", desc, args, vm)) return 0;
  auto& reg = PluginRegistry::instance();
  const auto& plugins = reg.plugins();
  std::cout << std::left << std::setw(12) << "plugin" << std::setw(10) << "version" << std::setw(26) << "paradigm"
            << "summary\n";
  for (const auto& p : plugins)
    std::cout << std::left << std::setw(12) << p.name << std::setw(10) << p.info.version << std::setw(26)
              << to_string(p.info.paradigm) << p.info.summary << "\n";
  if (plugins.empty()) std::cout << "(no plugins in " << join_names(reg.search_dirs()) << ")\n";
  return 0;
}

AOBENCH_COMMAND("list", "aobench list", "plugins found, their version and paradigm", cmd_list);

}  // namespace aobench
