// Implements: the CUDA kernels of plugins/common/cross_entropy.h. row_logsumexp: one thread block per row reads
// the row once with 16-byte loads and keeps an online (max, Σ exp(x − max)) pair in fp32, so a (N, 50k) bf16
// logit matrix costs one read (≈ 3.3 GB at N = 32k) instead of an fp32 copy plus log_softmax passes.
// lm_cross_entropy's backward writes (softmax − onehot)·g in one pass over the logits (and the head bias's
// gradient as per-block column sums).
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/types.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "plugins/common/cross_entropy.h"
#include "plugins/common/cuda_vec.cuh"

namespace aobench::common {
namespace {

constexpr int kThreads = 512;

// (m, s) ← (m, s) ⊕ (m2, s2) for the pairs (max, Σ exp(x − max)); an empty partner has m2 = −inf.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY && !isnan(s2)) return;  // empty partner; a NaN sum always propagates
  if (m < m2) {
    s = s * expf(m - m2) + s2;  // m = −inf → s = s2
    m = m2;
  } else {
    s += s2 * expf(m2 - m);
  }
}

template <typename T>
__global__ void row_logsumexp_kernel(const T* __restrict__ x, int64_t row_stride, int64_t cols,
                                     const int64_t* __restrict__ rows, const T* __restrict__ bias,
                                     float* __restrict__ out) {
  const T* row = x + (rows ? rows[blockIdx.x] : static_cast<int64_t>(blockIdx.x)) * row_stride;
  float m = -INFINITY, s = 0.f;
  bool nan_seen = false;
  constexpr int kVec = 16 / sizeof(T);  // elements per 16-byte load
  int64_t done = 0;
  if (reinterpret_cast<std::uintptr_t>(row) % 16 == 0) {
    const int64_t packs = cols / kVec;
    const uint4* rv = reinterpret_cast<const uint4*>(row);
    for (int64_t i = threadIdx.x; i < packs; i += kThreads) {
      const uint4 raw = __ldg(rv + i), braw = bias ? __ldg(reinterpret_cast<const uint4*>(bias) + i) : uint4{};
      const T* e = reinterpret_cast<const T*>(&raw);
      const T* be = reinterpret_cast<const T*>(&braw);
      float v[kVec], pm = -INFINITY;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        v[k] = static_cast<float>(e[k]) + (bias ? static_cast<float>(be[k]) : 0.f);
        pm = fmaxf(pm, v[k]);
        nan_seen |= isnan(v[k]);
      }
      if (pm == -INFINITY) continue;  // fmaxf skips NaN, so an all-NaN pack lands here too
      float ps = 0.f;
#pragma unroll
      for (int k = 0; k < kVec; ++k) ps += expf(v[k] - pm);
      merge(m, s, pm, ps);
    }
    done = packs * kVec;
  }
  for (int64_t j = done + threadIdx.x; j < cols; j += kThreads) {
    const float v = static_cast<float>(row[j]) + (bias ? static_cast<float>(bias[j]) : 0.f);
    nan_seen |= isnan(v);
    merge(m, s, v, 1.f);
  }
  if (nan_seen) s = NAN;  // a NaN logit makes the row NaN (s stays NaN through every merge)
  for (int off = 16; off > 0; off >>= 1)
    merge(m, s, __shfl_xor_sync(0xffffffffu, m, off), __shfl_xor_sync(0xffffffffu, s, off));
  __shared__ float wm[kThreads / 32], ws[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    wm[warp] = m;
    ws[warp] = s;
  }
  __syncthreads();
  if (warp != 0) return;
  m = lane < kThreads / 32 ? wm[lane] : -INFINITY;
  s = lane < kThreads / 32 ? ws[lane] : 0.f;
  for (int off = 16; off > 0; off >>= 1)
    merge(m, s, __shfl_xor_sync(0xffffffffu, m, off), __shfl_xor_sync(0xffffffffu, s, off));
  if (lane == 0) out[blockIdx.x] = isnan(s) ? NAN : (m == -INFINITY ? -INFINITY : m + logf(s));
}

}  // namespace

