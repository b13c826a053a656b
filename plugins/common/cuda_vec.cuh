// Device helpers shared by the CUDA kernels of plugins/common (fused_ops_cuda.cu) and plugins/ao_gpt
// (fused_norms_cuda.cu): a kV-element pack for one vector load/store, and a warp-wide sum.
#pragma once

namespace aobench::common {

template <typename T, int kV>
struct alignas(sizeof(T) * kV) Pack {
  T v[kV];
};

__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

}  // namespace aobench::common
