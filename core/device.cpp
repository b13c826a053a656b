// Implements: device selection, autocast policy, peak-FLOPs table and memory stats (see device.h).
#include "core/device.h"

#include <ATen/autocast_mode.h>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/errors.h"

#if __has_include(<cuda_runtime_api.h>) && __has_include(<ATen/cuda/CUDAContext.h>)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#define AOBENCH_HAVE_CUDA_HEADERS 1
#endif

namespace aobench {

torch::Device select_device(const std::string& spec, const std::string& key) {
  if (spec == "auto") return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (spec == "cpu") return torch::kCPU;
  if (spec == "cuda" || spec.rfind("cuda:", 0) == 0) {
    if (!torch::cuda::is_available())
      throw ConfigError("config '" + key + "' = \"" + spec + "\" but CUDA is not available",
                        "use \"auto\" or \"cpu\" on a machine without a GPU");
    torch::Device d(spec);
    if (d.has_index() && d.index() >= int(torch::cuda::device_count()))
      throw ConfigError("config '" + key + "' = \"" + spec + "\" but only " +
                        std::to_string(torch::cuda::device_count()) + " CUDA devices exist");
    return d.has_index() ? d : torch::Device(torch::kCUDA, 0);
  }
  throw ConfigError("config '" + key + "' = \"" + spec + "\" is not a device", "use auto, cpu, cuda or cuda:N");
}

bool use_bf16_autocast(const std::string& dtype, torch::Device device, const std::string& key) {
  if (dtype == "auto") return device.is_cuda();
  if (dtype == "fp32") return false;
  if (dtype == "bf16") {
    if (!device.is_cuda())
      throw ConfigError("config '" + key + "' = \"bf16\" needs a CUDA device (bf16 autocast runs on CUDA only)",
                        "use \"auto\" or \"fp32\" on CPU");
    return true;
  }
  throw ConfigError("config '" + key + "' = \"" + dtype + "\" is not a dtype", "use auto, fp32 or bf16");
}

std::string device_name(torch::Device device) {
#ifdef AOBENCH_HAVE_CUDA_HEADERS
  if (device.is_cuda()) return at::cuda::getDeviceProperties(device.index() < 0 ? 0 : device.index())->name;
#endif
  return device.str();
}

namespace {
// The positive number in environment variable `var`, 0 when unset; ConfigError naming it for anything else.
double positive_from_env(const char* var, const char* example) {
  const char* env = std::getenv(var);
  if (env == nullptr) return 0;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (end == env || !std::isfinite(v) || v <= 0)
    throw ConfigError(std::string(var) + "='" + env + "' is not a positive number",
                      std::string("example: ") + var + "=" + example);
  return v;
}
}  // namespace

double peak_bf16_flops(const std::string& name) {
  const double set = positive_from_env("AOBENCH_PEAK_FLOPS", "989e12");
  return set > 0 ? set : known_peak_bf16_flops(name);
}

double known_peak_bf16_flops(const std::string& name) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("H200")) return 989e12;
  if (has("H100")) return has("PCIe") ? 756e12 : 989e12;
  if (has("A100")) return 312e12;
  return 0.0;
}

double hbm_bandwidth(const std::string& name) {
  if (const double set = positive_from_env("AOBENCH_HBM_BANDWIDTH", "4.8e12"); set > 0) return set;
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("H200")) return 4.8e12;
  if (has("H100")) return has("NVL") ? 3.9e12 : has("PCIe") ? 2.0e12 : 3.35e12;
  if (has("A100")) return has("40GB") ? 1.555e12 : has("PCIe") ? 1.935e12 : 2.039e12;
  return 0.0;
}

bool mps_enabled(torch::Device device) {
#if defined(AOBENCH_HAVE_CUDA_HEADERS) && defined(CUDART_VERSION) && CUDART_VERSION >= 12030
  if (!device.is_cuda()) return false;
  int on = 0;
  return cudaDeviceGetAttribute(&on, cudaDevAttrMpsEnabled, device.index() < 0 ? 0 : device.index()) == cudaSuccess &&
         on == 1;
#else
  (void)device;
  return false;
#endif
}

