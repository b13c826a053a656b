// Implements: the CUDA kernels of plugins/common/layer_norm.h. add_layer_norm: one block per row (or one warp
// per row for d = 128·k) reads x and y once and writes x + y and its (adaLN-modulated) LayerNorm once; its
// backward (training) recomputes the statistics from s and writes ∂x, ∂y and per-block weight partials in
// one pass.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/types.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "plugins/common/cuda_vec.cuh"
#include "plugins/common/decode_scope.h"
#include "plugins/common/kernel_util.h"
#include "plugins/common/layer_norm.h"

namespace aobench::common {
namespace {

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

// Per-sequence adaLN vectors, each (B, d) with unit column stride in Tm, or null: s = x + gate[b]·y,
// h = LN(s)·scale[b] + shift[b] with b = row / rows_per_seq (scale already holds 1 + γ). Row strides apart
// so they can be column slices of one (B, 6d) modulation output.
template <typename Tm>
struct AdaLN {
  const Tm *gate = nullptr, *scale = nullptr, *shift = nullptr;
  int64_t gate_stride = 0, scale_stride = 0, shift_stride = 0, rows_per_seq = 1;
};

// One block per row of d ≤ kLnThreads·kPer: s = x + y (y optional, gated) kept in registers, two-pass mean /
// variance in fp32 (biased, as layer_norm), then s and h = ((s − μ)·rstd·w + b)·scale + shift written once.
template <typename Ty, typename Tm, int kPer>
__global__ void add_layer_norm_kernel(const float* __restrict__ x, const Ty* __restrict__ y,
                                      const float* __restrict__ w, const float* __restrict__ b, AdaLN<Tm> mod, int d,
                                      float eps, float* __restrict__ s_out, Ty* __restrict__ h_out) {
  __shared__ float shm[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * d;
  const int64_t seq = static_cast<int64_t>(blockIdx.x) / mod.rows_per_seq;  // this row's sequence
  const Tm* gate = mod.gate ? mod.gate + seq * mod.gate_stride : nullptr;
  const Tm* scale = mod.scale ? mod.scale + seq * mod.scale_stride : nullptr;
  const Tm* shift = mod.shift ? mod.shift + seq * mod.shift_stride : nullptr;
  float v[kPer];
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int j = threadIdx.x + i * kLnThreads;
    float t = 0.f;
    if (j < d) {
      t = x[base + j];
      if (y) t += static_cast<float>(y[base + j]) * (gate ? static_cast<float>(gate[j]) : 1.f);
    }
    v[i] = t;
    sum += t;
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
    if (s_out) s_out[base + j] = v[i];
    float o = (v[i] - mean) * rstd * w[j] + (b ? b[j] : 0.f);
    if (scale) o *= static_cast<float>(scale[j]);
    if (shift) o += static_cast<float>(shift[j]);
    h_out[base + j] = static_cast<Ty>(o);
  }
}

// (μ, rstd = 1/√(var + eps)) of one row of d = 128·kChunks spread over kSplit warps (row_sum; 1: a warp): v holds
// this lane's 4 elements of each of its kChunks / kSplit chunks, sum their sum. The variance is the centred
// second pass, Σ (v − μ)² / d.
template <int kChunks, int kSplit = 1>
__device__ __forceinline__ float2 row_stats(const float (&v)[kChunks / kSplit][4], float sum, float eps) {
  constexpr int d = kChunks * 128;
  const float mean = row_sum<kSplit>(sum) / d;
  float sq = 0.f;
#pragma unroll
  for (int c = 0; c < kChunks / kSplit; ++c)
#pragma unroll
    for (int k = 0; k < 4; ++k) sq += (v[c][k] - mean) * (v[c][k] - mean);
  return make_float2(mean, rsqrtf(row_sum<kSplit>(sq) / d + eps));
}

// The same step for d = 128·kChunks, a row over kSplit warps, each lane 4 consecutive elements of each of its
// chunks (chunk c·kSplit + the warp's part) with 16-byte fp32 and 4-element loads. kSplit = 1: eight rows a
// block, reductions within the warp only (no block barriers). kSplit = kChunks: a row a block, a chunk a warp,
// for a decode step's few rows (a warp walking a whole row alone on its SM is latency-bound: ≈ 7 000 cycles).
template <typename Ty, int kChunks, int kSplit>
__global__ void add_layer_norm_warp_kernel(const float* __restrict__ x, const Ty* __restrict__ y,
                                           const float* __restrict__ w, const float* __restrict__ b, AdaLN<Ty> mod,
                                           int64_t rows, float eps, float* __restrict__ s_out, Ty* __restrict__ h_out) {
  static_assert(kSplit == 1 || kSplit == kChunks, "a warp a row, or a block of a warp a chunk a row (row_sum)");
  using P = Pack<Ty, 4>;
  constexpr int d = kChunks * 128, kMine = kChunks / kSplit;  // chunks of a lane
  let_dependents_launch();  // a decode step's next Linear (decode_linear) may start loading its weights
  wait_for_inputs();        // launched as a decode step's dependent: x and y are the kernels' before it
  const int lane = threadIdx.x % 32, part = threadIdx.x / 32 % kSplit;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32 / kSplit) + threadIdx.x / 32 / kSplit;
  if (row >= rows) return;  // kSplit > 1 launches a block a row: never taken before row_sum's barriers
  const int64_t base = row * d, seq = row / mod.rows_per_seq;
  const Ty* gate = mod.gate ? mod.gate + seq * mod.gate_stride : nullptr;
  const Ty* scale = mod.scale ? mod.scale + seq * mod.scale_stride : nullptr;
  const Ty* shift = mod.shift ? mod.shift + seq * mod.shift_stride : nullptr;
  float v[kMine][4];
  float4 wv[kMine], bv[kMine];  // with kSplit > 1 loaded before the barriers, so that x's latency hides theirs
  P sc[kMine], sh[kMine];
  auto load_affine = [&](int c, int j) {
    wv[c] = *reinterpret_cast<const float4*>(w + j);
    bv[c] = b ? *reinterpret_cast<const float4*>(b + j) : make_float4(0.f, 0.f, 0.f, 0.f);
    if (scale) sc[c] = *reinterpret_cast<const P*>(scale + j);
    if (shift) sh[c] = *reinterpret_cast<const P*>(shift + j);
  };
  float sum = 0.f;
#pragma unroll
  for (int c = 0; c < kMine; ++c) {
    const int j = (c * kSplit + part) * 128 + lane * 4;
    if constexpr (kSplit > 1) load_affine(c, j);
    const float4 xv = *reinterpret_cast<const float4*>(x + base + j);
    v[c][0] = xv.x, v[c][1] = xv.y, v[c][2] = xv.z, v[c][3] = xv.w;
    if (y) {
      const P yv = *reinterpret_cast<const P*>(y + base + j);
      P g;
      if (gate) g = *reinterpret_cast<const P*>(gate + j);
#pragma unroll
      for (int k = 0; k < 4; ++k) v[c][k] += static_cast<float>(yv.v[k]) * (gate ? static_cast<float>(g.v[k]) : 1.f);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) sum += v[c][k];
  }
  const float2 stats = row_stats<kChunks, kSplit>(v, sum, eps);
  const float mean = stats.x, rstd = stats.y;
#pragma unroll
  for (int c = 0; c < kMine; ++c) {
    const int j = (c * kSplit + part) * 128 + lane * 4;
    if (s_out) *reinterpret_cast<float4*>(s_out + base + j) = make_float4(v[c][0], v[c][1], v[c][2], v[c][3]);
    if constexpr (kSplit == 1) load_affine(c, j);
    const float wk[4] = {wv[c].x, wv[c].y, wv[c].z, wv[c].w}, bk[4] = {bv[c].x, bv[c].y, bv[c].z, bv[c].w};
    P o;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float t = (v[c][k] - mean) * rstd * wk[k] + bk[k];
      if (scale) t *= static_cast<float>(sc[c].v[k]);
      if (shift) t += static_cast<float>(sh[c].v[k]);
      o.v[k] = static_cast<Ty>(t);
    }
    *reinterpret_cast<P*>(h_out + base + j) = o;
  }
}

