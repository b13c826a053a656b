// Implements: torchrun environment parsing and the c10d NCCL data-parallel group (see distributed.h;
// DESIGN.md §6). Why NCCL only: the pip LibTorch ships ProcessGroupGloo.hpp but not the gloo/ headers it
// includes, so a CPU (Gloo) group cannot be compiled; WORLD_SIZE > 1 on CPU is refused with a ConfigError.
#include "harness/distributed.h"

#include <cstdlib>
#include <exception>
#include <map>

#include "core/device.h"
#include "core/errors.h"

#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace aobench {

static int env_int(const char* name, int fallback, int lo) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > 1 << 20)
    throw ConfigError(
        std::string("environment variable ") + name + "='" + v + "' is not a valid integer ≥ " + std::to_string(lo),
        "launch with torchrun, which sets RANK, WORLD_SIZE and LOCAL_RANK");
  return int(x);
}

DistEnv dist_env_from_environment() {
  DistEnv env;
  env.world = env_int("WORLD_SIZE", 1, 1);
  env.rank = env_int("RANK", 0, 0);
  env.local_rank = env_int("LOCAL_RANK", env.rank, 0);
  if (env.rank >= env.world)
    throw ConfigError("RANK=" + std::to_string(env.rank) + " is not below WORLD_SIZE=" + std::to_string(env.world),
                      "launch with torchrun, which sets both consistently");
  if (const char* a = std::getenv("MASTER_ADDR")) env.master_addr = a;
  env.master_port = env_int("MASTER_PORT", 0, 0);
  if (env.master_port > 65535)
    throw ConfigError("environment variable MASTER_PORT=" + std::to_string(env.master_port) + " is not a TCP port",
                      "use a port in 1..65535");
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  env.agent_store = agent && std::string(agent) == "True";
  return env;
}

torch::Device rank_device(const std::string& spec, const DistEnv& env, const std::string& key) {
  const torch::Device d = select_device(spec, key);
  if (env.world == 1) return d;
  const std::string world = "WORLD_SIZE=" + std::to_string(env.world);
  if (!d.is_cuda())
    throw ConfigError(world + " but config '" + key + "' = \"" + spec + "\" runs on the CPU",
                      "multi-process training runs over NCCL, one process per GPU; this build has no Gloo "
                      "CPU backend, so on CPU run a single process (unset WORLD_SIZE)");
#ifndef USE_C10D_NCCL
  throw ConfigError(world + ": this build has no c10d NCCL process group (nccl.h not found at configure time)",
                    "rebuild against a CUDA LibTorch whose nvidia-nccl package provides nccl.h");
#endif
  if (spec.rfind("cuda:", 0) == 0)
    throw ConfigError(world + " but config '" + key + "' = \"" + spec + "\" pins one GPU",
                      "use \"cuda\" or \"auto\": each rank takes cuda:LOCAL_RANK");
  const int n = int(torch::cuda::device_count());
  if (env.local_rank >= n)
    throw ConfigError(
        "LOCAL_RANK=" + std::to_string(env.local_rank) + " but only " + std::to_string(n) + " CUDA devices are visible",
        "launch at most one process per GPU (torchrun --nproc_per_node ≤ GPU count)");
  return torch::Device(torch::kCUDA, c10::DeviceIndex(env.local_rank));
}

#ifdef USE_C10D_NCCL
struct DataParallel::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> pg;
  torch::Device device;
  int rank = 0, world = 1;
  int64_t gathers = 0;  // numbers the store keys of successive gather_to_main calls

  void allreduce_sum(torch::Tensor& t) {
    std::vector<torch::Tensor> v{t};
    pg->allreduce(v)->wait();  // orders the current stream after the NCCL op
  }
};

DataParallel::DataParallel(const DistEnv& env, torch::Device device) : world_(env.world) {
  if (env.world == 1) return;
  if (env.master_addr.empty() || env.master_port == 0)
    throw ConfigError("WORLD_SIZE=" + std::to_string(env.world) + " but MASTER_ADDR/MASTER_PORT are not set",
                      "launch with torchrun, which sets them");
  TORCH_CHECK(device.is_cuda() && device.index() == env.local_rank,
              "DataParallel: device must be cuda:LOCAL_RANK, got ", device);
  c10::cuda::set_device(device.index());
  impl_ = std::make_unique<Impl>(Impl{nullptr, nullptr, device, env.rank, env.world, 0});
  c10d::TCPStoreOptions opts;
  opts.port = uint16_t(env.master_port);
  opts.isServer = env.rank == 0 && !env.agent_store;  // torchrun's agent may already serve MASTER_PORT
  opts.numWorkers = size_t(env.world);
  opts.multiTenant = true;
  auto tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, opts);
  // A prefix keeps our keys apart from the agent's own in a shared store.
  impl_->store = c10::make_intrusive<c10d::PrefixStore>("aobench_dp/", tcp);
  impl_->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, env.rank, env.world);
}

DataParallel::~DataParallel() {
  if (!impl_) return;
  try {
    if (std::uncaught_exceptions() > 0)
      impl_->pg->abort();  // peers may be stuck in a collective
    else
      impl_->pg->shutdown();
  } catch (...) {}
}