void synchronize_device(torch::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index() < 0 ? 0 : device.index());
}

double max_memory_gib(torch::Device device) {
#ifdef AOBENCH_HAVE_CUDA_HEADERS
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    return double(stats.allocated_bytes[size_t(c10::CachingAllocator::StatType::AGGREGATE)].peak) / (1 << 30);
  }
#endif
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) * 1024.0 / (1 << 30);  // ru_maxrss is KiB on Linux
}

void reset_peak_memory(torch::Device device) {
#ifdef AOBENCH_HAVE_CUDA_HEADERS
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
#endif
}

AutocastScope::AutocastScope(bool enable) : on(enable) {
  if (!on) return;
  prev_enabled = at::autocast::is_autocast_enabled(at::kCUDA);
  prev_dtype = at::autocast::get_autocast_dtype(at::kCUDA);
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
}

AutocastScope::~AutocastScope() {
  if (!on) return;
  at::autocast::set_autocast_enabled(at::kCUDA, prev_enabled);
  at::autocast::set_autocast_dtype(at::kCUDA, prev_dtype);
  at::autocast::clear_cache();
}

namespace {

constexpr size_t kSwitchCount = sizeof(kPerfSwitches) / sizeof(kPerfSwitches[0]);
std::atomic<bool> g_off[kSwitchCount];  // zero-initialised: every switch on until a config turns it off
std::atomic<int> g_generation{0};       // bumped by set_perf_switch: EnvSwitch objects read again

// The environment variable of switch i: "fused_ce" → "AOBENCH_FUSED_CE".
std::string switch_env(size_t i) {
  std::string env = std::string("AOBENCH_") + kPerfSwitches[i];
  std::transform(env.begin(), env.end(), env.begin(), [](unsigned char c) { return std::toupper(c); });
  return env;
}

}  // namespace

void set_perf_switch(const std::string& name, bool on) {
  for (size_t i = 0; i < kSwitchCount; ++i)
    if (name == kPerfSwitches[i]) {
      if (g_off[i].exchange(!on) != !on) ++g_generation;
      return;
    }
  throw ConfigError("unknown speed switch 'perf." + name + "'", "the perf keys of configs/base.json");
}

int64_t env_integer(const char* name, int64_t fallback, int64_t lo, int64_t hi, const std::string& hint) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (*end != '\0' || x < lo || x > hi)
    throw ConfigError(std::string("environment variable ") + name + "='" + v + "' is not a whole number in " +
                          std::to_string(lo) + " … " + std::to_string(hi),
                      hint);
  return static_cast<int64_t>(x);
}

bool env_switch_on(const char* env) {
  if (const char* v = std::getenv(env)) return std::strcmp(v, "0") != 0;
  for (size_t i = 0; i < kSwitchCount; ++i)
    if (switch_env(i) == env) return !g_off[i].load();
  return true;
}

std::string perf_switches_in_effect() {
  std::string out;
  for (size_t i = 0; i < kSwitchCount; ++i)
    out += (out.empty() ? "" : " ") + std::string(kPerfSwitches[i]) + "=" +
           (env_switch_on(switch_env(i).c_str()) ? "1" : "0");
  return out;
}

bool EnvSwitch::on() {
  const int64_t now = g_generation.load();
  const int64_t state = state_.load();
  if (state >= 0 && (state >> 1) == now) return (state & 1) != 0;
  const bool value = env_switch_on(name_);
  state_.store((now << 1) | (value ? 1 : 0));
  return value;
}

void EnvSwitch::set(bool on) {  // a test's value: kept until a config changes a switch
  state_.store((int64_t(g_generation.load()) << 1) | (on ? 1 : 0));
}

}  // namespace aobench
