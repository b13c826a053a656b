// Implements: how the lanes of one GPU share it (lanes.h).
//   "gpu_sharing": "auto" | "mps" | "time_slicing"   (top level or in a tier patch; `aobench run FILE --set
//   gpu_sharing=mps`; default "auto")
// Without help the driver runs one process's kernels at a time, so N small trainings on one H200 sum to about the
// throughput of one alone (docs/results/t128_b16_36k/packing/). MPS, CUDA's Multi-Process Service, runs the
// kernels of several processes at once. When more than one run shares a GPU, "auto" and "mps" start a private MPS
// control daemon for the lanes of this command — its pipes in a fresh /tmp/aobench-mps-XXXXXX, its log in
// <out_dir>/logs/mps/ — and quit it when the lanes end; the parent's own evaluations and timings stay outside it.
// A daemon already serving (a control pipe in $CUDA_MPS_PIPE_DIRECTORY, else in /tmp/nvidia-mps) is used as it is,
// whatever the mode: the children inherit it, with this command's CUDA_VISIBLE_DEVICES (a daemon started with one
// numbers its devices from 0: point CUDA_VISIBLE_DEVICES at them as it sees them). "auto" trains in turns where
// nvidia-cuda-mps-control is not on PATH, the daemon does not start or more runs share a GPU than MPS takes
// (kMpsClientsPerGpu), and says so; "mps" is then an error.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/scoped_signals.h"

namespace aobench {

enum class GpuSharing { kAuto, kMps, kTimeSlicing };

// "auto" | "mps" | "time_slicing"; ConfigError naming `where` and the value for anything else.
GpuSharing parse_gpu_sharing(const std::string& value, const std::string& where);

// Removes every "gpu_sharing=V" from `sets` (the --set list of `aobench run`) and returns V ("" when none;
// parse_gpu_sharing reads it); ConfigError for an empty V or two different ones.
std::string take_gpu_sharing_setting(std::vector<std::string>& sets);

// The MPS clients one GPU takes on Volta and later (NVIDIA's MPS documentation).
inline constexpr int kMpsClientsPerGpu = 48;

// What the lanes do about sharing.
struct SharingChoice {
  enum Kind { kTurns, kPrivateDaemon, kExistingDaemon } kind = kTurns;
  std::string said;  // for the lanes' first line: "MPS (a private control daemon)", "in turns (...)"
};

// The choice for `mode` with `per_device` runs on each of `gpus` GPUs, given the pipe directory of a daemon
// already serving ("" for none) and the path of nvidia-cuda-mps-control ("" when not on PATH). With no GPU or
// one run per GPU nothing is shared (kTurns, said ""). A daemon already serving serves the children whatever the
// mode (they inherit its pipes). ConfigError for "mps" without the program, or with more runs per GPU than MPS
// takes. Pure.
SharingChoice choose_gpu_sharing(GpuSharing mode, int gpus, int per_device, const std::string& existing_pipe,
                                 const std::string& control);

// CUDA_VISIBLE_DEVICES for each lane device: a private daemon sees the devices this command sees and numbers
// them from 0 (MPS remaps them), so its children get "0", "1", …; otherwise `devices` as they are. Pure.
std::vector<std::string> lane_visible_devices(SharingChoice::Kind kind, const std::vector<std::string>& devices);

// The pipe directory of an MPS daemon this process would connect to: CUDA_MPS_PIPE_DIRECTORY when set, else
// /tmp/nvidia-mps when its control pipe exists, else "".
std::string existing_mps_pipe();

// A private MPS control daemon while this object lives: started by the constructor (TrainingError naming its logs
// when it does not start; a daemon that started but made no pipe is quit first), quit by the destructor once its
// clients have ended, its pipe directory removed.
class MpsDaemon {
 public:
  MpsDaemon(const std::string& control, const std::filesystem::path& log_dir);
  ~MpsDaemon();
  MpsDaemon(const MpsDaemon&) = delete;
  MpsDaemon& operator=(const MpsDaemon&) = delete;

  // What a client needs in its environment: the daemon's pipe and log directories.
  std::vector<std::string> client_env() const;
  const std::filesystem::path& pipe_dir() const { return pipe_dir_; }

 private:
  void quit() const;
  std::string control_;
  std::filesystem::path pipe_dir_, log_dir_;
};

// The GPU sharing of one command's lanes while this object lives: the choice (choose_gpu_sharing), a private
// daemon when it is one — under "auto" a daemon that does not start is said and the runs train in turns — and,
// while that daemon lives, SIGINT / SIGTERM held (the lanes pass theirs on to the children), so that a signal
// cannot end the command and leave the daemon running. stop() or the destructor quits the daemon.
class LaneGpuSharing {
 public:
  LaneGpuSharing(GpuSharing mode, int gpus, int per_device, const std::filesystem::path& log_dir);
  ~LaneGpuSharing();
  LaneGpuSharing(const LaneGpuSharing&) = delete;
  LaneGpuSharing& operator=(const LaneGpuSharing&) = delete;

  SharingChoice::Kind kind() const { return kind_; }
  const std::string& said() const { return said_; }
  const std::vector<std::string>& env() const { return env_; }  // for every child
  void stop();
  // A SIGINT / SIGTERM that came while the daemon lived outside the lanes (0: none).
  int held_signal() const;

 private:
  SharingChoice::Kind kind_ = SharingChoice::kTurns;
  std::string said_;
  std::vector<std::string> env_;
  int held_ = 0;  // the signal held, once stop() has let go of the handler
  std::unique_ptr<ScopedSignals> hold_;
  std::unique_ptr<MpsDaemon> daemon_;
};

}  // namespace aobench