// Backward of (s, h) = (x + y, LN(s)·w + b) for d = 128·kChunks, the warp layout of the forward: each warp
// takes rows_per_warp consecutive rows, recomputes μ and rstd from the saved s (the forward's arithmetic,
// so the same values), and writes ∂x = ∂s_in + rstd·(g − mean(g) − x̂·mean(g·x̂)) with g = ∂h·w (fp32) and
// ∂y = ∂x in y's dtype. Σ ∂h·x̂ and Σ ∂h over the block's rows go to the block's row of pw / pb (summed by
// the caller: deterministic, no atomics; one row per block, not per warp, keeps those buffers 8× smaller).
constexpr int kLnBackwardWarps = 8;  // warps per block
template <typename Ty, int kChunks>
__global__ void __launch_bounds__(32 * kLnBackwardWarps)
    add_layer_norm_backward_kernel(const float* __restrict__ s, const Ty* __restrict__ gh, const float* __restrict__ gs,
                                   const float* __restrict__ w, int64_t rows, int64_t rows_per_warp, float eps,
                                   float* __restrict__ gx, Ty* __restrict__ gy, float* __restrict__ pw,
                                   float* __restrict__ pb) {
  using P = Pack<Ty, 4>;
  constexpr int d = kChunks * 128;
  const int lane = threadIdx.x % 32;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  float aw[kChunks][4] = {}, ab[kChunks][4] = {};
  for (int64_t r = 0; r < rows_per_warp; ++r) {
    const int64_t row = warp * rows_per_warp + r;
    if (row >= rows) break;
    const int64_t base = row * d;
    float v[kChunks][4], g[kChunks][4];
    float sum = 0.f;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const float4 sv = *reinterpret_cast<const float4*>(s + base + c * 128 + lane * 4);
      v[c][0] = sv.x, v[c][1] = sv.y, v[c][2] = sv.z, v[c][3] = sv.w;
#pragma unroll
      for (int k = 0; k < 4; ++k) sum += v[c][k];
    }
    const float2 stats = row_stats<kChunks>(v, sum, eps);
    const float mean = stats.x, rstd = stats.y;
    float s1 = 0.f, s2 = 0.f;  // Σ g, Σ g·x̂
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int j = c * 128 + lane * 4;
      const P hv = *reinterpret_cast<const P*>(gh + base + j);
      const float4 wv = __ldg(reinterpret_cast<const float4*>(w + j));
      const float wk[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float dh = static_cast<float>(hv.v[k]), xh = (v[c][k] - mean) * rstd;
        aw[c][k] += dh * xh;
        ab[c][k] += dh;
        g[c][k] = dh * wk[k];
        v[c][k] = xh;  // v holds x̂ from here on
        s1 += g[c][k];
        s2 += g[c][k] * xh;
      }
    }
    const float m1 = warp_sum(s1) / d, m2 = warp_sum(s2) / d;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int j = c * 128 + lane * 4;
      float4 in = gs ? *reinterpret_cast<const float4*>(gs + base + j) : make_float4(0.f, 0.f, 0.f, 0.f);
      const float ik[4] = {in.x, in.y, in.z, in.w};
      float o[4];
      P oy;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        o[k] = ik[k] + rstd * (g[c][k] - m1 - v[c][k] * m2);
        oy.v[k] = static_cast<Ty>(o[k]);
      }
      *reinterpret_cast<float4*>(gx + base + j) = make_float4(o[0], o[1], o[2], o[3]);
      *reinterpret_cast<P*>(gy + base + j) = oy;
    }
  }
  __shared__ float red[kLnBackwardWarps * d];
  sum_warps<kLnBackwardWarps, kChunks>(aw, red, pw + static_cast<int64_t>(blockIdx.x) * d, nullptr);
  sum_warps<kLnBackwardWarps, kChunks>(ab, red, pb + static_cast<int64_t>(blockIdx.x) * d, nullptr);
}

