// One captured CUDA graph for a step function whose shapes and device pointers do not change between calls
// (a decode step over a preallocated KV cache): the ~200 kernel launches of a small-batch step become one
// graph launch. On the CPU, in builds without CUDA, or with AOBENCH_CUDA_GRAPHS=0 it simply calls the
// function, which is the uncaptured path the captured one is tested against.
#pragma once

#include <functional>
#include <memory>

#include <torch/torch.h>

namespace aobench::common {

// Whether run() may capture for tensors on `device`: CUDA build, CUDA device, AOBENCH_CUDA_GRAPHS not "0".
bool cuda_graphs_usable(torch::Device device);
void set_cuda_graphs_enabled(bool on);  // tests switch it directly

class StepGraph {
 public:
  // Call 1 runs fn() eagerly (warm-up: cuBLAS handles, kernel choices, autocast weight casts). Call 2
  // captures fn() on a side stream and replays it; later calls replay. fn must read its inputs from tensors
  // whose memory stays put, and may change device state in place (a position counter): a replay repeats
  // exactly that. The returned tensor is the graph's own memory, overwritten by the next replay.
  // Without graphs: fn().
  torch::Tensor run(torch::Device device, const std::function<torch::Tensor()>& fn);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  int calls_ = 0;
};

}  // namespace aobench::common
