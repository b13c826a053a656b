// Implements: the subcommand table. Each command lives in its own cmd_<name>.cpp and registers itself
// with AOBENCH_COMMAND, so adding a command touches no central list.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace aobench {

struct Command {
  std::string name;
  std::string usage;                                             // one line: "aobench train --config F [--set k=v]..."
  std::string summary;                                           // one line for `aobench --help`
  std::function<int(const std::vector<std::string>& args)> run;  // args exclude the command name
};

std::vector<Command>& command_table();
struct CommandRegistrar {
  explicit CommandRegistrar(Command c) { command_table().push_back(std::move(c)); }
};

}  // namespace aobench

#define AOBENCH_COMMAND_CAT2(a, b) a##b
#define AOBENCH_COMMAND_CAT(a, b) AOBENCH_COMMAND_CAT2(a, b)
#define AOBENCH_COMMAND(...) \
  static ::aobench::CommandRegistrar AOBENCH_COMMAND_CAT(aobench_command_, __LINE__)(::aobench::Command{__VA_ARGS__})
