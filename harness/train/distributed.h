// Implements: multi-GPU data parallelism (DESIGN.md §6): the torchrun environment contract (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and a c10d NCCL process group, one process per GPU: parameters are
// broadcast from rank 0, gradients averaged once per optimizer step (overlapped with the backward: see
// harness/train/grad_buckets.h), logged scalars averaged over ranks.
// A single process (no WORLD_SIZE, or 1) is rank 0 of 1 and never touches c10d.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

namespace aobench {

struct DistEnv {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  std::string master_addr;
  int master_port = 0;
  bool agent_store = false;  // TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent hosts the TCPStore
  bool is_main() const { return rank == 0; }
};

// Parses and validates the torchrun variables; ConfigError naming the variable on bad values.
DistEnv dist_env_from_environment();

// This rank's device. world == 1: exactly select_device(spec). world > 1: cuda:LOCAL_RANK; ConfigError when
// `spec` resolves to the CPU (no Gloo in this build), names another index, or LOCAL_RANK has no GPU, and
// when this build has no NCCL process group.
torch::Device rank_device(const std::string& spec, const DistEnv& env, const std::string& key = "train.device");

// The data-parallel group. Inactive (every call a no-op returning its input) when world == 1.
class DataParallel {
 public:
  // world > 1: sets the current CUDA device, connects the TCPStore (rank 0 serves it unless torchrun's
  // agent does) and creates a ProcessGroupNCCL with default options. bucket_bytes: the gradient buckets' cap
  // (config train.ddp_bucket_mb).
  DataParallel(const DistEnv& env, torch::Device device, int64_t bucket_bytes = int64_t(50) << 20);
  ~DataParallel();  // shuts the group down (aborts it when unwinding from an exception)
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  bool active() const { return impl_ != nullptr; }
  int world() const { return world_; }
  // In place: every rank ends with rank 0's values (contiguous tensors on this rank's device).
  void broadcast_from_main(const std::vector<torch::Tensor>& tensors);
  // The gradient mean over ranks, overlapped with the backward (harness/train/grad_buckets.h: buckets of ~bucket_bytes whose
  // all-reduce starts while the backward still runs; from the second step on cut in the order rank 0's first
  // backward reached the parameters). Per optimizer step: zero_gradients (instead of the
  // optimizer's zero_grad: every .grad set to none; a bucket's gradients are copied into it when it is
  // launched, and each .grad is then its view), the micro-step backwards with
  // sync_next_backward() just before the last one, then finish_gradients. No-ops when inactive.
  void zero_gradients(const std::vector<torch::Tensor>& params);
  void sync_next_backward();
  // The buckets' agreed order for a checkpoint (GradientBuckets::agreed_order; collective), and a resumed run's
  // order from one, applied when the buckets are made, so a resumed run sums its gradients in the same buckets
  // as the uninterrupted run (with 3 or more ranks the bucket layout changes the bits of the mean). Empty /
  // no-ops when inactive.
  std::vector<int64_t> bucket_order();
  void resume_bucket_order(std::vector<int64_t> order);
  // Waits (on the stream, not the host) for the bucket all-reduces, then returns the rank mean of `scalars`
  // (a float 1-D tensor on this rank's device: the loss and logged metrics) in one more all-reduce, which
  // also tells which parameters no rank's backward reached: those gradients are set undefined (the
  // optimizer skips them, as in a single process); one reached on some ranks only counts as zeros elsewhere.
  // Inactive: `scalars` read back unchanged.
  std::vector<double> finish_gradients(const torch::Tensor& scalars);
  // finish_gradients for a step recorded in a CUDA graph (harness/train/graph.h), with no host read: orders
  // the stream after the bucket all-reduces and returns the rank mean of `loss` (a float64 0-dim tensor on
  // this rank's device). Throws when this rank's backward left a parameter unreached: a captured step takes
  // every gradient as present. Inactive: `loss` unchanged.
  torch::Tensor finish_gradients_on_device(const torch::Tensor& loss);
  // Element-wise mean over ranks (float64).
  std::vector<double> average(const std::vector<double>& values);
  // True when `flag` is true on any rank.
  bool any(bool flag);
  // Rank 0 receives every rank's string (index = rank); other ranks receive {}. Collective.
  std::vector<std::string> gather_to_main(const std::string& value);
  void barrier();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int world_ = 1;
};

}  // namespace aobench
