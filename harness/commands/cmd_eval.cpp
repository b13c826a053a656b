// Implements: `aobench eval`: its command line parsed into an EvalTask for run_eval (harness/tasks/eval.cpp).
#include "core/errors.h"
#include "harness/cli.h"
#include "harness/commands.h"
#include "harness/tasks.h"

namespace aobench {

namespace {

int cmd_eval(const std::vector<std::string>& args) {
  po::options_description desc("eval options");
  desc.add_options()("run", po::value<std::string>(), "run directory (has checkpoints/)")(
      "hf", po::value<std::string>(),
      "a Hugging Face GPT-2 folder (config.json + model.safetensors) instead of a "
      "run; results go to runs/hf/<folder name>/ unless --out")("checkpoint", po::value<std::string>(),
                                                                "a checkpoint directory (default: the run's latest)")(
      "data", po::value<std::vector<std::string>>()->composing(),
      "NAME=PATH.bin (repeatable; default with --run: the run's data.val)")(
      "set,s", po::value<std::vector<std::string>>()->composing(), "override an eval.* key (repeatable)")(
      "out", po::value<std::string>(),
      "results file to merge into (default RUN_DIR/results.json; - = standard output)")(
      "throughput", po::bool_switch(), "only measure L2R forward tokens/s on the first --data file");
  po::variables_map vm;
  if (!parse_options(kEvalUsage, desc, args, vm)) return 0;
  EvalTask task;
  if (vm.count("run")) task.run_dir = vm["run"].as<std::string>();
  if (vm.count("hf")) task.hf_folder = vm["hf"].as<std::string>();
  if (vm.count("checkpoint")) task.checkpoint = vm["checkpoint"].as<std::string>();
  if (vm.count("out")) task.out = vm["out"].as<std::string>();
  if (vm.count("data"))
    for (const auto& d : vm["data"].as<std::vector<std::string>>()) {
      const auto eq = d.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == d.size() || d.substr(0, eq).find('/') != std::string::npos)
        throw ConfigError("--data '" + d + "' is not NAME=PATH.bin",
                          "example: --data wikitext2=data/wt2.bin "
                          "(NAME without '/')");
      for (const auto& [name, path] : task.datasets)
        if (name == d.substr(0, eq))
          throw ConfigError("--data name '" + name + "' is given twice (" + path + " and " + d.substr(eq + 1) + ")",
                            "each dataset needs its own NAME; its metrics are stored as NAME/<metric>");
      task.datasets.emplace_back(d.substr(0, eq), d.substr(eq + 1));
    }
  task.overrides = set_overrides(vm);
  task.throughput = vm["throughput"].as<bool>();
  run_eval(task);
  return 0;
}

}  // namespace

AOBENCH_COMMAND("eval", kEvalUsage, "held-out likelihood (l2r / random orders / ensemble / ELBO) of a run", cmd_eval);

}  // namespace aobench
