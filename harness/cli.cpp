// Implements: CLI helpers (see cli.h) and the command table.
#include "harness/cli.h"

#include <iostream>

#include "core/config.h"
#include "core/errors.h"
#include "harness/commands.h"
#include "harness/resolve_config.h"

namespace aobench {

std::vector<Command>& command_table() {
  static std::vector<Command> table;
  return table;
}

bool parse_options(const std::string& usage, po::options_description& desc, const std::vector<std::string>& args,
                   po::variables_map& vm, po::positional_options_description* positional) {
  desc.add_options()("help,h", "show this help");
  try {
    // No prefix guessing: `--resum` must be an error, not --resume.
    auto parser = po::command_line_parser(args).options(desc).style(po::command_line_style::default_style &
                                                                    ~po::command_line_style::allow_guessing);
    if (positional) parser.positional(*positional);
    po::store(parser.run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: " << usage << "\n\n" << desc << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(std::string("command line: ") + e.what(), "usage: " + usage);
  }
  return true;
}

void add_config_options(po::options_description& desc) {
  desc.add_options()("config,c", po::value<std::string>(), "experiment/config JSON file")(
      "set,s", po::value<std::vector<std::string>>()->composing(),
      "override one key: --set train.max_iters=200 (repeatable)");
}

Overrides set_overrides(const po::variables_map& vm) {
  return Overrides::from_sets(vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>());
}

nlohmann::json config_from_options(const po::variables_map& vm) {
  nlohmann::json experiment = nlohmann::json::object();
  std::string origin = "--set";
  if (vm.count("config")) {
    origin = vm["config"].as<std::string>();
    experiment = load_json_file(origin);
    // An experiment file (configs/quickstart.json, configs/experiments/*) holds several jobs: not a config.
    if (experiment.is_object() && experiment.contains("jobs"))
      throw ConfigError("'" + origin + "' is an experiment file (it has \"jobs\"), not a training config",
                        "use `aobench run " + origin +
                            "` to prepare, train, evaluate and report every job "
                            "(--set train.max_iters=N applies to all of them)");
  }
  return resolve_config(experiment, set_overrides(vm), origin);
}

}  // namespace aobench