// Calls launch(std::integral_constant<int, kChunks>()) for kChunks = chunks (1 … 8; more is 8): the compile-time
// row width d = 128·kChunks of the warp-per-row kernels.
template <typename Launch>
void dispatch_chunks(int64_t chunks, Launch launch) {
  switch (chunks) {
    case 1:
      launch(std::integral_constant<int, 1>());
      break;
    case 2:
      launch(std::integral_constant<int, 2>());
      break;
    case 3:
      launch(std::integral_constant<int, 3>());
      break;
    case 4:
      launch(std::integral_constant<int, 4>());
      break;
    case 5:
      launch(std::integral_constant<int, 5>());
      break;
    case 6:
      launch(std::integral_constant<int, 6>());
      break;
    case 7:
      launch(std::integral_constant<int, 7>());
      break;
    default:
      launch(std::integral_constant<int, 8>());
      break;
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

// x (.., d) fp32; y like x in the output dtype, or undefined (then `out_dtype`); gate/scale/shift (B, d) or
// undefined, with B = x.size(0) sequences of x.numel() / (B·d) rows each.
std::pair<torch::Tensor, torch::Tensor> add_layer_norm_cuda(const torch::Tensor& x, const torch::Tensor& y,
                                                            const torch::Tensor& weight, const torch::Tensor& bias,
                                                            double eps, const torch::Tensor& gate,
                                                            const torch::Tensor& scale, const torch::Tensor& shift,
                                                            torch::ScalarType out_dtype, bool want_sum, bool training) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t d = x.size(-1), rows = x.numel() / std::max<int64_t>(d, 1);
  auto s = want_sum ? torch::empty_like(x) : torch::Tensor();
  auto h = torch::empty(x.sizes(), x.options().dtype(y.defined() ? y.scalar_type() : out_dtype));
  if (rows == 0) return {s, h};
  TORCH_CHECK(rows <= 0x7fffffff, "add_layer_norm: too many rows (", rows, ")");
  const auto stream = at::cuda::getCurrentCUDAStream();
  const float* b = bias.defined() ? bias.data_ptr<float>() : nullptr;
  const torch::Tensor& any_mod = gate.defined() ? gate : scale.defined() ? scale : shift;
  const int64_t rows_per_seq = any_mod.defined() ? rows / any_mod.size(0) : rows;
  // The warp kernel needs d = 128·k (k ≤ 8) and 16-byte (fp32) / 4-element aligned rows everywhere.
  const int64_t pack = 4 * static_cast<int64_t>(h.element_size());
  const bool warp_path = d % 128 == 0 && d <= 1024 && aligned(x, 16) && aligned(weight, 16) && aligned(bias, 16) &&
                         aligned(s, 16) && aligned(y, pack) && aligned(h, pack) && aligned(gate, pack) &&
                         aligned(scale, pack) && aligned(shift, pack) && (!gate.defined() || gate.stride(0) % 4 == 0) &&
                         (!scale.defined() || scale.stride(0) % 4 == 0) &&
                         (!shift.defined() || shift.stride(0) % 4 == 0);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, h.scalar_type(), "add_layer_norm", [&] {
    AdaLN<scalar_t> mod;  // the adaLN vectors have h's dtype (add_layer_norm checks)
    mod.gate = gate.defined() ? gate.data_ptr<scalar_t>() : nullptr;
    mod.scale = scale.defined() ? scale.data_ptr<scalar_t>() : nullptr;
    mod.shift = shift.defined() ? shift.data_ptr<scalar_t>() : nullptr;
    mod.gate_stride = gate.defined() ? gate.stride(0) : 0;
    mod.scale_stride = scale.defined() ? scale.stride(0) : 0;
    mod.shift_stride = shift.defined() ? shift.stride(0) : 0;
    mod.rows_per_seq = std::max<int64_t>(rows_per_seq, 1);
    const scalar_t* yp = y.defined() ? y.data_ptr<scalar_t>() : nullptr;
    float* sp = want_sum ? s.data_ptr<float>() : nullptr;
    if (warp_path) {
      // Eight rows a block, or a decode step's few rows a block each (block_per_row), except in training,
      // whose backward recomputes the statistics in the warp's order.
      const bool per_row = !training && block_per_row(rows);
      auto launch = [&](auto chunks) {
        constexpr int C = decltype(chunks)::value;
        split_rows<C, 8>(per_row, rows, [&](auto split, dim3 grid, dim3 block) {
          launch_kernel<add_layer_norm_warp_kernel<scalar_t, C, decltype(split)::value>>(
              grid, block, stream, decode_pdl(), x.data_ptr<float>(), yp, weight.data_ptr<float>(), b, mod, rows,
              static_cast<float>(eps), sp, h.data_ptr<scalar_t>());
        });
      };
      dispatch_chunks(d / 128, launch);
      return;
    }
    auto launch = [&](auto per) {
      add_layer_norm_kernel<scalar_t, scalar_t, decltype(per)::value>
          <<<static_cast<unsigned>(rows), kLnThreads, 0, stream>>>(x.data_ptr<float>(), yp, weight.data_ptr<float>(), b,
                                                                   mod, static_cast<int>(d), static_cast<float>(eps),
                                                                   sp, h.data_ptr<scalar_t>());
    };
    if (d <= 4 * kLnThreads)
      launch(std::integral_constant<int, 4>());
    else if (d <= 8 * kLnThreads)
      launch(std::integral_constant<int, 8>());
    else
      launch(std::integral_constant<int, 16>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {s, h};
}

bool add_layer_norm_backward_cuda_supports(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& weight,
                                           const torch::Tensor& bias) {
  const int64_t d = x.size(-1);
  return y.defined() && add_layer_norm_cuda_supports(x, y, weight, bias) && d % 128 == 0 && d <= 1024 &&
         aligned(x, 16) && aligned(y, 4 * static_cast<int64_t>(y.element_size())) && aligned(weight, 16) &&
         aligned(bias, 16);
}

// grad_s (.., d) fp32 or undefined; grad_h (.., d) in y_dtype; s the forward's sum (fp32). Returns ∂x (fp32),
// ∂y (y_dtype), ∂w, ∂b (fp32, (d)).
std::array<torch::Tensor, 4> add_layer_norm_backward_cuda(const torch::Tensor& grad_s, const torch::Tensor& grad_h,
                                                          const torch::Tensor& s, const torch::Tensor& weight,
                                                          double eps) {
  const c10::cuda::CUDAGuard guard(s.device());
  const int64_t d = s.size(-1), rows = s.numel() / std::max<int64_t>(d, 1);
  TORCH_CHECK(d % 128 == 0 && d <= 1024 && grad_h.sizes() == s.sizes() && grad_h.is_contiguous() && s.is_contiguous() &&
                  (!grad_s.defined() ||
                   (grad_s.is_contiguous() && grad_s.sizes() == s.sizes() && grad_s.scalar_type() == torch::kFloat32)),
              "add_layer_norm backward: unsupported shapes ", s.sizes(), " / ", grad_h.sizes());
  auto gx = torch::empty_like(s);
  auto gy = torch::empty_like(grad_h);
  if (rows == 0) return {gx, gy, torch::zeros_like(weight), torch::zeros_like(weight)};
  // Enough warps to fill the GPU (64 per SM), each over consecutive rows; one partial row per block.
  constexpr int kWarpsPerBlock = kLnBackwardWarps;
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t rows_per_warp = std::max<int64_t>(1, (rows + 64 * sms - 1) / (64 * sms));
  const int64_t warps = (rows + rows_per_warp - 1) / rows_per_warp;
  const int64_t blocks = (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
  TORCH_CHECK(blocks <= 0x7fffffff, "add_layer_norm backward: too many rows (", rows, ")");
  auto pw = torch::empty({blocks, d}, s.options());
  auto pb = torch::empty({blocks, d}, s.options());
  const auto stream = at::cuda::getCurrentCUDAStream();
  const auto w = weight.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, grad_h.scalar_type(), "add_layer_norm_backward", [&] {
    auto launch = [&](auto chunks) {
      add_layer_norm_backward_kernel<scalar_t, decltype(chunks)::value>
          <<<static_cast<unsigned>(blocks), 32 * kWarpsPerBlock, 0, stream>>>(
              s.data_ptr<float>(), grad_h.data_ptr<scalar_t>(), grad_s.defined() ? grad_s.data_ptr<float>() : nullptr,
              w.data_ptr<float>(), rows, rows_per_warp, static_cast<float>(eps), gx.data_ptr<float>(),
              gy.data_ptr<scalar_t>(), pw.data_ptr<float>(), pb.data_ptr<float>());
    };
    dispatch_chunks(d / 128, launch);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {gx, gy, pw.sum(0), pb.sum(0)};
}

}  // namespace aobench::common
