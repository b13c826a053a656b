// Implements: a whole single-process training step (forward, backward, gradient norm, clipping, AdamW)
// recorded once in a CUDA graph and replayed on each new batch (DESIGN.md §3). A small model's step is
// ~900 kernel launches; launched one by one from the host they leave the GPU idle between the short ones
// (docs/results/perf/README.md), while a replay is one launch. AOBENCH_CUDA_GRAPHS=0 keeps every step
// uncaptured, the path the captured one is tested against (tests/integration/train_test.cpp).
#pragma once

#include <functional>
#include <memory>

#include <torch/torch.h>

namespace aobench {

// Whether training steps on `device` may be captured: a CUDA device and AOBENCH_CUDA_GRAPHS not "0" (read
// on each call, so a test can switch it).
bool train_graphs_enabled(torch::Device device);

// Makes a side stream current for a whole capturable run, its uncaptured steps included (once the device
// has finished what was queued before), and restores the previous stream at the end. Autograd runs a
// parameter's gradient accumulator on the stream the accumulator was made on, and data parallel keeps those
// nodes alive across steps (harness/train/grad_buckets.h): a graph recorded on another stream would make that one
// wait on the capture, which CUDA refuses. capture() records on the current stream when it is a side stream.
// Inactive (no-op) when `active` is false or `device` is not CUDA.
class TrainStreamScope {
 public:
  TrainStreamScope(torch::Device device, bool active);
  ~TrainStreamScope();  // waits for the side stream before restoring the previous one
  TrainStreamScope(const TrainStreamScope&) = delete;
  TrainStreamScope& operator=(const TrainStreamScope&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class TrainStepGraph {
 public:
  explicit TrainStepGraph(torch::Device device);
  ~TrainStepGraph();
  TrainStepGraph(const TrainStepGraph&) = delete;
  TrainStepGraph& operator=(const TrainStepGraph&) = delete;

  // Records fn() on a side stream (the current one, unless that is the default stream) after the device is
  // idle and the allocator's unused blocks are released; nothing runs until replay(). fn must read its inputs
  // from tensors whose memory stays put and leave its outputs in tensors the caller keeps. If fn or the capture
  // throws, the capture is ended and the error rethrown; the graph is then unusable.
  void capture(const std::function<void()>& fn);
  // One run of the recorded step on the caller's current stream.
  void replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aobench
