// Implements: GPU sharing of the lanes (see gpu_sharing.h): the choice, and a private MPS control daemon started
// and quit through core/subprocess.h (an argument vector, no shell).
#include "harness/experiment/gpu_sharing.h"

#include <stdlib.h>

#include <chrono>
#include <csignal>
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
    "gpu_sharing says how the runs of one GPU share it: auto (MPS when nvidia-cuda-mps-control is on PATH, else in "
    "turns), mps (MPS or an error) or time_slicing (in turns)";

}  // namespace

GpuSharing parse_gpu_sharing(const std::string& value, const std::string& where) {
  if (value == "auto") return GpuSharing::kAuto;
  if (value == "mps") return GpuSharing::kMps;
  if (value == "time_slicing") return GpuSharing::kTimeSlicing;
  throw ConfigError(where + ": '" + value + "' is not a way to share a GPU", kSharingHint);
}

std::string take_gpu_sharing_setting(std::vector<std::string>& sets) {
  return take_text_setting(sets, "gpu_sharing", "way to share a GPU", kSharingHint);
}

SharingChoice choose_gpu_sharing(GpuSharing mode, int gpus, int per_device, const std::string& existing_pipe,
                                 const std::string& control) {
  if (gpus <= 0 || per_device <= 1) return {};
  if (!existing_pipe.empty())  // every CUDA process of this user connects to it: no mode opts out
    return {SharingChoice::kExistingDaemon, "MPS (the daemon of " + existing_pipe + ", already serving)"};
  if (mode == GpuSharing::kTimeSlicing) return {SharingChoice::kTurns, "in turns (gpu_sharing time_slicing)"};
  if (per_device > kMpsClientsPerGpu) {
    const std::string why = std::to_string(per_device) + " runs per GPU, more than the " +
                            std::to_string(kMpsClientsPerGpu) + " clients MPS takes";
    if (mode == GpuSharing::kMps)
      throw ConfigError("gpu_sharing \"mps\" with " + why, "lower runs_per_device, or set gpu_sharing=time_slicing");
    return {SharingChoice::kTurns, "in turns (" + why + ")"};
  }
  if (control.empty()) {
    if (mode == GpuSharing::kMps)
      throw ConfigError("gpu_sharing \"mps\" but nvidia-cuda-mps-control is not on PATH",
                        "install the NVIDIA driver's MPS tools, or set gpu_sharing=auto or time_slicing");
    return {SharingChoice::kTurns, "in turns (nvidia-cuda-mps-control is not on PATH)"};
  }
  return {SharingChoice::kPrivateDaemon, "MPS (a private control daemon)"};
}

std::vector<std::string> lane_visible_devices(SharingChoice::Kind kind, const std::vector<std::string>& devices) {
  if (kind != SharingChoice::kPrivateDaemon) return devices;
  std::vector<std::string> ids;
  for (size_t i = 0; i < devices.size(); ++i) ids.push_back(std::to_string(i));
  return ids;
}

std::string existing_mps_pipe() {
  std::error_code ec;
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string pipe = dir != nullptr && *dir != '\0' ? dir : "/tmp/nvidia-mps";
  return fs::exists(fs::path(pipe) / "control", ec) ? pipe : "";  // a client that finds no pipe runs without MPS
}

MpsDaemon::MpsDaemon(const std::string& control, const fs::path& log_dir) : control_(control), log_dir_(log_dir) {
  fs::create_directories(log_dir_);
  // A socket path has at most 107 bytes: the pipes go to a short fresh folder, not beside the runs.
  char pipe_template[] = "/tmp/aobench-mps-XXXXXX";
  if (::mkdtemp(pipe_template) == nullptr)
    throw TrainingError("could not create a folder for the MPS pipes under /tmp", "set gpu_sharing=time_slicing");
  pipe_dir_ = pipe_template;
  // The daemon writes control.log and server.log into log_dir itself; what the program prints goes beside them.
  const fs::path out = log_dir_ / "control_command.log";
  const int rc = run_logged({control_, "-d"}, client_env(), out.string());  // -d: it detaches once started
  // A client that finds no control pipe trains without MPS, silently: wait until the daemon has made it.
  std::error_code ec;
  for (int i = 0; rc == 0 && i < 100 && !fs::exists(pipe_dir_ / "control", ec); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (rc != 0 || !fs::exists(pipe_dir_ / "control", ec)) {
    if (rc == 0) quit();
    fs::remove_all(pipe_dir_, ec);
    throw TrainingError(control_ + " -d " +
                            (rc != 0 ? "exited with status " + std::to_string(rc) : "made no control pipe in 5 s") +
                            " (its logs: " + out.string() + ", " + (log_dir_ / "control.log").string() + ")",
                        "set gpu_sharing=time_slicing to train the runs in turns");
  }
}

void MpsDaemon::quit() const {
  // "quit" stops the daemon and its servers once their clients are gone.
  const int rc = run_logged({control_}, client_env(), (log_dir_ / "control_command.log").string(), "quit\n");
  if (rc != 0)
    std::cerr << "warning: " << control_ << " (quit) exited with status " << rc << "; the daemon of "
              << pipe_dir_.string() << " may still run: CUDA_MPS_PIPE_DIRECTORY=" << pipe_dir_.string() << " "
              << control_ << " and the command quit stop it\n";
}

MpsDaemon::~MpsDaemon() {
  quit();
  std::error_code ec;
  fs::remove_all(pipe_dir_, ec);
}

std::vector<std::string> MpsDaemon::client_env() const {
  return {"CUDA_MPS_PIPE_DIRECTORY=" + pipe_dir_.string(), "CUDA_MPS_LOG_DIRECTORY=" + log_dir_.string()};
}

namespace {
volatile std::sig_atomic_t g_held_signal = 0;
extern "C" void on_held_signal(int sig) { g_held_signal = sig; }
}  // namespace

LaneGpuSharing::LaneGpuSharing(GpuSharing mode, int gpus, int per_device, const fs::path& log_dir) {
  const std::string control = find_on_path("nvidia-cuda-mps-control");
  const SharingChoice choice = choose_gpu_sharing(mode, gpus, per_device, existing_mps_pipe(), control);
  kind_ = choice.kind;
  said_ = choice.said;
  if (kind_ != SharingChoice::kPrivateDaemon) return;
  g_held_signal = 0;
  hold_ = std::make_unique<ScopedSignals>(on_held_signal);
  try {
    daemon_ = std::make_unique<MpsDaemon>(control, log_dir / "mps");
  } catch (const TrainingError& e) {
    hold_.reset();
    if (mode == GpuSharing::kMps) throw;
    std::cerr << "warning: " << e.what() << "; the runs train in turns\n";
    kind_ = SharingChoice::kTurns;
    said_ = "in turns (the MPS daemon did not start: " + (log_dir / "mps").string() + ")";
    return;
  }
  env_ = daemon_->client_env();
  said_ += "; pipes in " + daemon_->pipe_dir().string() + ", its logs in " + (log_dir / "mps").string();
}

LaneGpuSharing::~LaneGpuSharing() { stop(); }

void LaneGpuSharing::stop() {
  daemon_.reset();
  if (hold_) held_ = g_held_signal;
  hold_.reset();
}

int LaneGpuSharing::held_signal() const { return hold_ ? static_cast<int>(g_held_signal) : held_; }

}  // namespace aobench
