// Implements: torchrun environment parsing and the c10d NCCL data-parallel group (see distributed.h;
// DESIGN.md §6). Why NCCL only: the pip LibTorch ships ProcessGroupGloo.hpp but not the gloo/ headers it
// includes, so a CPU (Gloo) group cannot be compiled; WORLD_SIZE > 1 on CPU is refused with a ConfigError.
#include "harness/train/distributed.h"

#include <algorithm>
#include <exception>

#include "core/device.h"
#include "core/errors.h"
#include "harness/train/grad_buckets.h"

#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace aobench {
namespace {

std::vector<double> host_values(const torch::Tensor& t) {
  const torch::Tensor host = t.detach().to(torch::kCPU, torch::kFloat64).reshape({-1}).contiguous();
  return std::vector<double>(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
}

}  // namespace

static int env_int(const char* name, int fallback, int lo) {
  return static_cast<int>(
      env_integer(name, fallback, lo, 1 << 20, "launch with torchrun, which sets RANK, WORLD_SIZE and LOCAL_RANK"));
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
  int64_t bucket_bytes = 0;
  std::unique_ptr<GradientBuckets> buckets;                  // made at the first zero_gradients
  std::vector<int64_t> resumed_order;                        // a checkpoint's bucket order, for those buckets
  std::vector<c10::intrusive_ptr<c10d::Work>> bucket_works;  // this step's bucket all-reduces, in launch order

  void allreduce_sum(torch::Tensor& t) {
    std::vector<torch::Tensor> v{t};
    pg->allreduce(v)->wait();  // orders the current stream after the NCCL op
  }
  // Asynchronous mean over ranks (NCCL's ncclAvg); wait() on the Work orders the current stream after it.
  c10::intrusive_ptr<c10d::Work> allreduce_mean_async(torch::Tensor& t) {
    std::vector<torch::Tensor> v{t};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::AVG;
    return pg->allreduce(v, opts);
  }
  // After the step's last backward: launches the buckets not launched yet, orders the current stream after
  // every bucket all-reduce and returns, per parameter, whether this rank's backward reached it.
  std::vector<bool> finish_buckets() {
    const std::vector<bool> reached = buckets->flush();
    for (auto& w : bucket_works) w->wait();
    bucket_works.clear();
    return reached;
  }
};

DataParallel::DataParallel(const DistEnv& env, torch::Device device, int64_t bucket_bytes) : world_(env.world) {
  if (env.world == 1) return;
  if (env.master_addr.empty() || env.master_port == 0)
    throw ConfigError("WORLD_SIZE=" + std::to_string(env.world) + " but MASTER_ADDR/MASTER_PORT are not set",
                      "launch with torchrun, which sets them");
  TORCH_CHECK(device.is_cuda() && device.index() == env.local_rank,
              "DataParallel: device must be cuda:LOCAL_RANK, got ", device);
  c10::cuda::set_device(device.index());
  impl_ = std::make_unique<Impl>(Impl{nullptr, nullptr, device, env.rank, env.world, 0, bucket_bytes, nullptr, {}, {}});
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

void DataParallel::zero_gradients(const std::vector<torch::Tensor>& params) {
  if (!impl_) return;
  if (!impl_->buckets) {
    Impl* impl = impl_.get();
    // Rank 0's backward order for every rank's re-cut buckets (one broadcast, at the second step's start).
    auto agree = [impl](std::vector<int64_t>& order) {
      torch::Tensor t = torch::tensor(order, torch::kLong).to(impl->device);
      std::vector<torch::Tensor> v{t};
      impl->pg->broadcast(v)->wait();
      const torch::Tensor host = t.cpu();
      std::copy(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel(), order.begin());
    };
    impl_->buckets = std::make_unique<GradientBuckets>(
        params, impl_->bucket_bytes,
        [impl](torch::Tensor& flat) { impl->bucket_works.push_back(impl->allreduce_mean_async(flat)); }, agree);
    if (!impl_->resumed_order.empty()) impl_->buckets->resume(impl_->resumed_order);
  }
  TORCH_CHECK(impl_->buckets->params().size() == params.size(), "DataParallel::zero_gradients: ", params.size(),
              " parameters, the buckets were made for ", impl_->buckets->params().size());
  impl_->bucket_works.clear();
  impl_->buckets->zero();
}

void DataParallel::sync_next_backward() {
  if (impl_ && impl_->buckets) impl_->buckets->arm();
}

std::vector<int64_t> DataParallel::bucket_order() {
  return impl_ && impl_->buckets ? impl_->buckets->agreed_order() : std::vector<int64_t>{};
}

void DataParallel::resume_bucket_order(std::vector<int64_t> order) {
  if (!impl_) return;
  TORCH_CHECK(!impl_->buckets, "DataParallel::resume_bucket_order after the first zero_gradients");
  impl_->resumed_order = std::move(order);
}

std::vector<double> DataParallel::finish_gradients(const torch::Tensor& scalars) {
  torch::NoGradGuard no_grad;
  if (!impl_) return host_values(scalars);
  const torch::Tensor local = scalars.detach().to(torch::kFloat64).reshape({-1});
  TORCH_CHECK(impl_->buckets, "DataParallel::finish_gradients before zero_gradients");
  const std::vector<bool> reached = impl_->finish_buckets();
  std::vector<double> flags(reached.size());
  for (size_t k = 0; k < reached.size(); ++k) flags[k] = reached[k] ? 1.0 : 0.0;
  torch::Tensor t = torch::cat({local.to(impl_->device), torch::tensor(flags, torch::kFloat64).to(impl_->device)});
  impl_->allreduce_mean_async(t)->wait();
  const torch::Tensor host = t.cpu();  // the step's one host read before the update
  const double* h = host.data_ptr<double>();
  const int64_t n = local.numel();
  const auto& params = impl_->buckets->params();
  for (size_t k = 0; k < params.size(); ++k)
    if (h[n + int64_t(k)] == 0.0) params[k].mutable_grad().reset();  // no rank reached it
  return std::vector<double>(h, h + n);
}

torch::Tensor DataParallel::finish_gradients_on_device(const torch::Tensor& loss) {
  if (!impl_) return loss;
  torch::NoGradGuard no_grad;
  TORCH_CHECK(impl_->buckets, "DataParallel::finish_gradients_on_device before zero_gradients");
  const std::vector<bool> reached = impl_->finish_buckets();
  for (size_t k = 0; k < reached.size(); ++k)
    TORCH_CHECK(reached[k], "parameter ", k, " got no gradient in this rank's backward");
  torch::Tensor mean = loss.detach().to(torch::kFloat64).reshape({1}).clone();  // (1) NCCL reduces in place
  impl_->allreduce_mean_async(mean)->wait();
  return mean.reshape({});
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
DataParallel::DataParallel(const DistEnv& env, torch::Device, int64_t) : world_(env.world) {
  if (env.world > 1)
    throw ConfigError("WORLD_SIZE=" + std::to_string(env.world) + ": this build has no c10d NCCL process group",
                      "run one process (unset WORLD_SIZE), or rebuild against a CUDA LibTorch with nccl.h");
}
DataParallel::~DataParallel() = default;
void DataParallel::broadcast_from_main(const std::vector<torch::Tensor>&) {}
void DataParallel::zero_gradients(const std::vector<torch::Tensor>&) {}
std::vector<int64_t> DataParallel::bucket_order() { return {}; }
void DataParallel::resume_bucket_order(std::vector<int64_t>) {}
void DataParallel::sync_next_backward() {}
torch::Tensor DataParallel::finish_gradients_on_device(const torch::Tensor& loss) { return loss; }
std::vector<double> DataParallel::finish_gradients(const torch::Tensor& scalars) { return host_values(scalars); }
std::vector<double> DataParallel::average(const std::vector<double>& values) { return values; }
bool DataParallel::any(bool flag) { return flag; }
std::vector<std::string> DataParallel::gather_to_main(const std::string& value) { return {value}; }
void DataParallel::barrier() {}
#endif

}  // namespace aobench
