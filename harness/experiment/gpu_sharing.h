// Implements: how the lanes of one GPU share it (lanes.h).
//   "gpu_sharing": "auto" | "mps" | "time_slicing"   (top level or in a tier patch; `aobench run FILE --set
//   gpu_sharing=mps`; default "auto")
// Without help the driver runs one process's kernels at a time, so N small trainings on one H200 sum to about the
// throughput of one alone (docs/results/t128_b16_36k/packing/). MPS, CUDA's Multi-Process Service, runs the
// kernels of several processes at once. When more than one run shares a GPU, "auto" and "mps" start a private MPS
// control daemon for the lanes of this command — its pipes in a fresh /tmp/aobench-mps-XXXXXX, its log in
// <out_dir>/logs/mps/ — and quit it when the lanes end; the parent's own evaluations and timings stay outside it.
// A daemon already serving (CUDA_MPS_PIPE_DIRECTORY set, or one at the default /tmp/nvidia-mps) is used as it is.
// "auto" trains in turns where nvidia-cuda-mps-control is not on PATH; "mps" is then an error.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace aobench {

enum class GpuSharing { kAuto, kMps, kTimeSlicing };

// "auto" | "mps" | "time_slicing"; ConfigError naming `where` and the value for anything else.
GpuSharing parse_gpu_sharing(const std::string& value, const std::string& where);

// Removes every "gpu_sharing=V" from `sets` (the --set list of `aobench run`) and returns V ("" when none);
// ConfigError for an unknown value or two different ones.
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
// one run per GPU nothing is shared (kTurns, said ""). ConfigError for "mps" without the program, or with more
// runs per GPU than MPS takes. Pure.
SharingChoice choose_gpu_sharing(GpuSharing mode, int gpus, int per_device, const std::string& existing_pipe,
                                 const std::string& control);

// The pipe directory of an MPS daemon this process would connect to: CUDA_MPS_PIPE_DIRECTORY when set, else
// /tmp/nvidia-mps when its control pipe exists, else "".
std::string existing_mps_pipe();

// A private MPS control daemon while this object lives: started by the constructor (TrainingError naming its log
// when it does not start), quit by the destructor once its clients have ended, its pipe directory removed.
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
  std::string control_;
  std::filesystem::path pipe_dir_, log_dir_;
};

}  // namespace aobench
