// Implements: `aobench genppl`: its command line parsed into a GenpplTask for run_genppl (harness/tasks/genppl.cpp).
#include "core/errors.h"
#include "harness/cli.h"
#include "harness/commands.h"
#include "harness/tasks.h"

namespace aobench {

namespace {

int cmd_genppl(const std::vector<std::string>& args) {
  po::options_description desc("genppl options");
  desc.add_options()("samples", po::value<std::string>()->required(), "JSONL written by aobench sample")(
      "judge", po::value<std::string>()->required(), "Hugging Face GPT-2 folder or aobench gpt run")(
      "run", po::value<std::string>(), "run directory whose results.json receives the numbers")(
      "set,s", po::value<std::vector<std::string>>()->composing(), "override a genppl.* key (repeatable)");
  po::positional_options_description pos;
  pos.add("samples", 1);
  po::variables_map vm;
  if (!parse_options(kGenpplUsage, desc, args, vm, &pos)) return 0;
  GenpplTask task;
  task.samples = vm["samples"].as<std::string>();
  task.judge = vm["judge"].as<std::string>();
  if (vm.count("run")) task.run_dir = vm["run"].as<std::string>();
  task.overrides = set_overrides(vm);
  run_genppl(task);
  return 0;
}

}  // namespace

AOBENCH_COMMAND("genppl", kGenpplUsage, "generative perplexity of samples under a GPT-2 judge (HF folder or gpt run)",
                cmd_genppl);

}  // namespace aobench
