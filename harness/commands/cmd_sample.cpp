// Implements: `aobench sample`: its command line parsed into a SampleTask for run_sample (harness/tasks/sample.cpp).
#include "core/errors.h"
#include "harness/cli.h"
#include "harness/commands.h"
#include "harness/tasks.h"

namespace aobench {

namespace {

int cmd_sample(const std::vector<std::string>& args) {
  po::options_description desc("sample options");
  desc.add_options()("run", po::value<std::string>()->required(), "run directory (has checkpoints/)")(
      "checkpoint", po::value<std::string>(), "a checkpoint directory (default: the run's latest)")(
      "set,s", po::value<std::vector<std::string>>()->composing(), "override a sample.* key (repeatable)")(
      "prompt-file", po::value<std::string>(), "JSONL prompts: {\"ids\": [...]} (-1/null = free) or {\"text\": ...}")(
      "out", po::value<std::string>(),
      "output JSONL (default RUN_DIR/samples/<protocol>_seed<seed>.jsonl; - = standard output)")(
      "print", po::bool_switch(),
      "also print every sample's text (prompt tokens inside «…», control characters escaped)");
  po::variables_map vm;
  if (!parse_options(kSampleUsage, desc, args, vm)) return 0;
  SampleTask task;
  task.run_dir = vm["run"].as<std::string>();
  if (vm.count("checkpoint")) task.checkpoint = vm["checkpoint"].as<std::string>();
  task.overrides = set_overrides(vm);
  if (vm.count("prompt-file")) task.prompt_file = vm["prompt-file"].as<std::string>();
  if (vm.count("out")) task.out = vm["out"].as<std::string>();
  task.print = vm["print"].as<bool>();
  run_sample(task);
  return 0;
}

}  // namespace

AOBENCH_COMMAND("sample", kSampleUsage,
                "samples of a run as JSONL (ids, text, order, seed, settings); prompts, infilling", cmd_sample);

}  // namespace aobench
