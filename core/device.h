// Implements: device and precision selection for training (DESIGN.md §3): "auto" = CUDA when available,
// bf16 autocast on CUDA only; the peak-FLOPs table behind MFU (dense bf16, per GPU) and memory stats.
// Unknown devices report no peak (MFU "n/a"), never a guess; AOBENCH_PEAK_FLOPS overrides the table.
#pragma once
#include <atomic>
#include <mutex>
#include <string>

#include <torch/torch.h>

namespace aobench {

// "auto" | "cpu" | "cuda" | "cuda:N". ConfigError (naming `key`) for unknown values or absent CUDA.
torch::Device select_device(const std::string& spec, const std::string& key = "train.device");
// dtype "auto" | "fp32" | "bf16" → whether to run the forward under bf16 autocast (CUDA only).
bool use_bf16_autocast(const std::string& dtype, torch::Device device, const std::string& key = "train.dtype");

std::string device_name(torch::Device device);  // "NVIDIA H100 80GB HBM3", "cpu"
// Dense bf16 peak FLOP/s for a device name (H100 SXM 989e12, H100 PCIe 756e12, H200 989e12,
// A100 312e12); 0 when unknown. AOBENCH_PEAK_FLOPS (a number) overrides.
double peak_bf16_flops(const std::string& name);
// The same from the table alone, whatever AOBENCH_PEAK_FLOPS says: the peak of a GPU something was measured on.
double known_peak_bf16_flops(const std::string& name);
// Memory bandwidth in bytes/s from the vendors' data sheets (H200 4.8e12, H100 SXM 3.35e12, H100 NVL 3.9e12,
// H100 PCIe 2.0e12, A100 80GB 2.039e12 (PCIe 1.935e12), A100 40GB 1.555e12); 0 when unknown (the CPU).
// AOBENCH_HBM_BANDWIDTH (bytes/s) overrides.
double hbm_bandwidth(const std::string& name);

// The speed switches, each a fast path on by default that can be turned off for comparison or to rule a kernel
// out: the config's "perf" section (PerfConfig, core/config_types.h) sets them per run, and the environment
// variable AOBENCH_<NAME> ("0" off, anything else on) overrides the config, for debugging.
inline constexpr const char* kPerfSwitches[] = {
    "fused_ce",   "fused_ln",    "fused_norms", "fused_adamw",     "fused_linear",  "fused_decode",  "decode_gemm",
    "decode_pdl", "cuda_graphs", "draw_split",  "draw_candidates", "draw_resident", "fused_sampling"};
// Sets the configured value of switch `name` (one of kPerfSwitches); ConfigError for another name.
void set_perf_switch(const std::string& name, bool on);
// The value in effect of the switch read from environment variable `env` (AOBENCH_FUSED_CE ↔ "fused_ce"): the
// variable when set, else the configured value (default on).
bool env_switch_on(const char* env);
// The whole number in environment variable `name`, `fallback` when it is unset or empty; ConfigError naming
// the variable and its value, with `hint`, for anything else or a value outside [lo, hi].
int64_t env_integer(const char* name, int64_t fallback, int64_t lo, int64_t hi, const std::string& hint);
// Every switch in effect, "cuda_graphs=1 draw_split=1 …" in kPerfSwitches order: stamped into every result's
// context (core/env_info.h), so a timing says which code path made it.
std::string perf_switches_in_effect();

// One such switch as an object for a hot path: env_switch_on(name) read at the first on() and again after a
// config sets any switch; tests flip it with set(). Constant-initialised, so a namespace-scope switch is ready
// before any static constructor asks it.
class EnvSwitch {
 public:
  explicit constexpr EnvSwitch(const char* name) : name_(name) {}
  bool on();
  void set(bool on);

 private:
  const char* name_;
  // (generation << 1) | on, one word so a value and the configuration generation it was read at change
  // together; −1 = not read yet. A value stored for an older generation is read again at the next on().
  std::atomic<int64_t> state_{-1};
};

// Whether the driver shares this process's contexts on `device` with other processes through MPS (CUDA's
// Multi-Process Service: the kernels of several processes run at once instead of in turns); false on the CPU and
// where the CUDA runtime predates the attribute (12.3).
bool mps_enabled(torch::Device device);

// Waits for the device's queued work (a CUDA device; nothing on the CPU): around a wall-clock timing.
void synchronize_device(torch::Device device);

// Peak memory since the last reset, GiB: CUDA max allocated; on CPU the process's max RSS.
double max_memory_gib(torch::Device device);
void reset_peak_memory(torch::Device device);

// bf16 autocast for CUDA forwards while it lives (the C++ API has no context manager); the previous autocast
// state is restored on exit. enable = false does nothing.
struct AutocastScope {
  bool on, prev_enabled = false;
  at::ScalarType prev_dtype = at::kFloat;
  explicit AutocastScope(bool enable);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;
};

}  // namespace aobench
