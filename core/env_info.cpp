// Implements: the results context block (see env_info.h). git and nvidia-smi are started with an argument
// vector (core/subprocess.h, no shell), so a tarball without .git still reports (as "unknown"), never fails.
#include "core/env_info.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <fstream>

#include <torch/torch.h>

#include "core/device.h"
#include "core/subprocess.h"

namespace aobench {
namespace {

// stdout of a program ("" when it is missing or fails).
std::string capture(const std::vector<std::string>& argv) {
  std::string out;
  return run_program(argv, &out) == 0 ? out : "";
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string device_name(const std::string& device) {
  if (device.rfind("cuda", 0) == 0 && torch::cuda::is_available()) {
    // nvidia-smi gives the marketing name without linking the CUDA runtime into the core library.
    const std::string name = first_line(capture({"nvidia-smi", "--query-gpu=name", "--format=csv,noheader"}));
    return device + (name.empty() ? "" : " (" + name + ")");
  }
  std::string cpu;
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; cpu.empty() && std::getline(info, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      cpu = line.substr(line.find(':') + 1);
      cpu.erase(0, cpu.find_first_not_of(' '));
    }
  return device + (cpu.empty() ? "" : " (" + cpu + ")");
}

}  // namespace

std::string aobench_environment() {
  std::vector<std::string> set;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "AOBENCH_", 8) == 0) set.emplace_back(*e);
  std::sort(set.begin(), set.end());
  std::string out;
  for (const auto& s : set) out += (out.empty() ? "" : " ") + s;
  return out.empty() ? "none" : out;
}

std::string utc_timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json env_info(const std::string& device, const std::string& dtype) {
  const std::string src = AOBENCH_SOURCE_DIR;
  std::string commit = capture({"git", "-C", src, "rev-parse", "HEAD"});
  const std::string status = commit.empty() ? "" : capture({"git", "-C", src, "status", "--porcelain", "-uno"});
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string cuda = "none";
  if (torch::cuda::is_available()) {
    const std::string smi = capture({"nvidia-smi"});
    const size_t at = smi.find("CUDA Version: ");
    cuda = at == std::string::npos ? "available"
                                   : smi.substr(at + 14, smi.find_first_not_of("0123456789.", at + 14) - (at + 14));
  }
  nlohmann::json info = {{"git_commit", commit.empty() ? "unknown" : commit},
                         {"git_dirty", !status.empty()},
                         {"host", host},
                         {"device", device_name(device)},
                         {"torch_version", TORCH_VERSION},
                         {"cuda_version", cuda},
                         {"dtype", dtype},
                         {"date", utc_timestamp()},
                         {"aobench_version", AOBENCH_VERSION},
                         {"aobench_env", aobench_environment()},
                         {"perf", perf_switches_in_effect()}};
  // Packed runs (harness/experiment/lanes.h): whether this one's kernels ran beside its neighbours' or in turns.
  if (device.rfind("cuda", 0) == 0 && torch::cuda::is_available())
    info["mps"] = mps_enabled(torch::Device(device));  // "cuda" (no index) is device 0
  return info;
}

}  // namespace aobench
