// Device helpers shared by the CUDA kernels of plugins/common (fused_ops_cuda.cu) and plugins/ao_gpt
// (fused_norms_cuda.cu): a kV-element pack for one vector load/store, a warp-wide and a row-wide sum, the column
// sums of a block's per-warp partials, programmatic dependent launch, and the host-side dtype and lane-count
// dispatch and row split of their launches.
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <c10/core/ScalarType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>
#include <cuda_runtime.h>

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

// Host side: Kernel<<<grid, block, 0, stream>>>(args…), launched as a programmatic dependent (PDL) when
// `dependent` and the code that runs has the wait: compiled from sm_90 PTX or later (a build for older
// architectures, JIT-compiled on a Hopper, has none, and launched early it would read its inputs too soon).
// A dependent's blocks start once every block of the kernel before has let them (let_dependents_launch) or
// ended, so they never take the place of one of its blocks. `cluster` > 1: thread-block clusters of that many
// consecutive blocks along x (sm_90; grid.x a multiple of it).
template <auto Kernel, typename... Args>
void launch_cluster_kernel(dim3 grid, dim3 block, unsigned cluster, cudaStream_t stream, bool dependent,
                           const Args&... args) {
  static const bool has_wait = [] {
    cudaFuncAttributes a{};
    if (cudaFuncGetAttributes(&a, Kernel) == cudaSuccess) return a.ptxVersion >= 90;
    (void)cudaGetLastError();  // not this launch's error
    return false;
  }();
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  cudaLaunchAttribute attrs[2];
  int n = 0;
  if (dependent && has_wait) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n++].val.clusterDim = {cluster, 1, 1};
  }
  config.attrs = attrs;
  config.numAttrs = n;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, Kernel, args...));
}
template <auto Kernel, typename... Args>
void launch_kernel(dim3 grid, dim3 block, cudaStream_t stream, bool dependent, const Args&... args) {
  launch_cluster_kernel<Kernel>(grid, block, 1u, stream, dependent, args...);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Sum of v over the kSplit warps of a block that holds one row in exactly kSplit warps (kSplit = 1: the warp
// alone, any block), added in warp order in every thread: the same bits every launch. With kSplit > 1 every
// thread of the block calls it.
template <int kSplit>
__device__ __forceinline__ float row_sum(float v) {
  v = warp_sum(v);
  if constexpr (kSplit > 1) {
    __shared__ float red[kSplit];
    __syncthreads();  // the previous call's readers are done with red
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    v = 0.f;
#pragma unroll
    for (int w = 0; w < kSplit; ++w) v += red[w];
  }
  return v;
}

// Host side, for the row kernels over C chunks of 128 columns (a lane's 4 elements a chunk): whether `rows` are
// few enough (at most 8 per SM) to take a block a row, a warp a chunk (row_sum), rather than a warp a row (a
// decode step's 32 rows, a warp each, were latency-bound); and the launch shape of each, passed to
// fn(split, grid, block) with split the kernel's warps per row: C, or 1 with kRows rows a block.
inline bool block_per_row(int64_t rows) {
  return rows <= 8 * static_cast<int64_t>(at::cuda::getCurrentDeviceProperties()->multiProcessorCount);
}
template <int C, int kRows, typename Fn>
void split_rows(bool per_row, int64_t rows, Fn&& fn) {
  if (per_row)
    fn(std::integral_constant<int, C>(), dim3(static_cast<unsigned>(rows)), dim3(32 * C));
  else
    fn(std::integral_constant<int, 1>(), dim3(static_cast<unsigned>((rows + kRows - 1) / kRows)), dim3(32 * kRows));
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
