// Implements: `aobench import`: its command line parsed into an ImportTask for run_import (harness/import/import.h).
#include "core/errors.h"
#include "harness/cli.h"
#include "harness/commands.h"
#include "harness/import/import.h"

namespace aobench {

namespace {

int cmd_import(const std::vector<std::string>& args) {
  po::options_description desc("import options");
  desc.add_options()("model", po::value<std::string>()->required(),
                     "the authors' model the checkpoint holds: ao_gpt | sigma_gpt | sedd | radd")(
      "from", po::value<std::string>()->required(),
      "a folder written by scripts/convert_torch_checkpoint.py, or a Hugging Face folder (config.json + "
      "model.safetensors)")("out", po::value<std::string>()->required(), "the run folder to write")(
      "config", po::value<std::string>(), "SEDD / RADD: their config as JSON (default FROM/config.json)")(
      "set,s", po::value<std::vector<std::string>>()->composing(),
      "data.tokenizer, model.* keys the checkpoint does not fix (model.vocab_size), train.device, train.dtype, "
      "eval.*, sample.* (repeatable)")("force", po::bool_switch(), "replace RUN_DIR if it exists");
  po::variables_map vm;
  if (!parse_options(kImportUsage, desc, args, vm)) return 0;
  ImportTask task;
  task.model = vm["model"].as<std::string>();
  task.from = vm["from"].as<std::string>();
  task.out = vm["out"].as<std::string>();
  if (vm.count("config")) task.config = vm["config"].as<std::string>();
  task.overrides = set_overrides(vm);
  task.force = vm["force"].as<bool>();
  run_import(task);
  return 0;
}

}  // namespace

AOBENCH_COMMAND("import", kImportUsage,
                "an authors' AO-GPT / sigma-GPT / SEDD / RADD checkpoint as a run folder (mapped by name)", cmd_import);

}  // namespace aobench
