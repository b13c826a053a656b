// Implements: lanes — the runs of an experiment trained side by side, several per device.
//   "runs_per_device": N   (top level or in a tier patch; `aobench run FILE --set runs_per_device=N`; default 1)
// A device is a GPU that `aobench run` sees, or the CPU on a machine without one. With more than one lane
// (devices × N) and more than one run left to train, `aobench run` trains those runs in child processes,
// `aobench run FILE --lane --jobs RUN [the same --set and --force]` (train and evaluate that run only), at most N at
// once per device, each pinned to its GPU with CUDA_VISIBLE_DEVICES and writing to <out_dir>/logs/<run>.log; then
// it evaluates what is left, generates (speed is never timed beside other work) and reports in its own process.
// A tiny training leaves most of an H200 idle, so its tier packs several (the measurement: docs/results/plateau/),
// and their kernels run side by side through MPS (gpu_sharing.h).
#pragma once
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace aobench {

inline constexpr int kMaxRunsPerDevice = 64;

// Removes every "runs_per_device=N" from `sets` and returns N (0 when none); ConfigError naming a bad value.
int take_runs_per_device_setting(std::vector<std::string>& sets);

// `from_set` when > 0, else the experiment's "runs_per_device" (default 1); ConfigError naming `origin` and
// the value when it is no integer in [1, kMaxRunsPerDevice].
int experiment_runs_per_device(const nlohmann::json& experiment, int from_set, const std::string& origin);

// The value of CUDA_VISIBLE_DEVICES for each device a child may be pinned to: for `gpus` > 0 the first `gpus`
// entries of `visible` (the parent's CUDA_VISIBLE_DEVICES, split at commas; "0", "1", ... past its end); for none,
// one device "" (the CPU: the variable is left as it is). Pure.
std::vector<std::string> lane_devices(int gpus, const std::vector<std::string>& visible);

// What train_in_lanes did.
struct LaneOutcome {
  std::vector<std::string> trained;                 // runs whose child exited 0, in the order they finished
  std::vector<std::pair<std::string, int>> failed;  // run, exit status (128 + N: killed by signal N)
  int signal = 0;                                   // SIGINT / SIGTERM received (forwarded to the children)
};

// How the children share a GPU (gpu_sharing.h): added to each child's environment, and said after the first line.
struct LaneSharing {
  std::vector<std::string> env;  // "NAME=value"
  std::string said;              // "MPS (a private control daemon; pipes in …)"; "" says nothing
};

// Trains each of `runs` in a child `child_argv + {"--jobs", run}` (child_argv[0]: the aobench executable), at
// most `per_device` at once on each of `devices` (lane_devices), a new one starting as soon as one ends, its
// output appended to <log_dir>/<run>.log. Prints a line per start and end, and the last lines of a failed
// run's log. A SIGINT / SIGTERM is passed on to every running child (which checkpoints and stops, as `aobench
// train` does), and no further run starts; a second one is passed on again (the children exit at once).
// CPU children share the cores: each gets OMP_NUM_THREADS = cores / per_device unless the variable is set.
LaneOutcome train_in_lanes(const std::vector<std::string>& runs, const std::vector<std::string>& child_argv,
                           const std::vector<std::string>& devices, int per_device,
                           const std::filesystem::path& log_dir, const LaneSharing& sharing = {});

}  // namespace aobench
