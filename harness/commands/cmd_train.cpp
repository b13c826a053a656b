// Implements: `aobench train --config F [--set k=v]... [--resume]` (DESIGN.md §4): resolves the config,
// runs the trainer, and exits 130 / 143 after a SIGINT / SIGTERM (checkpoint written first).
#include <iostream>

#include "harness/cli.h"
#include "harness/commands.h"
#include "harness/train/trainer.h"

namespace aobench {

static int cmd_train(const std::vector<std::string>& args) {
  const std::string usage = "aobench train --config F [--set k=v]... [--resume | --resume-with-changes]";
  po::options_description desc("train options");
  add_config_options(desc);
  desc.add_options()("resume", "continue from the newest checkpoint of train.out_dir")(
      "resume-with-changes", "--resume even though the config differs from the checkpoint's (listed at --resume)");
  po::variables_map vm;
  if (!parse_options(usage, desc, args, vm)) return 0;
  const nlohmann::json config = config_from_options(vm);
  const bool with_changes = vm.count("resume-with-changes") > 0;
  const TrainSummary s = run_training(config, vm.count("resume") > 0 || with_changes, with_changes);
  return s.interrupted ? 128 + s.signal : 0;
}

AOBENCH_COMMAND("train", "aobench train --config F [--set k=v]... [--resume | --resume-with-changes]",
                "train one model (resumable; SIGINT writes a checkpoint)", cmd_train);

}  // namespace aobench
