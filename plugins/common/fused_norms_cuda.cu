// Implements: the CUDA kernels of plugins/common/fused_norms.h.
// rms_step: forward, one warp per row (d = 128·C, lane ℓ holds elements 4ℓ … 4ℓ+3 of every 128-wide chunk)
// reads x, y and the row's adaLN table rows once and writes s, rstd and h once. Backward, one block per
// table row: its warps walk the rows that read that table row, write ∂x and ∂y per row and sum the table
// gradients (gate, shift, scale) and the norm weight's partial in registers, then across warps in shared
// memory: deterministic, no atomics. qk_rms_norm: one warp per (token, head) for q and k, v copied out;
// the backward also writes ∂v, so the (N, 3, H, h) gradient of the projection is one tensor.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/types.h>

#include <cstdint>
#include <type_traits>

#include "plugins/common/cuda_vec.cuh"
#include "plugins/common/fused_norms.h"

namespace aobench::common {
namespace {

using common::Pack;
using common::warp_sum;
using torch::Tensor;

constexpr int kWarps = 8;  // warps per block

template <int kV, typename T>
__device__ __forceinline__ void load(const T* p, float (&o)[kV]) {
  const Pack<T, kV> t = *reinterpret_cast<const Pack<T, kV>*>(p);
#pragma unroll
  for (int k = 0; k < kV; ++k) o[k] = static_cast<float>(t.v[k]);
}

template <int kV, typename T>
__device__ __forceinline__ void store(T* p, const float (&o)[kV]) {
  Pack<T, kV> t;
#pragma unroll
  for (int k = 0; k < kV; ++k) t.v[k] = static_cast<T>(o[k]);
  *reinterpret_cast<Pack<T, kV>*>(p) = t;
}

// s = x + gate[r]·y, h = s·rstd·w·scale[r] + shift[r] with r = idx[row]; mod row = [shift | scale].
template <typename T, int C>
__global__ void __launch_bounds__(32 * kWarps)
    rms_step_forward_kernel(const float* __restrict__ x, const T* __restrict__ y, const int64_t* __restrict__ idx,
                            const float* __restrict__ gate, int64_t gate_ld, const float* __restrict__ mod,
                            int64_t mod_ld, const float* __restrict__ w, int64_t rows, float eps,
                            float* __restrict__ s_out, float* __restrict__ rstd_out, T* __restrict__ h_out) {
  constexpr int d = 128 * C;
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= rows) return;
  const int64_t base = row * d, r = idx ? idx[row] : 0;
  const float* g = gate ? gate + r * gate_ld : nullptr;
  const float* sh = mod ? mod + r * mod_ld : nullptr;
  float v[C][4];
  float sq = 0.f;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int j = c * 128 + lane * 4;
    load<4>(x + base + j, v[c]);
    if (y) {
      float yv[4], gv[4] = {1.f, 1.f, 1.f, 1.f};
      load<4>(y + base + j, yv);
      if (g) load<4>(g + j, gv);
#pragma unroll
      for (int k = 0; k < 4; ++k) v[c][k] += yv[k] * gv[k];
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) sq += v[c][k] * v[c][k];
  }
  const float rstd = rsqrtf(warp_sum(sq) / d + eps);
  if (rstd_out && lane == 0) rstd_out[row] = rstd;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int j = c * 128 + lane * 4;
    if (s_out) store<4>(s_out + base + j, v[c]);
    float wv[4], o[4];
    load<4>(w + j, wv);
#pragma unroll
    for (int k = 0; k < 4; ++k) o[k] = v[c][k] * rstd * wv[k];
    if (sh) {
      float shv[4], scv[4];
      load<4>(sh + j, shv);
      load<4>(sh + d + j, scv);
#pragma unroll
      for (int k = 0; k < 4; ++k) o[k] = o[k] * scv[k] + shv[k];
    }
    store<4>(h_out + base + j, o);
  }
}

