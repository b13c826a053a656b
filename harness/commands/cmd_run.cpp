// Implements: `aobench run EXPERIMENT.json [--set k=v]... [--jobs a,b] [--force]` — an experiment file loaded and
// checked (harness/experiment/experiment.h), then carried out: prepare → train → eval → generation → report
// (harness/experiment/runner.h, DESIGN.md §4).
#include <iostream>

#include "core/errors.h"
#include "harness/cli.h"
#include "harness/commands.h"
#include "harness/experiment/experiment.h"
#include "harness/experiment/plan.h"
#include "harness/experiment/runner.h"

namespace aobench {

namespace {

const char* kUsage =
    "aobench run EXPERIMENT.json [--set tier=T] [--set seeds=N] [--set runs_per_device=N] [--set key.path=value]... "
    "[--set paths.NAME=DIR] [--jobs NAME[,NAME]...] [--force] [--prepare-only] [--plan [--gpu NAME]]";

int cmd_run(const std::vector<std::string>& args) {
  std::string origin;
  RunOptions options;
  bool plan = false;
  std::string gpu;
  po::options_description desc("run options");
  desc.add_options()("experiment", po::value(&origin)->required(), "experiment JSON file")(
      "set,s", po::value(&options.sets)->composing(), "override a key of every job (repeatable)")(
      "jobs", po::value(&options.jobs)->composing(),
      "run only these jobs (comma-separated or repeated; a job names all its seeds, JOB_seedK one); the report "
      "shows every job of the folder, one still training elsewhere with its steps so far")(
      "force", po::bool_switch(&options.force),
      "redo prepared data, training and evals even when finished (with --jobs: only those jobs, not the data)")(
      "lane", po::bool_switch(&options.lane),
      "train and evaluate the --jobs runs only, without the experiment's lock, generation or report: how a run "
      "started with runs_per_device trains its runs in child processes")(
      "prepare-only", po::bool_switch(&options.prepare_only),
      "prepare the data, write each run's training config to <out_dir>/configs/<run>.json and stop (to train "
      "them elsewhere, e.g. with torchrun on a cluster; a later run without it evaluates and reports)")(
      "plan", po::bool_switch(&plan),
      "print what the experiment will cost (parameters, tokens, FLOPs, peak memory, GPU-hours per job and in all) "
      "and stop: nothing is read, written or trained")(
      "gpu", po::value(&gpu), "with --plan: the GPU to plan for (e.g. H100; default: the one here, else an H200)");
  po::positional_options_description pos;
  pos.add("experiment", 1);
  po::variables_map vm;
  if (!parse_options(kUsage, desc, args, vm, &pos)) return 0;
  if (!gpu.empty() && !plan) throw ConfigError("--gpu belongs to --plan", "add --plan, or drop --gpu");
  if (plan && (!options.jobs.empty() || options.force || options.lane || options.prepare_only))
    throw ConfigError("--plan plans every job of the file and runs nothing",
                      "drop --jobs, --force, --lane and --prepare-only");
  if (options.prepare_only && options.lane) throw ConfigError("--prepare-only trains nothing", "drop --lane");
  const Experiment experiment = load_experiment(origin, options.sets);
  if (plan) {
    std::cout << plan_experiment(experiment, gpu).text();
    return 0;
  }
  return run_experiment(experiment, options);
}

}  // namespace

AOBENCH_COMMAND("run", kUsage, "every job of an experiment: prepare, train, eval, report; skips finished work",
                cmd_run);

}  // namespace aobench
