// Device helpers shared by the CUDA kernels of plugins/common (fused_ops_cuda.cu) and plugins/ao_gpt
// (fused_norms_cuda.cu): a kV-element pack for one vector load/store, a warp-wide sum, and the column sums
// of a block's per-warp partials.
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
