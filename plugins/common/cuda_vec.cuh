// Device helpers shared by the CUDA kernels of plugins/common (fused_ops_cuda.cu) and plugins/ao_gpt
// (fused_norms_cuda.cu): a kV-element pack for one vector load/store, a warp-wide sum, the column sums of a
// block's per-warp partials, and the host-side dtype and lane-count dispatch of their launches.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <type_traits>

namespace aobench::common {

// Host side: calls fn(T{}) with T the C++ type of dtype, one of the kernels' float, bfloat16 and half.
template <typename Fn>
void dispatch_type(c10::ScalarType dtype, Fn&& fn) {
  switch (dtype) {
    case c10::ScalarType::Float:
      fn(float{});
      break;
    case c10::ScalarType::BFloat16:
      fn(c10::BFloat16{});
      break;
    case c10::ScalarType::Half:
      fn(c10::Half{});
      break;
    default:
      TORCH_CHECK(false, "unsupported dtype ", dtype, " (the kernels take float, bfloat16 and half)");
  }
}

// Host side: calls fn(std::integral_constant<int, L>()) for L ∈ {4, 8, 16, 32} lanes (a head of L vector loads).
template <typename Fn>
void dispatch_lanes(int64_t lanes, Fn&& fn) {
  switch (lanes) {
    case 4:
      fn(std::integral_constant<int, 4>());
      break;
    case 8:
      fn(std::integral_constant<int, 8>());
      break;
    case 16:
      fn(std::integral_constant<int, 16>());
      break;
    case 32:
      fn(std::integral_constant<int, 32>());
      break;
    default:
      TORCH_CHECK(false, lanes, " lanes per head are not covered (4, 8, 16 or 32)");
  }
}

template <typename T, int kV>
struct alignas(sizeof(T) * kV) Pack {
  T v[kV];
};

// Programmatic dependent launch (sm_90; nothing before): a kernel launched with PDL waits here until the grids
// before it have completed and their writes are visible; it must read their outputs, and write any memory,
// only after the wait.
__device__ __forceinline__ void wait_for_inputs() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
// Lets a kernel launched after this one with PDL start its blocks (they still wait_for_inputs before reading
// this kernel's writes); without such a kernel it does nothing.
__device__ __forceinline__ void let_dependents_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Sums acc (each lane's 4 columns per 128-column chunk, the warp-per-row layout) over the block's kW warps
// into out[j] = scale_j · Σ (scale null: 1), j < d = 128·C, in a fixed order (deterministic). red: shared
// (kW, d) floats; every thread of the block must call it.
template <int kW, int C>
__device__ __forceinline__ void sum_warps(const float (&acc)[C][4], float* red, float* out, const float* scale) {
  constexpr int d = 128 * C;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // the previous call's readers are done with red
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int k = 0; k < 4; ++k) red[warp * d + c * 128 + lane * 4 + k] = acc[c][k];
  __syncthreads();
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    float t = 0.f;
#pragma unroll
    for (int q = 0; q < kW; ++q) t += red[q * d + j];
    out[j] = scale ? t * scale[j] : t;
  }
}

}  // namespace aobench::common