// Block = one group of rows: table row blockIdx.x (order/offsets), or rows [g·per_group, (g+1)·per_group)
// without tables. With n = s·rstd, a = ∂h·scale·w: ∂s = ∂s_out + rstd·(a − n·mean(a·n)), ∂x = ∂s,
// ∂y = ∂s·gate; per table row Σ ∂s·y (gate), Σ ∂h (shift), w·Σ ∂h·n (scale);
// w_part = scale·Σ ∂h·n.
template <typename T, int C>
__global__ void __launch_bounds__(32 * kWarps)
    rms_step_backward_kernel(const float* __restrict__ s, const float* __restrict__ rstd, const T* __restrict__ y,
                             const float* __restrict__ grad_s, const T* __restrict__ grad_h,
                             const int64_t* __restrict__ order, const int64_t* __restrict__ offsets, int64_t rows,
                             int per_group, const float* __restrict__ gate, int64_t gate_ld,
                             const float* __restrict__ mod, int64_t mod_ld, const float* __restrict__ w,
                             float* __restrict__ grad_x, T* __restrict__ grad_y, float* __restrict__ grad_gate,
                             float* __restrict__ grad_mod, float* __restrict__ w_part) {
  constexpr int d = 128 * C;
  __shared__ float red[kWarps * d];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t grp = blockIdx.x;
  int64_t beg, end;
  if (order) {
    beg = offsets[grp];
    end = offsets[grp + 1];
  } else {
    beg = grp * per_group;
    end = beg + per_group < rows ? beg + per_group : rows;
  }
  const float* g = gate ? gate + grp * gate_ld : nullptr;
  const float* sh = mod ? mod + grp * mod_ld : nullptr;
  float wv[C][4], scv[C][4], gv[C][4];
  float acc_gate[C][4] = {}, acc_hn[C][4] = {}, acc_shift[C][4] = {};
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int j = c * 128 + lane * 4;
    load<4>(w + j, wv[c]);
#pragma unroll
    for (int k = 0; k < 4; ++k) scv[c][k] = gv[c][k] = 1.f;
    if (sh) load<4>(sh + d + j, scv[c]);
    if (g) load<4>(g + j, gv[c]);
  }
  for (int64_t i = beg + warp; i < end; i += kWarps) {
    const int64_t row = order ? order[i] : i, base = row * d;
    const float rs = rstd[row];
    float n[C][4], gh[C][4] = {}, a[C][4];
    float dot = 0.f;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int j = c * 128 + lane * 4;
      load<4>(s + base + j, n[c]);
      if (grad_h) load<4>(grad_h + base + j, gh[c]);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        n[c][k] *= rs;
        a[c][k] = gh[c][k] * scv[c][k] * wv[c][k];
        dot += a[c][k] * n[c][k];
      }
    }
    dot = warp_sum(dot) / d;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int j = c * 128 + lane * 4;
      float gs[4] = {}, gx[4];
      if (grad_s) load<4>(grad_s + base + j, gs);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        gx[k] = gs[k] + rs * (a[c][k] - n[c][k] * dot);
        acc_hn[c][k] += gh[c][k] * n[c][k];
        acc_shift[c][k] += gh[c][k];
      }
      store<4>(grad_x + base + j, gx);
      if (y) {
        float gy[4], yv[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) gy[k] = gx[k] * gv[c][k];
        store<4>(grad_y + base + j, gy);
        if (g) {
          load<4>(y + base + j, yv);
#pragma unroll
          for (int k = 0; k < 4; ++k) acc_gate[c][k] += gx[k] * yv[k];
        }
      }
    }
  }
  if (grad_gate) sum_warps<kWarps, C>(acc_gate, red, grad_gate + grp * d, nullptr);
  if (grad_mod) {
    sum_warps<kWarps, C>(acc_shift, red, grad_mod + grp * 2 * d, nullptr);
    sum_warps<kWarps, C>(acc_hn, red, grad_mod + grp * 2 * d + d, w);
  }
  sum_warps<kWarps, C>(acc_hn, red, w_part + grp * d, sh ? sh + d : nullptr);
}

