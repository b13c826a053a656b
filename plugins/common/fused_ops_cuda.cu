// Implements: the CUDA kernels of plugins/common/fused_ops.h. row_logsumexp: one thread block per row reads
// the row once with 16-byte loads and keeps an online (max, Σ exp(x − max)) pair in fp32, so a (N, 50k)
// bf16 logit matrix costs one read (≈ 3.3 GB at N = 32k) instead of an fp32 copy plus log_softmax passes.
// add_layer_norm: one block per row reads x and y once and writes x + y and its LayerNorm once.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/types.h>

#include <cstdint>
#include <type_traits>

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
                                     float* __restrict__ out) {
  const T* row = x + static_cast<int64_t>(blockIdx.x) * row_stride;
  float m = -INFINITY, s = 0.f;
  bool nan_seen = false;
  constexpr int kVec = 16 / sizeof(T);  // elements per 16-byte load
  int64_t done = 0;
  if (reinterpret_cast<std::uintptr_t>(row) % 16 == 0) {
    const int64_t packs = cols / kVec;
    const uint4* rv = reinterpret_cast<const uint4*>(row);
    for (int64_t i = threadIdx.x; i < packs; i += kThreads) {
      const uint4 raw = __ldg(rv + i);
      const T* e = reinterpret_cast<const T*>(&raw);
      float v[kVec], pm = -INFINITY;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        v[k] = static_cast<float>(e[k]);
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
    const float v = static_cast<float>(row[j]);
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

// Sum over the block, returned to every thread. shm holds 32 floats; safe to call repeatedly.
__device__ __forceinline__ float block_sum(float v, float* shm) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  __syncthreads();  // the previous call's readers are done with shm
  if (threadIdx.x % 32 == 0) shm[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x % 32 < blockDim.x / 32 ? shm[threadIdx.x % 32] : 0.f;
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

constexpr int kLnThreads = 256;

// One block per row of d ≤ kLnThreads·kPer: s = x + y kept in registers, two-pass mean / variance in fp32
// (biased, as layer_norm), then s and h = (s − μ)·rstd·w + b written once each.
template <typename Ty, int kPer>
__global__ void add_layer_norm_kernel(const float* __restrict__ x, const Ty* __restrict__ y,
                                      const float* __restrict__ w, const float* __restrict__ b, int d, float eps,
                                      float* __restrict__ s_out, Ty* __restrict__ h_out) {
  __shared__ float shm[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * d;
  float v[kPer];
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int j = threadIdx.x + i * kLnThreads;
    v[i] = j < d ? x[base + j] + static_cast<float>(y[base + j]) : 0.f;
    sum += v[i];
  }
  const float mean = block_sum(sum, shm) / d;
  float sq = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int j = threadIdx.x + i * kLnThreads;
    const float c = j < d ? v[i] - mean : 0.f;
    sq += c * c;
  }
  const float rstd = rsqrtf(block_sum(sq, shm) / d + eps);
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int j = threadIdx.x + i * kLnThreads;
    if (j >= d) continue;
    s_out[base + j] = v[i];
    h_out[base + j] = static_cast<Ty>((v[i] - mean) * rstd * w[j] + (b ? b[j] : 0.f));
  }
}

}  // namespace

bool add_layer_norm_cuda_supports(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& weight,
                                  const torch::Tensor& bias) {
  const auto f32 = torch::kFloat32;
  const auto yt = y.scalar_type();
  return x.scalar_type() == f32 && x.is_contiguous() && y.is_contiguous() && weight.is_contiguous() &&
         weight.scalar_type() == f32 && (!bias.defined() || (bias.is_contiguous() && bias.scalar_type() == f32)) &&
         (yt == torch::kBFloat16 || yt == torch::kHalf || yt == f32) && x.size(-1) <= 16 * kLnThreads &&
         y.device() == x.device() && weight.device() == x.device();
}

std::pair<torch::Tensor, torch::Tensor> add_layer_norm_cuda(const torch::Tensor& x, const torch::Tensor& y,
                                                            const torch::Tensor& weight,
                                                            const torch::Tensor& bias, double eps) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t d = x.size(-1), rows = x.numel() / std::max<int64_t>(d, 1);
  auto s = torch::empty_like(x);
  auto h = torch::empty_like(y);
  if (rows == 0) return {s, h};
  TORCH_CHECK(rows <= 0x7fffffff, "add_layer_norm: too many rows (", rows, ")");
  const auto stream = at::cuda::getCurrentCUDAStream();
  const float* b = bias.defined() ? bias.data_ptr<float>() : nullptr;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, y.scalar_type(), "add_layer_norm", [&] {
    auto launch = [&](auto per) {
      add_layer_norm_kernel<scalar_t, decltype(per)::value><<<static_cast<unsigned>(rows), kLnThreads, 0, stream>>>(
          x.data_ptr<float>(), y.data_ptr<scalar_t>(), weight.data_ptr<float>(), b, static_cast<int>(d),
          static_cast<float>(eps), s.data_ptr<float>(), h.data_ptr<scalar_t>());
    };
    if (d <= 4 * kLnThreads) launch(std::integral_constant<int, 4>());
    else if (d <= 8 * kLnThreads) launch(std::integral_constant<int, 8>());
    else launch(std::integral_constant<int, 16>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {s, h};
}

torch::Tensor row_logsumexp_cuda(const torch::Tensor& x, int64_t cols) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t N = x.size(0);
  auto out = torch::empty({N}, x.options().dtype(torch::kFloat32));
  if (N == 0) return out;
  TORCH_CHECK(N <= 0x7fffffff, "row_logsumexp: too many rows (", N, ")");
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "row_logsumexp", [&] {
    row_logsumexp_kernel<scalar_t><<<static_cast<unsigned>(N), kThreads, 0, stream>>>(
        x.data_ptr<scalar_t>(), x.stride(0), cols, out.data_ptr<float>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace aobench::common