void DataParallel::broadcast_from_main(const std::vector<torch::Tensor>& tensors) {
  if (!impl_) return;
  torch::NoGradGuard no_grad;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (const auto& t : tensors) {
    TORCH_CHECK(t.is_contiguous() && t.device() == impl_->device, "broadcast_from_main: tensor not contiguous on ",
                impl_->device);
    std::vector<torch::Tensor> v{t.detach()};
    works.push_back(impl_->pg->broadcast(v));
  }
  for (auto& w : works) w->wait();
}

void DataParallel::average_gradients(const std::vector<torch::Tensor>& params) {
  if (!impl_) return;
  torch::NoGradGuard no_grad;
  // Which gradients exist on any rank: rank-local unused parameters must still join the same buckets.
  auto defined = torch::zeros({int64_t(params.size())}, torch::TensorOptions().device(impl_->device));
  {
    std::vector<float> flags(params.size());
    for (size_t i = 0; i < params.size(); ++i) flags[i] = params[i].grad().defined() ? 1.f : 0.f;
    defined.copy_(torch::from_blob(flags.data(), {int64_t(flags.size())}, torch::kFloat));
    impl_->allreduce_sum(defined);
  }
  const torch::Tensor any_defined = defined.cpu();
  const float* on_any = any_defined.data_ptr<float>();
  std::map<c10::ScalarType, std::vector<torch::Tensor>> by_dtype;
  for (size_t i = 0; i < params.size(); ++i) {
    if (on_any[i] == 0.f) continue;
    torch::Tensor p = params[i];
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    by_dtype[p.grad().scalar_type()].push_back(p.grad());
  }
  constexpr int64_t kBucketBytes = 25 << 20;
  const double inv_world = 1.0 / double(impl_->world);
  for (auto& [dtype, grads] : by_dtype) {
    size_t i = 0;
    while (i < grads.size()) {
      // One bucket: grads[i, j) flattened into one buffer (N,), all-reduced (sum), scaled, copied back.
      size_t j = i;
      int64_t bytes = 0;
      while (j < grads.size() && (j == i || bytes + grads[j].nbytes() <= size_t(kBucketBytes)))
        bytes += int64_t(grads[j].nbytes()), ++j;
      std::vector<torch::Tensor> flat_parts;
      for (size_t k = i; k < j; ++k) flat_parts.push_back(grads[k].reshape({-1}));
      torch::Tensor flat = torch::cat(flat_parts);
      impl_->allreduce_sum(flat);
      flat.mul_(inv_world);
      int64_t off = 0;
      for (size_t k = i; k < j; ++k) {
        const int64_t n = grads[k].numel();
        grads[k].copy_(flat.narrow(0, off, n).view_as(grads[k]));
        off += n;
      }
      i = j;
    }
  }
}

std::vector<double> DataParallel::average(const std::vector<double>& values) {
  if (!impl_ || values.empty()) return values;
  auto cpu = torch::tensor(values, torch::kFloat64);
  torch::Tensor t = cpu.to(impl_->device);
  impl_->allreduce_sum(t);
  t = (t / double(impl_->world)).cpu();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

bool DataParallel::any(bool flag) {
  if (!impl_) return flag;
  return average({flag ? 1.0 : 0.0})[0] > 0.0;
}

std::vector<std::string> DataParallel::gather_to_main(const std::string& value) {
  if (!impl_) return {value};
  const std::string key = "gather/" + std::to_string(impl_->gathers++) + "/";
  impl_->store->set(key + std::to_string(impl_->rank), value);
  if (impl_->rank != 0) return {};
  std::vector<std::string> out;
  for (int r = 0; r < impl_->world; ++r) out.push_back(impl_->store->get_to_str(key + std::to_string(r)));
  return out;
}

void DataParallel::barrier() {
  if (!impl_) return;
  auto t = torch::zeros({1}, torch::TensorOptions().device(impl_->device));
  impl_->allreduce_sum(t);
  (void)t.item<float>();  // waits for the collective itself, not just stream order
}

#else  // no NCCL: rank_device() has already refused world > 1, so the group is never active.
struct DataParallel::Impl {};
DataParallel::DataParallel(const DistEnv& env, torch::Device) : world_(env.world) {
  if (env.world > 1)
    throw ConfigError("WORLD_SIZE=" + std::to_string(env.world) + ": this build has no c10d NCCL process group",
                      "run one process (unset WORLD_SIZE), or rebuild against a CUDA LibTorch with nccl.h");
}
DataParallel::~DataParallel() = default;
void DataParallel::broadcast_from_main(const std::vector<torch::Tensor>&) {}
void DataParallel::average_gradients(const std::vector<torch::Tensor>&) {}
std::vector<double> DataParallel::average(const std::vector<double>& values) { return values; }
bool DataParallel::any(bool flag) { return flag; }
std::vector<std::string> DataParallel::gather_to_main(const std::string& value) { return {value}; }
void DataParallel::barrier() {}
#endif

}  // namespace aobench
