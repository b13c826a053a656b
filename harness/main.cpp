// aobench: train and compare language-model paradigms behind one plugin interface.
//
//   aobench list
//   aobench train --config configs/quickstart.json [--set train.max_iters=200]
//   torchrun --standalone --nproc_per_node=8 --no-python build/aobench train --config F   (multi-GPU)
//   aobench eval --run runs/quickstart/gpt --datasets data/wikitext2.bin
//   aobench report runs/quickstart
//
// Every subcommand lives in harness/commands/cmd_<name>.cpp and registers itself (harness/commands.h).
#include <algorithm>
#include <iostream>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "harness/commands.h"

int main(int argc, char** argv) {
  auto& table = aobench::command_table();
  std::sort(table.begin(), table.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  auto usage = [&](std::ostream& out) {
    out << "usage: aobench <command> [options]   (aobench <command> --help for its options)\n\ncommands:\n";
    for (const auto& c : table)
      out << "  " << c.name << std::string(10 - std::min<size_t>(9, c.name.size()), ' ') << c.summary << "\n";
  };
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  if (name == "--version") {
    std::cout << "aobench " << AOBENCH_VERSION << "\n";
    return 0;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const auto& c : table) {
    if (c.name != name) continue;
    try {
      return c.run(args);
    } catch (const aobench::Error& e) {
      std::cerr << "error: " << e.what() << "\n";
      if (!e.hint().empty()) std::cerr << "HINT: " << e.hint() << "\n";
      return e.exit_code();
    } catch (const c10::Error& e) {
      std::cerr << "error: " << e.what_without_backtrace() << "\n";
      return 1;
    } catch (const nlohmann::json::exception& e) {  // a JSON value of an unexpected shape somewhere
      std::cerr << "error: unexpected JSON content: " << e.what() << "\n"
                << "HINT: a config, experiment or results file holds a value of another type than expected\n";
      return 2;
    } catch (const std::bad_alloc&) {
      std::cerr << "error: out of memory in `aobench " << name << "`\n"
                << "HINT: lower the batch size, block size or model size, or free memory\n";
      return 1;
    } catch (const std::exception& e) {
      std::cerr << "error: " << e.what() << "\n";
      return 1;
    }
  }
  std::cerr << "error: unknown command '" << name << "'\n";
  usage(std::cerr);
  return 2;
}
