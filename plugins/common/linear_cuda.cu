// Implements: the CUDA kernels of linear.h: the bias gradient of a training Linear, the fp32 column sums of its
// output's gradient g (M, N) in bf16, in two passes with a fixed order (the same bits every launch, on every GPU),
// alone or computed with g itself as GELU's backward. Pass 1: a block sums 256 columns over a slice of kSliceRows
// rows: each lane loads 8 columns (16 bytes) of every 8th row of the slice, so a warp reads 512 contiguous bytes
// of a row; the 8 warps' sums are added in warp order into partial (P, N), P = ⌈M / kSliceRows⌉. Pass 2: 32
// columns a block, 8 warps each adding a run of P / 8 consecutive partials in order, then the runs in order.
// ATen's bf16 sum(0) (a reduction kernel, then a cast of its bf16 result) read g at about a third of the HBM
// bandwidth (1.77 ms of a small GPT's step on an H200 for 2.7 GB, docs/results/perf/); after GELU's backward the
// sums cost no read of their own.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/types.h>

#include <cmath>
#include <cstdint>
#include <utility>

#include "plugins/common/cuda_vec.cuh"
#include "plugins/common/linear.h"

namespace aobench::common {
namespace {

using bf16 = c10::BFloat16;

constexpr int kWarps = 8;                            // warps a block
constexpr int kBlockCols = 32 * 8;                   // pass 1: columns a block, 8 a lane
constexpr int64_t kSliceRows = kColumnSumSliceRows;  // pass 1: rows a block (linear.h)
constexpr int kFinishCols = 32;                      // pass 2: columns a block, one a lane

// 8 consecutive elements of g, at offset i of a row-major (M, N) tensor.
struct LoadGradient {
  const bf16* g;
  __device__ __forceinline__ Pack<bf16, 8> operator()(int64_t i) const {
    return *reinterpret_cast<const Pack<bf16, 8>*>(g + i);
  }
};
// The same 8 elements of GELU's input gradient gelu'(pre)·g_h, written to g_pre: at::gelu_backward's float
// expressions (ATen's GeluBackwardCUDAKernelImpl), rounded once to bf16.
struct GeluBackward {
  const bf16* g_h;
  const bf16* pre;
  bf16* g_pre;
  bool tanh_approx;
  __device__ __forceinline__ Pack<bf16, 8> operator()(int64_t i) const {
    const auto dy = *reinterpret_cast<const Pack<bf16, 8>*>(g_h + i);
    const auto x = *reinterpret_cast<const Pack<bf16, 8>*>(pre + i);
    Pack<bf16, 8> out;
#pragma unroll
    for (int k = 0; k < 8; ++k) out.v[k] = grad(static_cast<float>(dy.v[k]), static_cast<float>(x.v[k]));
    *reinterpret_cast<Pack<bf16, 8>*>(g_pre + i) = out;
    return out;
  }
  __device__ __forceinline__ float grad(float dy, float x) const {
    if (tanh_approx) {
      constexpr float kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715f;
      const float x_sq = x * x, x_cube = x_sq * x, inner = kBeta * (x + kKappa * x_cube), t = tanhf(inner);
      const float left = 0.5f * x, right = 1.0f + t, left_derivative = 0.5f * right;
      const float right_derivative = 1.0f - t * t, inner_derivative = kBeta * (1.0f + 3.0f * kKappa * x_sq);
      return dy * (left_derivative + left * right_derivative * inner_derivative);
    }
    constexpr float kBeta = M_2_SQRTPI * M_SQRT1_2 * 0.5;
    const float cdf = 0.5f * (1.0f + erff(x * static_cast<float>(M_SQRT1_2)));
    const float pdf = expf(-0.5f * x * x) * kBeta;
    return dy * (cdf + x * pdf);
  }
};

template <typename Rows>
__global__ void __launch_bounds__(32 * kWarps)
    column_partials_kernel(const Rows rows, float* __restrict__ partial, int64_t M, int N) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col = static_cast<int>(blockIdx.x) * kBlockCols + lane * 8;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kSliceRows, r1 = min(M, r0 + kSliceRows);
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  if (col < N) {
#pragma unroll 4
    for (int64_t r = r0 + warp; r < r1; r += kWarps) {
      const auto v = rows(r * N + col);
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[k] += static_cast<float>(v.v[k]);
    }
  }
  __shared__ float4 red[kWarps][kBlockCols / 4];  // (warps, 256 columns)
  red[warp][lane * 2] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  red[warp][lane * 2 + 1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
  __syncthreads();
  const int c = static_cast<int>(threadIdx.x), out_col = static_cast<int>(blockIdx.x) * kBlockCols + c;
  if (out_col >= N) return;
  const float* sums = reinterpret_cast<const float*>(red);
  float s = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) s += sums[w * kBlockCols + c];
  partial[static_cast<int64_t>(blockIdx.y) * N + out_col] = s;
}

__global__ void __launch_bounds__(32 * kWarps)
    column_finish_kernel(const float* __restrict__ partial, float* __restrict__ out, int P, int N) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col = static_cast<int>(blockIdx.x) * kFinishCols + lane;
  const int run = (P + kWarps - 1) / kWarps, p0 = min(P, warp * run), p1 = min(P, p0 + run);
  float s = 0.f;
  if (col < N) {
#pragma unroll 8
    for (int p = p0; p < p1; ++p) s += partial[static_cast<int64_t>(p) * N + col];
  }
  __shared__ float red[kWarps][kFinishCols];
  red[warp][lane] = s;
  __syncthreads();
  if (warp != 0 || col >= N) return;
  float t = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) t += red[w][lane];
  out[col] = t;
}

