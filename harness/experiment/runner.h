// Implements: `aobench run`'s work over a loaded Experiment (experiment.h): prepare the datasets → train every
// run → evaluate each in each eval mode → generation stages → report, each step through the library function
// behind its command (datasets/prepare.h, run_training, harness/tasks.h), with configs and overrides passed
// as values, never as command-line text. Work is idempotent: <out_dir>/<run>/DONE.json records finished
// training (with the resolved config it used) and evals, so a re-run skips them (force redoes everything); a
// finished run whose resolved config has changed since is refused with the differences, never skipped with
// stale results, and a killed run resumes its training from the latest checkpoint. `jobs` runs only those jobs
// or runs, so one experiment can be spread over processes or machines sharing the folder. Locks: each run's
// work holds <out_dir>/.job_<run>.lock (a second process on the same run fails at once); the experiment's
// <out_dir>/.lock is held for the whole run without `jobs`, and with `jobs` only while preparing the data
// (waiting for a holder), so runs of disjoint jobs proceed side by side; their reports take turns under
// run_report's own lock. With runs_per_device N or several GPUs, the runs still to train are trained by child
// processes (lanes.h), several per GPU, before the steps after training.
#pragma once
#include <string>
#include <vector>

#include "harness/experiment/experiment.h"

namespace aobench {

struct RunOptions {
  std::vector<std::string> jobs;  // job or run names to work on; empty = every run
  bool force = false;             // redo prepared data (not with `jobs`), training and evals
  bool lane = false;              // a lane's child: train and evaluate `jobs` only (lanes.h)
  bool prepare_only = false;      // prepare the data, write <out_dir>/configs/<run>.json per run, and stop
  std::vector<std::string> sets;  // the --set list as given: the lanes' children get it too
};

// Carries out `exp`; prints each step, then the report's headline, verdicts and what was done. Returns the
// exit status: 0, or 128 + the signal when interrupted (re-running resumes).
int run_experiment(const Experiment& exp, const RunOptions& options);

}  // namespace aobench
