// Implements: small helpers shared by the cmd_*.cpp files: option parsing with --help and clear errors,
// and the common --config / --set pair that every command turning a config into work accepts.
#pragma once
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "core/config.h"

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
// The --set options of `vm` (repeatable "--set", none: empty), parsed once.
Overrides set_overrides(const po::variables_map& vm);

// `--out -`: the command's data goes to standard output, so while this lives (and `active`) std::cout — its
// tables and messages — writes to standard error instead.
class CoutToStderr {
 public:
  explicit CoutToStderr(bool active) : saved_(active ? std::cout.rdbuf(std::cerr.rdbuf()) : nullptr) {}
  ~CoutToStderr() {
    if (saved_) std::cout.rdbuf(saved_);
  }
  CoutToStderr(const CoutToStderr&) = delete;
  CoutToStderr& operator=(const CoutToStderr&) = delete;

 private:
  std::streambuf* saved_;
};

}  // namespace aobench