// The column sums (N) in fp32 of the (M, N) rows `rows` yields (zeros for M = 0, no launch).
template <typename Rows>
torch::Tensor column_sums(const Rows& rows, int64_t M, int64_t N, const torch::TensorOptions& options) {
  if (M == 0) return torch::zeros({N}, options.dtype(torch::kFloat32));
  auto out = torch::empty({N}, options.dtype(torch::kFloat32));
  const int64_t P = (M + kSliceRows - 1) / kSliceRows;
  auto partial = torch::empty({P, N}, out.options());
  const auto stream = at::cuda::getCurrentCUDAStream();
  const unsigned col_blocks = static_cast<unsigned>((N + kBlockCols - 1) / kBlockCols);
  column_partials_kernel<Rows><<<dim3(col_blocks, static_cast<unsigned>(P)), 32 * kWarps, 0, stream>>>(
      rows, partial.data_ptr<float>(), M, static_cast<int>(N));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  column_finish_kernel<<<static_cast<unsigned>((N + kFinishCols - 1) / kFinishCols), 32 * kWarps, 0, stream>>>(
      partial.data_ptr<float>(), out.data_ptr<float>(), static_cast<int>(P), static_cast<int>(N));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
const bf16* bf16_data(const torch::Tensor& t) { return reinterpret_cast<const bf16*>(t.data_ptr()); }

}  // namespace

torch::Tensor bias_grad_cuda(const torch::Tensor& g) {
  TORCH_CHECK(column_sum_kernel_takes(g), "bias_grad_cuda: g must be a contiguous, 16-byte aligned bf16 CUDA (M, N) ",
              "with N a multiple of 8, got ", g.sizes(), " ", g.scalar_type());
  const c10::cuda::CUDAGuard guard(g.device());
  return column_sums(LoadGradient{bf16_data(g)}, g.size(0), g.size(1), g.options());
}

std::pair<torch::Tensor, torch::Tensor> gelu_backward_bias_grad_cuda(const torch::Tensor& g_h, const torch::Tensor& pre,
                                                                     bool tanh_approx) {
  TORCH_CHECK(column_sum_kernel_takes(g_h) && column_sum_kernel_takes(pre) && g_h.sizes() == pre.sizes() &&
                  g_h.device() == pre.device(),
              "gelu_backward_bias_grad_cuda: g_h ", g_h.sizes(), " and pre ", pre.sizes(),
              " must be the same contiguous, 16-byte aligned bf16 CUDA (M, N), N a multiple of 8");
  const c10::cuda::CUDAGuard guard(g_h.device());
  auto g_pre = torch::empty_like(g_h);
  const GeluBackward rows{bf16_data(g_h), bf16_data(pre), reinterpret_cast<bf16*>(g_pre.data_ptr()), tanh_approx};
  return {g_pre, column_sums(rows, g_h.size(0), g_h.size(1), g_h.options())};
}

}  // namespace aobench::common
