// Implements: harness/train/graph.h (at::cuda::CUDAGraph around a whole training step).
#include "harness/train/graph.h"

#include <optional>

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>

#include "core/device.h"

namespace aobench {

bool train_graphs_enabled(torch::Device device) { return device.is_cuda() && env_switch_on("AOBENCH_CUDA_GRAPHS"); }

struct TrainStreamScope::Impl {
  std::optional<c10::cuda::CUDAStreamGuard> guard;
};

TrainStreamScope::TrainStreamScope(torch::Device device, bool active) : impl_(std::make_unique<Impl>()) {
  if (!active || !device.is_cuda()) return;
  const int index = device.index() < 0 ? 0 : device.index();
  torch::cuda::synchronize(index);
  impl_->guard.emplace(at::cuda::getStreamFromPool(false, index));
}

TrainStreamScope::~TrainStreamScope() {
  if (!impl_->guard) return;
  try {
    impl_->guard->current_stream().synchronize();
  } catch (...) {}  // unwinding from a device error: nothing left to order
}

struct TrainStepGraph::Impl {
  explicit Impl(torch::Device d) : device(d) {}
  torch::Device device;
  at::cuda::CUDAGraph graph;
  bool ready = false;
};

TrainStepGraph::TrainStepGraph(torch::Device device) : impl_(std::make_unique<Impl>(device)) {}
TrainStepGraph::~TrainStepGraph() = default;

void TrainStepGraph::capture(const std::function<void()>& fn) {
  TORCH_CHECK(!impl_->ready, "TrainStepGraph: already captured");
  const int index = impl_->device.index() < 0 ? 0 : impl_->device.index();
  c10::cuda::CUDAGuard device_guard(index);
  torch::cuda::synchronize(index);
  // The eager warm-up steps' cached blocks go back to the device, so the graph's private pool can reuse
  // that memory instead of doubling the reservation.
  c10::cuda::CUDACachingAllocator::emptyCache();
  // Capture happens off the legacy default stream; the replays run on the caller's current stream.
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(index);
  c10::cuda::CUDAStreamGuard stream_guard(
      current == c10::cuda::getDefaultCUDAStream(index) ? at::cuda::getStreamFromPool(false, index) : current);
  impl_->graph.capture_begin();
  try {
    fn();
  } catch (...) {
    try {
      impl_->graph.capture_end();  // ends the stream's capture; throws for the invalidated capture
    } catch (...) {}
    throw;
  }
  impl_->graph.capture_end();
  impl_->ready = true;
}

void TrainStepGraph::replay() {
  TORCH_CHECK(impl_->ready, "TrainStepGraph: replay before a successful capture");
  impl_->graph.replay();
}

}  // namespace aobench