// One warp per (token n, head): q at qkv[n, 0, head], k at qkv[n, 1, head], v at qkv[n, 2, head] (h = 32·kV).
template <typename T, int kV>
__global__ void __launch_bounds__(32 * kWarps)
    qk_norm_forward_kernel(const T* __restrict__ qkv, int64_t pairs, int H, const float* __restrict__ wq,
                           const float* __restrict__ wk, float eps, T* __restrict__ q, T* __restrict__ k,
                           T* __restrict__ v, float* __restrict__ rstd) {
  constexpr int h = 32 * kV;
  const int lane = threadIdx.x % 32;
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (pair >= pairs) return;
  const int64_t n = pair / H, head = pair % H, plane = static_cast<int64_t>(H) * h;
  const T* src = qkv + n * 3 * plane + head * h + lane * kV;
  const int64_t dst = pair * h + lane * kV;
#pragma unroll
  for (int which = 0; which < 2; ++which) {
    float xv[kV], wv[kV], sq = 0.f;
    load<kV>(src + which * plane, xv);
#pragma unroll
    for (int e = 0; e < kV; ++e) sq += xv[e] * xv[e];
    const float rs = rsqrtf(warp_sum(sq) / h + eps);
    load<kV>((which ? wk : wq) + lane * kV, wv);
#pragma unroll
    for (int e = 0; e < kV; ++e) xv[e] *= rs * wv[e];
    store<kV>((which ? k : q) + dst, xv);
    if (rstd && lane == 0) rstd[which * pairs + pair] = rs;
  }
  *reinterpret_cast<Pack<T, kV>*>(v + dst) = *reinterpret_cast<const Pack<T, kV>*>(src + 2 * plane);
}

// Grid-stride over (token, head) pairs; w_part (gridDim.x, 2, h) holds each block's Σ ∂out·n̂ for wq and wk.
template <typename T, int kV>
__global__ void __launch_bounds__(32 * kWarps)
    qk_norm_backward_kernel(const T* __restrict__ qkv, const float* __restrict__ rstd, const T* __restrict__ gq,
                            const T* __restrict__ gk, const T* __restrict__ gv, int64_t pairs, int H,
                            const float* __restrict__ wq, const float* __restrict__ wk, T* __restrict__ gqkv,
                            float* __restrict__ w_part) {
  constexpr int h = 32 * kV;
  __shared__ float red[kWarps][2 * h];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t plane = static_cast<int64_t>(H) * h;
  float acc[2][kV] = {}, wv[2][kV];
  load<kV>(wq + lane * kV, wv[0]);
  load<kV>(wk + lane * kV, wv[1]);
  for (int64_t pair = static_cast<int64_t>(blockIdx.x) * kWarps + warp; pair < pairs;
       pair += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t n = pair / H, head = pair % H;
    const int64_t src = n * 3 * plane + head * h + lane * kV, dst = pair * h + lane * kV;
#pragma unroll
    for (int which = 0; which < 2; ++which) {
      float xv[kV], g[kV], a[kV], dot = 0.f;
      const float rs = rstd[which * pairs + pair];
      load<kV>(qkv + src + which * plane, xv);
      load<kV>((which ? gk : gq) + dst, g);
#pragma unroll
      for (int e = 0; e < kV; ++e) {
        xv[e] *= rs;  // n̂
        a[e] = g[e] * wv[which][e];
        dot += a[e] * xv[e];
        acc[which][e] += g[e] * xv[e];
      }
      dot = warp_sum(dot) / h;
#pragma unroll
      for (int e = 0; e < kV; ++e) a[e] = rs * (a[e] - xv[e] * dot);
      store<kV>(gqkv + src + which * plane, a);
    }
    *reinterpret_cast<Pack<T, kV>*>(gqkv + src + 2 * plane) = *reinterpret_cast<const Pack<T, kV>*>(gv + dst);
  }
#pragma unroll
  for (int which = 0; which < 2; ++which)
#pragma unroll
    for (int e = 0; e < kV; ++e) red[warp][which * h + lane * kV + e] = acc[which][e];
  __syncthreads();
  for (int j = threadIdx.x; j < 2 * h; j += blockDim.x) {
    float t = 0.f;
#pragma unroll
    for (int q = 0; q < kWarps; ++q) t += red[q][j];
    w_part[blockIdx.x * 2 * h + j] = t;
  }
}

