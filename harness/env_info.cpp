// Implements: the results context block (see env_info.h). git is asked through popen so a tarball
// without .git still reports (as "unknown"), never fails.
#include "harness/env_info.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <ctime>

#include <torch/torch.h>

namespace aobench {
namespace {

// stdout of a shell command, trailing whitespace trimmed; "" on failure.
std::string capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return out;
  std::array<char, 256> buf{};
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  if (pclose(p) != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string device_name(const std::string& device) {
  if (device.rfind("cuda", 0) == 0 && torch::cuda::is_available()) {
    // nvidia-smi gives the marketing name without linking the CUDA runtime into the core library.
    const std::string name = capture("nvidia-smi --query-gpu=name --format=csv,noheader | head -n1");
    return device + (name.empty() ? "" : " (" + name + ")");
  }
  const std::string cpu = capture("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'");
  return device + (cpu.empty() ? "" : " (" + cpu + ")");
}

}  // namespace

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
  std::string commit = capture("git -C '" + src + "' rev-parse HEAD");
  const std::string status = commit.empty() ? "" : capture("git -C '" + src + "' status --porcelain -uno");
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string cuda = "none";
  if (torch::cuda::is_available()) {
    const std::string v = capture("nvidia-smi | grep -o 'CUDA Version: [0-9.]*' | head -n1");
    cuda = v.empty() ? "available" : v.substr(14);
  }
  return {{"git_commit", commit.empty() ? "unknown" : commit},
          {"git_dirty", !status.empty()},
          {"host", host},
          {"device", device_name(device)},
          {"torch_version", TORCH_VERSION},
          {"cuda_version", cuda},
          {"dtype", dtype},
          {"date", utc_timestamp()},
          {"aobench_version", AOBENCH_VERSION}};
}

}  // namespace aobench
