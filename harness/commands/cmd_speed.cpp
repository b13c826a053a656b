// Implements: `aobench speed`: its command line parsed into a SpeedTask for run_speed (harness/tasks/speed.cpp).
#include "core/errors.h"
#include "harness/cli.h"
#include "harness/commands.h"
#include "harness/tasks.h"

namespace aobench {

namespace {

int cmd_speed(const std::vector<std::string>& args) {
  po::options_description desc("speed options");
  desc.add_options()("run", po::value<std::string>(), "run directory to time (its weights, EMA when sample.ema)")(
      "set,s", po::value<std::vector<std::string>>()->composing(),
      "speed.* / sample.* keys; without --run also model.* and train.device / train.dtype (repeatable)")(
      "out", po::value<std::string>(),
      "results file to merge into (default RUN_DIR/results.json, or "
      "speed_<plugin>_<flavour>.json; - = standard output)");
  po::variables_map vm;
  if (!parse_options(kSpeedUsage, desc, args, vm)) return 0;
  SpeedTask task;
  if (vm.count("run")) task.run_dir = vm["run"].as<std::string>();
  task.overrides = set_overrides(vm);
  if (vm.count("out")) task.out = vm["out"].as<std::string>();
  run_speed(task);
  return 0;
}

}  // namespace

AOBENCH_COMMAND("speed", kSpeedUsage, "wall-clock generation time vs sampling steps (warm-up excluded, mean ± sd)",
                cmd_speed);

}  // namespace aobench