namespace {
// The head bias as the kernels read it: in dtype, contiguous and 16-byte aligned (a fresh copy if not), for
// their packed loads; undefined stays undefined.
torch::Tensor kernel_bias(const torch::Tensor& bias, torch::ScalarType dtype) {
  if (!bias.defined()) return bias;
  torch::Tensor b = bias.to(dtype).contiguous();
  return reinterpret_cast<std::uintptr_t>(b.data_ptr()) % 16 == 0 ? b : b.clone();
}

// ∂ mean CE / ∂x for one row per block: (exp(x + b − lse) − [j = target])·g for j < cols, 0 for the padded
// columns up to width (b: the head bias, or 0); 16-byte loads and stores when both rows are aligned (the
// padded head width is).
template <typename T>
__global__ void lm_ce_backward_kernel(const T* __restrict__ x, int64_t x_stride, const T* __restrict__ bias,
                                      T* __restrict__ gx, int64_t width, int64_t cols, const float* __restrict__ lse,
                                      const int64_t* __restrict__ targets, const float* __restrict__ grad_scale) {
  const int64_t r = blockIdx.x;
  const T* row = x + r * x_stride;
  T* grow = gx + r * width;
  const float l = lse[r], g = *grad_scale;
  const int64_t t = targets[r];
  auto value = [&](int64_t j, float v) {
    return j < cols ? (expf(v + (bias ? static_cast<float>(bias[j]) : 0.f) - l) - (j == t ? 1.f : 0.f)) * g : 0.f;
  };
  constexpr int kVec = 16 / sizeof(T);
  int64_t done = 0;
  if (reinterpret_cast<std::uintptr_t>(row) % 16 == 0 && reinterpret_cast<std::uintptr_t>(grow) % 16 == 0) {
    const int64_t packs = width / kVec;
    const auto* rv = reinterpret_cast<const Pack<T, kVec>*>(row);
    auto* gv = reinterpret_cast<Pack<T, kVec>*>(grow);
    for (int64_t i = threadIdx.x; i < packs; i += kThreads) {
      const Pack<T, kVec> in = rv[i];
      Pack<T, kVec> out;
#pragma unroll
      for (int k = 0; k < kVec; ++k) out.v[k] = static_cast<T>(value(i * kVec + k, static_cast<float>(in.v[k])));
      gv[i] = out;
    }
    done = packs * kVec;
  }
  for (int64_t j = done + threadIdx.x; j < width; j += kThreads)
    grow[j] = static_cast<T>(value(j, static_cast<float>(row[j])));
}

constexpr int kColThreads = 256;  // lm_ce_backward_bias_kernel's block: 256 16-byte packs of columns

// The same with the head bias's gradient: block (x, y) covers kColThreads 16-byte packs of columns of the
// rows [y·rows_per_block, (y+1)·rows_per_block), each thread walking its pack down the rows, and writes its
// columns' sums of ∂x (fp32, before the rounding to T) into part (gridDim.y, width): Σ over rows of ∂x is
// then part.sum(0), without reading the (N, width) gradient again. The grid is one wave of resident blocks
// (a few thousand short blocks left a nearly empty last wave). Needs width % kVec = 0, 16-byte aligned rows.
template <typename T>
__global__ void __launch_bounds__(kColThreads)
    lm_ce_backward_bias_kernel(const T* __restrict__ x, int64_t x_stride, const T* __restrict__ bias,
                               T* __restrict__ gx, int64_t width, int64_t cols, int64_t rows, int64_t rows_per_block,
                               const float* __restrict__ lse, const int64_t* __restrict__ targets,
                               const float* __restrict__ grad_scale, float* __restrict__ part) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * kColThreads + threadIdx.x) * kVec;
  if (c0 >= width) return;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_block;
  const int64_t r1 = r0 + rows_per_block < rows ? r0 + rows_per_block : rows;
  const float g = *grad_scale;
  const Pack<T, kVec> bp = *reinterpret_cast<const Pack<T, kVec>*>(bias + c0);
  float b[kVec], acc[kVec] = {};
#pragma unroll
  for (int k = 0; k < kVec; ++k) b[k] = static_cast<float>(bp.v[k]);
#pragma unroll 4
  for (int64_t r = r0; r < r1; ++r) {
    const float l = lse[r];
    const int64_t t = targets[r];
    const Pack<T, kVec> in = *reinterpret_cast<const Pack<T, kVec>*>(x + r * x_stride + c0);
    Pack<T, kVec> out;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int64_t j = c0 + k;
      const float v = j < cols ? (expf(static_cast<float>(in.v[k]) + b[k] - l) - (j == t ? 1.f : 0.f)) * g : 0.f;
      out.v[k] = static_cast<T>(v);
      acc[k] += v;
    }
    *reinterpret_cast<Pack<T, kVec>*>(gx + r * width + c0) = out;
  }
  float* dst = part + static_cast<int64_t>(blockIdx.y) * width + c0;
