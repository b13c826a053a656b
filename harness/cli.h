// Implements: small helpers shared by the cmd_*.cpp files: option parsing with --help and clear errors,
// and the common --config / --set pair that every command turning a config into work accepts.
#pragma once
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

namespace aobench {

namespace po = boost::program_options;

// Parses `args` against `desc` (plus --help). Returns false when --help was printed.
// Unknown options and bad values become ConfigError naming the option.
bool parse_options(const std::string& usage, po::options_description& desc, const std::vector<std::string>& args,
                   po::variables_map& vm, po::positional_options_description* positional = nullptr);

// Adds --config FILE and --set KEY=VALUE (repeatable).
void add_config_options(po::options_description& desc);
// Resolves the config from --config/--set (see config.h).
nlohmann::json config_from_options(const po::variables_map& vm);

}  // namespace aobench