// Calls fn(T{}) with T the C++ type of dtype (float, bfloat16, half).
template <typename Fn>
void dispatch_type(torch::ScalarType dtype, Fn&& fn) {
  switch (dtype) {
    case torch::kFloat:
      fn(float{});
      break;
    case torch::kBFloat16:
      fn(c10::BFloat16{});
      break;
    case torch::kHalf:
      fn(c10::Half{});
      break;
    default:
      TORCH_CHECK(false, "fused_norms: unsupported dtype ", dtype);
  }
}

// Calls fn(std::integral_constant<int, C>) for d = 128·C, C ∈ {1, 2, 3, 4, 6, 8}.
template <typename Fn>
void dispatch_chunks(int64_t d, Fn&& fn) {
  switch (d / 128) {
    case 1:
      fn(std::integral_constant<int, 1>());
      break;
    case 2:
      fn(std::integral_constant<int, 2>());
      break;
    case 3:
      fn(std::integral_constant<int, 3>());
      break;
    case 4:
      fn(std::integral_constant<int, 4>());
      break;
    case 6:
      fn(std::integral_constant<int, 6>());
      break;
    case 8:
      fn(std::integral_constant<int, 8>());
      break;
    default:
      TORCH_CHECK(false, "fused_norms: d = ", d, " is not covered");
  }
}

bool aligned(const Tensor& t, int64_t bytes) {
  return !t.defined() || reinterpret_cast<std::uintptr_t>(t.data_ptr()) % bytes == 0;
}

bool float_type(torch::ScalarType t) { return t == torch::kFloat || t == torch::kBFloat16 || t == torch::kHalf; }

constexpr int kRowsPerGroup = 16;  // rows per backward block when there are no tables

}  // namespace

bool rms_step_cuda_supports(const Tensor& x, const Tensor& y, const Tensor& weight, const StepTables& t,
                            torch::ScalarType out_dtype) {
  const int64_t d = x.size(1);
  const int64_t c = d / 128;
  bool ok = x.scalar_type() == torch::kFloat && x.is_contiguous() && d % 128 == 0 &&
            (c == 1 || c == 2 || c == 3 || c == 4 || c == 6 || c == 8) && aligned(x, 16) &&
            weight.scalar_type() == torch::kFloat && weight.is_contiguous() && weight.device() == x.device() &&
            aligned(weight, 16) && float_type(out_dtype);
  if (y.defined())
    ok = ok && y.is_contiguous() && y.scalar_type() == out_dtype && y.device() == x.device() &&
         aligned(y, 4 * y.element_size());
  for (const Tensor* tab : {&t.gate, &t.mod})
    ok = ok && (!tab->defined() || (tab->scalar_type() == torch::kFloat && tab->stride(1) == 1 &&
                                    tab->stride(0) % 4 == 0 && aligned(*tab, 16) && tab->device() == x.device()));
  return ok;
}