#pragma unroll
  for (int k = 0; k < kVec; ++k) dst[k] = acc[k];
}
}  // namespace

std::pair<torch::Tensor, torch::Tensor> lm_cross_entropy_backward_cuda(const torch::Tensor& logits,
                                                                       const torch::Tensor& bias,
                                                                       const torch::Tensor& targets,
                                                                       const torch::Tensor& lse,
                                                                       const torch::Tensor& grad_scale, int64_t vocab) {
  const c10::cuda::CUDAGuard guard(logits.device());
  const int64_t N = logits.size(0), width = logits.size(1);
  auto grad = torch::empty({N, width}, logits.options());  // contiguous (N, V_pad)
  torch::Tensor grad_bias;
  if (N == 0) return {grad, bias.defined() ? torch::zeros_like(bias) : grad_bias};
  TORCH_CHECK(N <= 0x7fffffff, "lm_cross_entropy: too many rows (", N, ")");
  const auto t = targets.contiguous();
  const auto l = lse.contiguous();
  const auto g = grad_scale.to(logits.device(), torch::kFloat32).contiguous();
  const auto b = kernel_bias(bias, logits.scalar_type());
  const int64_t vec = 16 / logits.element_size();
  const bool tiled = b.defined() && width % vec == 0 && logits.stride(0) % vec == 0 &&
                     reinterpret_cast<std::uintptr_t>(logits.data_ptr()) % 16 == 0;
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, logits.scalar_type(), "lm_cross_entropy_backward", [&] {
    const scalar_t* bp = b.defined() ? b.data_ptr<scalar_t>() : nullptr;
    if (tiled) {
      // One wave: as many row bands as resident blocks allow beside the column blocks, ≥ 16 rows each.
      const int64_t per_block = kColThreads * vec, col_blocks = (width + per_block - 1) / per_block;
      int resident = 0;
      C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, lm_ce_backward_bias_kernel<scalar_t>,
                                                                   kColThreads, 0));
      const int64_t slots = std::max(1, resident) * at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
      const int64_t bands = std::clamp<int64_t>(slots / col_blocks, 1, std::min<int64_t>((N + 15) / 16, 65535));
      const int64_t rows_per_band = (N + bands - 1) / bands;
      auto part = torch::empty({bands, width}, logits.options().dtype(torch::kFloat32));
      const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(bands));
      lm_ce_backward_bias_kernel<scalar_t><<<grid, kColThreads, 0, stream>>>(
          logits.data_ptr<scalar_t>(), logits.stride(0), bp, grad.data_ptr<scalar_t>(), width, vocab, N, rows_per_band,
          l.data_ptr<float>(), t.data_ptr<int64_t>(), g.data_ptr<float>(), part.data_ptr<float>());
      grad_bias = part.sum(0);
    } else {
      lm_ce_backward_kernel<scalar_t><<<static_cast<unsigned>(N), kThreads, 0, stream>>>(
          logits.data_ptr<scalar_t>(), logits.stride(0), bp, grad.data_ptr<scalar_t>(), width, vocab,
          l.data_ptr<float>(), t.data_ptr<int64_t>(), g.data_ptr<float>());
      if (b.defined()) grad_bias = grad.sum(0, /*keepdim=*/false, torch::kFloat32);
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (grad_bias.defined()) grad_bias = grad_bias.to(bias.scalar_type());
  return {grad, grad_bias};
}

torch::Tensor row_logsumexp_cuda(const torch::Tensor& x, int64_t cols, const torch::Tensor& rows,
                                 const torch::Tensor& bias) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t N = rows.defined() ? rows.size(0) : x.size(0);
  const auto rows_l = rows.defined() ? rows.to(x.device(), torch::kLong).contiguous() : rows;
  auto out = torch::empty({N}, x.options().dtype(torch::kFloat32));
  if (N == 0) return out;
  TORCH_CHECK(N <= 0x7fffffff, "row_logsumexp: too many rows (", N, ")");
  const torch::Tensor b = kernel_bias(bias, x.scalar_type());
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "row_logsumexp", [&] {
    row_logsumexp_kernel<scalar_t><<<static_cast<unsigned>(N), kThreads, 0, stream>>>(
        x.data_ptr<scalar_t>(), x.stride(0), cols, rows_l.defined() ? rows_l.data_ptr<int64_t>() : nullptr,
        b.defined() ? b.data_ptr<scalar_t>() : nullptr, out.data_ptr<float>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace aobench::common
