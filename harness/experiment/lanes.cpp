// Implements: lanes of `aobench run` (see lanes.h): child processes (core/subprocess.h, no shell),
// a scheduler that keeps every device's lanes busy, and signals passed on to the children.
#include "harness/experiment/lanes.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "core/progress.h"
#include "core/scoped_signals.h"
#include "core/subprocess.h"
#include "harness/experiment/seeds.h"

namespace aobench {
namespace fs = std::filesystem;

namespace {

const char* kLanesHint =
    "runs_per_device is how many runs train side by side on each GPU (on the CPU without one), an integer from 1 "
    "to 64 (1: one at a time)";

volatile std::sig_atomic_t g_lane_signal = 0;   // the last SIGINT / SIGTERM received
volatile std::sig_atomic_t g_lane_signals = 0;  // how many
extern "C" void on_lane_signal(int sig) {
  g_lane_signal = sig;
  g_lane_signals = g_lane_signals + 1;
}

// The last `n` lines of a text file ("" when unreadable).
std::string last_lines(const fs::path& path, size_t n) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > n) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += "  | " + l + "\n";
  return out;
}

}  // namespace

int take_runs_per_device_setting(std::vector<std::string>& sets) {
  return take_count_setting(sets, "runs_per_device", kMaxRunsPerDevice, "runs per device", kLanesHint);
}

int experiment_runs_per_device(const nlohmann::json& experiment, int from_set, const std::string& origin) {
  return experiment_count(experiment, "runs_per_device", from_set, kMaxRunsPerDevice, origin, kLanesHint);
}

std::vector<std::string> lane_devices(int gpus, const std::vector<std::string>& visible) {
  if (gpus <= 0) return {""};
  std::vector<std::string> devices;
  for (int g = 0; g < gpus; ++g) {
    const auto i = static_cast<size_t>(g);
    devices.push_back(i < visible.size() ? visible[i] : std::to_string(g));
  }
  return devices;
}

LaneOutcome train_in_lanes(const std::vector<std::string>& runs, const std::vector<std::string>& child_argv,
                           const std::vector<std::string>& devices, int per_device, const fs::path& log_dir,
                           const LaneSharing& sharing) {
  fs::create_directories(log_dir);
  g_lane_signal = 0;
  g_lane_signals = 0;
  const ScopedSignals signals(on_lane_signal);
  const auto start = std::chrono::steady_clock::now();
  auto since = [](std::chrono::steady_clock::time_point t) {
    return format_duration(std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  };
  struct Child {
    std::string run;
    size_t device;
    fs::path log;  // <log_dir>/<run>.log
    std::chrono::steady_clock::time_point started;
  };
  std::map<int, Child> running;  // pid → child
  std::vector<int> busy(devices.size(), 0);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  LaneOutcome outcome;
  size_t next = 0;
  int forwarded = 0;  // signals passed on so far
  auto label = [&](size_t d) { return devices[d].empty() ? std::string("CPU") : "GPU " + devices[d]; };

  std::cout << "run: " << runs.size() << " runs in " << devices.size() * static_cast<size_t>(per_device) << " lanes ("
            << per_device << " per device on " << devices.size() << " device" << (devices.size() == 1 ? "" : "s")
            << "); logs in " << log_dir.string() << "\n";
  if (!sharing.said.empty()) std::cout << "run: GPU sharing: " << sharing.said << "\n";
  std::cout << std::flush;
  while (true) {
    // Start runs while a device has a free lane and no signal came.
    while (g_lane_signals == 0 && next < runs.size()) {
      size_t d = 0;
      for (size_t i = 1; i < devices.size(); ++i)
        if (busy[i] < busy[d]) d = i;
      if (busy[d] >= per_device) break;
      const std::string& run = runs[next++];
      std::vector<std::string> argv = child_argv;
      argv.insert(argv.end(), {"--jobs", run});
      std::vector<std::string> env = sharing.env;
      if (!devices[d].empty()) env.push_back("CUDA_VISIBLE_DEVICES=" + devices[d]);
      if (devices[d].empty() && std::getenv("OMP_NUM_THREADS") == nullptr)
        env.push_back("OMP_NUM_THREADS=" + std::to_string(std::max(1, cores / per_device)));
      const fs::path log = log_dir / (run + ".log");
      const int pid = spawn_logged(argv, env, log.string());
      if (pid < 0) {
        std::cout << "run: " << run << ": could not start " << argv[0] << "\n";
        outcome.failed.emplace_back(run, -1);
        continue;
      }
      ++busy[d];
      running[pid] = {run, d, log, std::chrono::steady_clock::now()};
      std::cout << "run: " << run << " started on " << label(d) << " (" << running.size() << " running; log "
                << log.string() << ")\n"
                << std::flush;
    }
    if (running.empty()) break;
    // Pass each new signal on once; the children checkpoint and stop as `aobench train` does.
    if (g_lane_signals > forwarded) {
      forwarded = g_lane_signals;
      outcome.signal = g_lane_signal;
      std::cout << "run: signal " << g_lane_signal << ": passed on to " << running.size()
                << " running children; no new run starts\n"
                << std::flush;
      for (const auto& [pid, child] : running) ::kill(pid, g_lane_signal);
    }
    int status = 0, pid = 0;
    for (const auto& entry : running)
      if (::waitpid(entry.first, &status, WNOHANG) == entry.first) {
        pid = entry.first;
        break;
      }
    if (pid == 0) {  // none ended: poll again (a signal is seen within this pause)
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    const Child child = running[pid];
    running.erase(pid);
    --busy[child.device];
    const int rc = exit_status(status);
    if (rc == 0) {
      outcome.trained.push_back(child.run);
      std::cout << "run: " << child.run << " done in " << since(child.started) << " ("
                << outcome.trained.size() + outcome.failed.size() << " of " << runs.size() << " ended, "
                << running.size() << " running, " << since(start) << " elapsed)\n";
    } else {
      outcome.failed.emplace_back(child.run, rc);
      std::cout << "run: " << child.run << " stopped with exit status " << rc << " after " << since(child.started)
                << "; the end of " << child.log.string() << ":\n"
                << last_lines(child.log, 12);
    }
    std::cout << std::flush;
  }
  return outcome;
}

}  // namespace aobench
