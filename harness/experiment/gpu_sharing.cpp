// Implements: GPU sharing of the lanes (see gpu_sharing.h): the choice, and a private MPS control daemon started
// and quit through core/subprocess.h (an argument vector, no shell).
#include "harness/experiment/gpu_sharing.h"

#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <system_error>
#include <thread>

#include "core/errors.h"
#include "core/subprocess.h"
#include "harness/experiment/seeds.h"

namespace aobench {
namespace fs = std::filesystem;

namespace {

const char* kSharingHint =
    "gpu_sharing says how the runs of one GPU share it: auto (MPS when nvidia-cuda-mps-control is installed, else in "
    "turns), mps (MPS or an error) or time_slicing (in turns)";

}  // namespace

GpuSharing parse_gpu_sharing(const std::string& value, const std::string& where) {
  if (value == "auto") return GpuSharing::kAuto;
  if (value == "mps") return GpuSharing::kMps;
  if (value == "time_slicing") return GpuSharing::kTimeSlicing;
  throw ConfigError(where + ": '" + value + "' is not a way to share a GPU", kSharingHint);
}

std::string take_gpu_sharing_setting(std::vector<std::string>& sets) {
  const std::string value = take_text_setting(sets, "gpu_sharing", "way to share a GPU", kSharingHint);
  if (!value.empty()) parse_gpu_sharing(value, "--set gpu_sharing=" + value);
  return value;
}

SharingChoice choose_gpu_sharing(GpuSharing mode, int gpus, int per_device, const std::string& existing_pipe,
                                 const std::string& control) {
  if (gpus <= 0 || per_device <= 1) return {};
  if (mode == GpuSharing::kTimeSlicing) return {SharingChoice::kTurns, "in turns (gpu_sharing time_slicing)"};
  if (per_device > kMpsClientsPerGpu) {
    const std::string why = std::to_string(per_device) + " runs per GPU, more than the " +
                            std::to_string(kMpsClientsPerGpu) + " clients MPS takes";
    if (mode == GpuSharing::kMps)
      throw ConfigError("gpu_sharing \"mps\" with " + why, "lower runs_per_device, or set gpu_sharing=time_slicing");
    return {SharingChoice::kTurns, "in turns (" + why + ")"};
  }
  if (!existing_pipe.empty()) return {SharingChoice::kExistingDaemon, "MPS (the daemon of " + existing_pipe + ")"};
  if (control.empty()) {
    if (mode == GpuSharing::kMps)
      throw ConfigError("gpu_sharing \"mps\" but nvidia-cuda-mps-control is not on PATH",
                        "install the NVIDIA driver's MPS tools, or set gpu_sharing=auto or time_slicing");
    return {SharingChoice::kTurns, "in turns (nvidia-cuda-mps-control is not on PATH)"};
  }
  return {SharingChoice::kPrivateDaemon, "MPS (a private control daemon)"};
}

std::string existing_mps_pipe() {
  if (const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY"); dir != nullptr && *dir != '\0') return dir;
  std::error_code ec;
  return fs::exists("/tmp/nvidia-mps/control", ec) ? "/tmp/nvidia-mps" : "";
}

MpsDaemon::MpsDaemon(const std::string& control, const fs::path& log_dir) : control_(control), log_dir_(log_dir) {
  // A socket path has at most 107 bytes: the pipes go to a short fresh folder, not beside the runs.
  char pipe_template[] = "/tmp/aobench-mps-XXXXXX";
  if (::mkdtemp(pipe_template) == nullptr)
    throw TrainingError("could not create a folder for the MPS pipes under /tmp", "set gpu_sharing=time_slicing");
  pipe_dir_ = pipe_template;
  fs::create_directories(log_dir_);
  const fs::path log = log_dir_ / "control.log";
  // -d: the daemon detaches; its exit status says whether it started.
  const int rc = run_logged({control_, "-d"}, client_env(), log.string());
  // A client that finds no control pipe trains without MPS, silently: wait until the daemon has made it.
  std::error_code ec;
  for (int i = 0; rc == 0 && i < 100 && !fs::exists(pipe_dir_ / "control", ec); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (rc != 0 || !fs::exists(pipe_dir_ / "control", ec)) {
    fs::remove_all(pipe_dir_, ec);
    throw TrainingError(control_ + " -d " +
                            (rc != 0 ? "exited with status " + std::to_string(rc) : "made no control pipe in 5 s") +
                            " (its log: " + log.string() + ")",
                        "set gpu_sharing=time_slicing to train the runs in turns");
  }
}

MpsDaemon::~MpsDaemon() {
  // "quit" stops the daemon and its servers once their clients are gone (all lanes have ended by now).
  const int rc = run_logged({control_}, client_env(), (log_dir_ / "control.log").string(), "quit\n");
  if (rc != 0)
    std::cerr << "warning: " << control_ << " (quit) exited with status " << rc << "; the daemon of "
              << pipe_dir_.string() << " may still run\n";
  std::error_code ec;
  fs::remove_all(pipe_dir_, ec);
}

std::vector<std::string> MpsDaemon::client_env() const {
  return {"CUDA_MPS_PIPE_DIRECTORY=" + pipe_dir_.string(), "CUDA_MPS_LOG_DIRECTORY=" + log_dir_.string()};
}

}  // namespace aobench
