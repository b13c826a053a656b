// Implements: plugins/common/cuda_graph.h (at::cuda::CUDAGraph when the CUDA kernels are built).
#include "plugins/common/cuda_graph.h"

#ifdef AOBENCH_FUSED_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include "core/device.h"

namespace aobench::common {

namespace {
EnvSwitch graphs_switch("AOBENCH_CUDA_GRAPHS");
}  // namespace

void set_cuda_graphs_enabled(bool on) { graphs_switch.set(on); }

bool cuda_graphs_usable(torch::Device device) {
#ifdef AOBENCH_FUSED_CUDA
  return device.is_cuda() && graphs_switch.on();
#else
  (void)device;
  return false;
#endif
}

struct StepGraph::Impl {
#ifdef AOBENCH_FUSED_CUDA
  at::cuda::CUDAGraph graph;
#endif
  torch::Tensor out;
};

torch::Tensor StepGraph::run(torch::Device device, const std::function<torch::Tensor()>& fn) {
  if (!cuda_graphs_usable(device) || calls_++ == 0) return fn();
#ifdef AOBENCH_FUSED_CUDA
  if (!impl_) {
    auto impl = std::make_shared<Impl>();
    c10::cuda::CUDAGuard device_guard(device);
    torch::cuda::synchronize(device.index() < 0 ? -1 : device.index());  // nothing pending reads the pool
    {
      // Capture must happen off the legacy default stream; replays run on the caller's current stream.
      c10::cuda::CUDAStreamGuard stream_guard(at::cuda::getStreamFromPool(false, device.index()));
      impl->graph.capture_begin();
      impl->out = fn();
      impl->graph.capture_end();
    }
    impl_ = impl;
  }
  impl_->graph.replay();
  return impl_->out;
#else
  return fn();
#endif
}

}  // namespace aobench::common