std::array<Tensor, 3> rms_step_forward_cuda(const Tensor& x, const Tensor& y, const Tensor& weight, const StepTables& t,
                                            const Tensor& idx, double eps, torch::ScalarType out_dtype,
                                            bool save_rstd) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t N = x.size(0), d = x.size(1);
  Tensor s = y.defined() ? torch::empty_like(x) : Tensor();
  Tensor rstd = save_rstd ? torch::empty({N}, x.options()) : Tensor();
  Tensor h = torch::empty({N, d}, x.options().dtype(out_dtype));
  if (N == 0) return {s, rstd, h};
  const bool tables = t.gate.defined() || t.mod.defined();
  const Tensor idx_d = tables ? idx.to(x.device(), torch::kLong).contiguous() : Tensor();
  const auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_type(out_dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_chunks(d, [&](auto chunks) {
      rms_step_forward_kernel<T, decltype(chunks)::value>
          <<<static_cast<unsigned>((N + kWarps - 1) / kWarps), 32 * kWarps, 0, stream>>>(
              x.data_ptr<float>(), y.defined() ? y.data_ptr<T>() : nullptr,
              tables ? idx_d.data_ptr<int64_t>() : nullptr, t.gate.defined() ? t.gate.data_ptr<float>() : nullptr,
              t.gate.defined() ? t.gate.stride(0) : 0, t.mod.defined() ? t.mod.data_ptr<float>() : nullptr,
              t.mod.defined() ? t.mod.stride(0) : 0, weight.data_ptr<float>(), N, static_cast<float>(eps),
              s.defined() ? s.data_ptr<float>() : nullptr, save_rstd ? rstd.data_ptr<float>() : nullptr,
              h.data_ptr<T>());
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {s, rstd, h};
}

std::array<Tensor, 5> rms_step_backward_cuda(const Tensor& grad_s, const Tensor& grad_h, const Tensor& s,
                                             const Tensor& rstd, const Tensor& y, const Tensor& weight,
                                             const StepTables& t, const RowIndex& rows) {
  const c10::cuda::CUDAGuard guard(s.device());
  const int64_t N = s.size(0), d = s.size(1);
  const bool tables = t.gate.defined() || t.mod.defined();
  const int64_t groups = tables ? rows.table_rows : (N + kRowsPerGroup - 1) / kRowsPerGroup;
  const auto f32 = s.options();
  Tensor grad_x = torch::empty_like(s), grad_y = y.defined() ? torch::empty_like(y) : Tensor();
  Tensor grad_gate = t.gate.defined() ? torch::empty({groups, d}, f32) : Tensor();
  Tensor grad_mod = t.mod.defined() ? torch::empty({groups, 2 * d}, f32) : Tensor();
  Tensor w_part = torch::empty({groups, d}, f32);
  if (groups == 0) return {grad_x, grad_y, grad_gate, grad_mod, torch::zeros_like(weight)};
  TORCH_CHECK(groups <= 0x7fffffff, "rms_step: too many row groups (", groups, ")");
  TORCH_CHECK(!grad_h.defined() || grad_h.scalar_type() == (y.defined() ? y.scalar_type() : grad_h.scalar_type()),
              "rms_step: ∂h has dtype ", grad_h.scalar_type(), ", expected y's ", y.scalar_type());
  const auto dtype = y.defined() ? y.scalar_type() : grad_h.defined() ? grad_h.scalar_type() : torch::kFloat;
  const auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_chunks(d, [&](auto chunks) {
      rms_step_backward_kernel<T, decltype(chunks)::value><<<static_cast<unsigned>(groups), 32 * kWarps, 0, stream>>>(
          s.data_ptr<float>(), rstd.data_ptr<float>(), y.defined() ? y.data_ptr<T>() : nullptr,
          grad_s.defined() ? grad_s.data_ptr<float>() : nullptr, grad_h.defined() ? grad_h.data_ptr<T>() : nullptr,
          tables ? rows.order.data_ptr<int64_t>() : nullptr, tables ? rows.offsets.data_ptr<int64_t>() : nullptr, N,
          kRowsPerGroup, t.gate.defined() ? t.gate.data_ptr<float>() : nullptr, t.gate.defined() ? t.gate.stride(0) : 0,
          t.mod.defined() ? t.mod.data_ptr<float>() : nullptr, t.mod.defined() ? t.mod.stride(0) : 0,
          weight.data_ptr<float>(), grad_x.data_ptr<float>(), y.defined() ? grad_y.data_ptr<T>() : nullptr,
          grad_gate.defined() ? grad_gate.data_ptr<float>() : nullptr,
          grad_mod.defined() ? grad_mod.data_ptr<float>() : nullptr, w_part.data_ptr<float>());
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {grad_x, grad_y, grad_gate, grad_mod, w_part.sum(0)};
}

bool qk_rms_norm_cuda_supports(const Tensor& qkv, const Tensor& wq, const Tensor& wk) {
  const int64_t h = qkv.size(3);
  return qkv.is_contiguous() && float_type(qkv.scalar_type()) && (h == 32 || h == 64 || h == 128 || h == 256) &&
         aligned(qkv, 16) && wq.scalar_type() == torch::kFloat && wk.scalar_type() == torch::kFloat &&
         wq.is_contiguous() && wk.is_contiguous() && aligned(wq, 16) && aligned(wk, 16) &&
         wq.device() == qkv.device() && wk.device() == qkv.device();
}

// Calls fn(std::integral_constant<int, kV>) for h = 32·kV.
template <typename Fn>
void dispatch_head(int64_t h, Fn&& fn) {
  switch (h) {
    case 32:
      fn(std::integral_constant<int, 1>());
      break;
    case 64:
      fn(std::integral_constant<int, 2>());
      break;
    case 128:
      fn(std::integral_constant<int, 4>());
      break;
    default:
      fn(std::integral_constant<int, 8>());
      break;
  }
}

std::array<Tensor, 4> qk_rms_norm_forward_cuda(const Tensor& qkv, const Tensor& wq, const Tensor& wk, double eps,
                                               bool save_rstd) {
  const c10::cuda::CUDAGuard guard(qkv.device());
  const int64_t N = qkv.size(0), H = qkv.size(2), h = qkv.size(3), pairs = N * H;
  Tensor q = torch::empty({N, H, h}, qkv.options()), k = torch::empty_like(q), v = torch::empty_like(q);
  Tensor rstd = save_rstd ? torch::empty({2, pairs}, qkv.options().dtype(torch::kFloat)) : Tensor();
  if (pairs == 0) return {q, k, v, rstd};
  const auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_type(qkv.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    dispatch_head(h, [&](auto vec) {
      qk_norm_forward_kernel<T, decltype(vec)::value>
          <<<static_cast<unsigned>((pairs + kWarps - 1) / kWarps), 32 * kWarps, 0, stream>>>(
              qkv.data_ptr<T>(), pairs, static_cast<int>(H), wq.data_ptr<float>(), wk.data_ptr<float>(),
              static_cast<float>(eps), q.data_ptr<T>(), k.data_ptr<T>(), v.data_ptr<T>(),
              save_rstd ? rstd.data_ptr<float>() : nullptr);
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {q, k, v, rstd};
}

std::array<Tensor, 3> qk_rms_norm_backward_cuda(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                                                const Tensor& qkv, const Tensor& rstd, const Tensor& wq,
                                                const Tensor& wk) {
  const c10::cuda::CUDAGuard guard(qkv.device());
  const int64_t N = qkv.size(0), H = qkv.size(2), h = qkv.size(3), pairs = N * H;
  for (const Tensor* g : {&grad_q, &grad_k, &grad_v})
    TORCH_CHECK(g->is_contiguous() && g->scalar_type() == qkv.scalar_type() && g->numel() == pairs * h,
                "qk_rms_norm: output gradients must be contiguous (N, H, h) in qkv's dtype");
  Tensor grad_qkv = torch::empty_like(qkv);
  // A fixed grid (a few blocks per SM) keeps the weight partials small and the sums deterministic per device.
  const int64_t blocks =
      std::max<int64_t>(1, std::min<int64_t>((pairs + kWarps - 1) / kWarps,
                                             4 * at::cuda::getCurrentDeviceProperties()->multiProcessorCount));
  Tensor w_part = torch::zeros({blocks, 2, h}, qkv.options().dtype(torch::kFloat));
  if (pairs == 0) return {grad_qkv, w_part.sum(0)[0], w_part.sum(0)[1]};
  const auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_type(qkv.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    dispatch_head(h, [&](auto vec) {
      qk_norm_backward_kernel<T, decltype(vec)::value><<<static_cast<unsigned>(blocks), 32 * kWarps, 0, stream>>>(
          qkv.data_ptr<T>(), rstd.data_ptr<float>(), grad_q.data_ptr<T>(), grad_k.data_ptr<T>(), grad_v.data_ptr<T>(),
          pairs, static_cast<int>(H), wq.data_ptr<float>(), wk.data_ptr<float>(), grad_qkv.data_ptr<T>(),
          w_part.data_ptr<float>());
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  auto w = w_part.sum(0);  // (2, h)
  return {grad_qkv, w[0], w[1]};
}

}  // namespace aobench::common
