// Implements: the CUDA kernels of plugins/common/rms_norm.h.
// rms_step: forward, one warp per row (d = 128·C, lane ℓ holds elements 4ℓ … 4ℓ+3 of every 128-wide chunk)
// reads x, y and the row's adaLN table rows once and writes s, rstd and h once; in training, where the rows
// come grouped by table row, one block per table row reads that row's tables once for all its rows. Backward,
// one block per table row, each thread owning 4 columns: it walks the rows that read that table row, writes
// ∂x and ∂y per row and sums its columns of the table gradients (gate, shift, scale) and of the norm weight's
// partial in registers: deterministic, no atomics. qk_rms_norm: one warp per (token, head) for q and k, v
// copied out; the backward also writes ∂v, so the (N, 3, H, h) gradient of the projection is one tensor.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "plugins/common/cuda_vec.cuh"
#include "plugins/common/decode_scope.h"
#include "plugins/common/kernel_util.h"
#include "plugins/common/rms_norm.h"

namespace aobench::common {
namespace {

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

// s = x + gate[r]·y, h = s·rstd·w·scale[r] + shift[r] with r = idx[row]; mod row = [shift | scale]. A row over
// kSplit warps, each lane 4 elements of each of its chunks (chunk c·kSplit + the warp's part): kSplit = 1, kWarps
// rows a block; kSplit = C, a row a block and a chunk a warp, for a decode step's few rows (a warp walking a
// whole row alone on its SM is latency-bound).
template <typename T, int C, int kSplit>
__global__ void __launch_bounds__(32 * kWarps)
    rms_step_forward_kernel(const float* __restrict__ x, const T* __restrict__ y, const int64_t* __restrict__ idx,
                            const float* __restrict__ gate, int64_t gate_ld, const float* __restrict__ mod,
                            int64_t mod_ld, const float* __restrict__ w, int64_t rows, float eps,
                            float* __restrict__ s_out, float* __restrict__ rstd_out, T* __restrict__ h_out) {
  static_assert((kSplit == 1 || kSplit == C) && C <= kWarps,
                "a warp a row, or a block of a warp a chunk a row (row_sum)");
  constexpr int d = 128 * C, kMine = C / kSplit;  // chunks of a lane
  let_dependents_launch();  // a decode step's next Linear (decode_linear) may start loading its weights
  const int lane = threadIdx.x % 32, part = threadIdx.x / 32 % kSplit;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32 / kSplit) + threadIdx.x / 32 / kSplit;
  if (row >= rows) return;  // kSplit > 1 launches a block a row: never taken before row_sum's barriers
  float v[kMine][4], wv[kMine][4], shv[kMine][4], scv[kMine][4], gv[kMine][4];
  // The row's index, its table rows and the weight: with kSplit > 1 (a decode step) loaded before the wait, as no
  // kernel of the step writes them (decode_scope.h), so the index's round trip and theirs hide behind the kernel
  // before; with kSplit = 1 after it, the weight and the modulation after the statistics (the registers of six
  // chunks).
  int64_t r = 0;
  const float *g = nullptr, *sh = nullptr;
  auto find_table_rows = [&] {
    r = idx ? idx[row] : 0;
    g = gate ? gate + r * gate_ld : nullptr;
    sh = mod ? mod + r * mod_ld : nullptr;
  };
  auto load_affine = [&](int c, int j) {
    load<4>(w + j, wv[c]);
    if (sh) {
      load<4>(sh + j, shv[c]);
      load<4>(sh + d + j, scv[c]);
    }
  };
  if constexpr (kSplit > 1) {
    find_table_rows();
#pragma unroll
    for (int c = 0; c < kMine; ++c) {
      const int j = (c * kSplit + part) * 128 + lane * 4;
      load_affine(c, j);
      if (y && g) load<4>(g + j, gv[c]);
    }
  }
  wait_for_inputs();  // launched as a decode step's dependent: x and y are the kernels' before it
  if constexpr (kSplit == 1) find_table_rows();
  const int64_t base = row * d;
  float sq = 0.f;
#pragma unroll
  for (int c = 0; c < kMine; ++c) {
    const int j = (c * kSplit + part) * 128 + lane * 4;
    load<4>(x + base + j, v[c]);
    if (y) {
      float yv[4];
      load<4>(y + base + j, yv);
      if constexpr (kSplit == 1)
        if (g) load<4>(g + j, gv[c]);
#pragma unroll
      for (int k = 0; k < 4; ++k) v[c][k] += yv[k] * (g ? gv[c][k] : 1.f);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) sq += v[c][k] * v[c][k];
  }
  const float rstd = rsqrtf(row_sum<kSplit>(sq) / d + eps);
  if (rstd_out && lane == 0 && part == 0) rstd_out[row] = rstd;
#pragma unroll
  for (int c = 0; c < kMine; ++c) {
    const int j = (c * kSplit + part) * 128 + lane * 4;
    if (s_out) store<4>(s_out + base + j, v[c]);
    if constexpr (kSplit == 1) load_affine(c, j);
    float o[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) o[k] = v[c][k] * rstd * wv[c][k];
    if (sh)
#pragma unroll
      for (int k = 0; k < 4; ++k) o[k] = o[k] * scv[c][k] + shv[c][k];
    store<4>(h_out + base + j, o);
  }
}

// Rows of one block in the grouped kernels below: those that read table row blockIdx.x (order/offsets), or
// rows [g·per_group, (g+1)·per_group) without tables.
struct GroupRows {
  int64_t beg, end;
  __device__ GroupRows(const int64_t* offsets, int64_t rows, int per_group) {
    const int64_t grp = blockIdx.x;
    if (offsets) {
      beg = offsets[grp];
      end = offsets[grp + 1];
    } else {
      beg = grp * per_group;
      end = beg + per_group < rows ? beg + per_group : rows;
    }
  }
};

// Rows per block-wide reduction in the grouped kernels. The backward keeps two rows of four inputs in flight
// per thread, with registers capped so that 24 warps fit on an SM (24/C blocks of 32·C threads): on an H100
// its 25 calls in a small AO-GPT step (d = 768, 4 blocks per SM) took 2.14 ms so, against 2.51 ms with four
// rows and no cap (158 registers, 2 blocks per SM) and 2.95 ms with four rows capped for 3 blocks (spilling).
constexpr int kForwardBatch = 4, kBackwardBatch = 2, kBackwardWarpsPerSm = 24;
// The grouped forward's registers are capped for 42 warps per SM (42/C blocks of 32·C threads): with d = 768
// its 1025 blocks of a small AO-GPT step then fit in one wave on an H200 (7 blocks per SM at 40 registers,
// a few spilled), and its 25 calls took 1.21 ms against 1.42 ms uncapped (94 registers, 3 blocks per SM).
constexpr int kForwardWarpsPerSm = 42;

// Block-wide sums of v[b] (b < B) over the C warps of a 32·C-thread block; part: shared [2][B][C], one half
// per call parity (a call's readers finish before the call after next writes that half, because the next
// call's __syncthreads lies between). Every thread of the block must call it.
template <int C, int B>
__device__ __forceinline__ void block_sums(float (&v)[B], float (&part)[2][B][C], int parity) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int b = 0; b < B; ++b) {
    const float t = warp_sum(v[b]);
    if (lane == 0) part[parity][b][warp] = t;
  }
  __syncthreads();
#pragma unroll
  for (int b = 0; b < B; ++b) {
    v[b] = 0.f;
#pragma unroll
    for (int q = 0; q < C; ++q) v[b] += part[parity][b][q];
  }
}

// The forward of grouped rows (training, where RowIndex has its groups): one block per table row, thread t
// owning columns 4t … 4t+3 (32·C threads), so the group's gate, shift and scale rows are read once per
// block, not once per row; each row's Σ s² is one block-wide sum per kForwardBatch rows.
template <typename T, int C>
__global__ void __launch_bounds__(32 * C, kForwardWarpsPerSm / C < 32 ? kForwardWarpsPerSm / C : 32)
    rms_step_forward_grouped_kernel(const float* __restrict__ x, const T* __restrict__ y,
                                    const int64_t* __restrict__ order, const int64_t* __restrict__ offsets,
                                    const float* __restrict__ gate, int64_t gate_ld, const float* __restrict__ mod,
                                    int64_t mod_ld, const float* __restrict__ w, float eps, float* __restrict__ s_out,
                                    float* __restrict__ rstd_out, T* __restrict__ h_out) {
  constexpr int d = 128 * C;
  __shared__ float part[2][kForwardBatch][C];
  const int j = threadIdx.x * 4;
  const GroupRows g(offsets, 0, 0);
  float wv[4], gv[4] = {1.f, 1.f, 1.f, 1.f}, shv[4] = {}, scv[4] = {1.f, 1.f, 1.f, 1.f};
  load<4>(w + j, wv);
  if (gate) load<4>(gate + blockIdx.x * gate_ld + j, gv);
  if (mod) {
    load<4>(mod + blockIdx.x * mod_ld + j, shv);
    load<4>(mod + blockIdx.x * mod_ld + d + j, scv);
  }
  int parity = 0;
  for (int64_t i0 = g.beg; i0 < g.end; i0 += kForwardBatch, parity ^= 1) {
    float v[kForwardBatch][4] = {}, sq[kForwardBatch];
    int64_t row[kForwardBatch];
#pragma unroll
    for (int b = 0; b < kForwardBatch; ++b) {
      row[b] = i0 + b < g.end ? order[i0 + b] : -1;
      if (row[b] >= 0) {
        load<4>(x + row[b] * d + j, v[b]);
        if (y) {
          float yv[4];
          load<4>(y + row[b] * d + j, yv);
#pragma unroll
          for (int k = 0; k < 4; ++k) v[b][k] += yv[k] * gv[k];
        }
      }
      sq[b] = 0.f;
#pragma unroll
      for (int k = 0; k < 4; ++k) sq[b] += v[b][k] * v[b][k];
    }
    block_sums<C, kForwardBatch>(sq, part, parity);
#pragma unroll
    for (int b = 0; b < kForwardBatch; ++b) {
      if (row[b] < 0) continue;
      const float rstd = rsqrtf(sq[b] / d + eps);
      if (rstd_out && threadIdx.x == 0) rstd_out[row[b]] = rstd;
      if (s_out) store<4>(s_out + row[b] * d + j, v[b]);
      float o[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) o[k] = v[b][k] * rstd * wv[k] * scv[k] + shv[k];
      store<4>(h_out + row[b] * d + j, o);
    }
  }
}

// Backward, one block per group of rows (GroupRows), thread t owning columns 4t … 4t+3 (32·C threads).
// With n = s·rstd, a = ∂h·scale·w: ∂s = ∂s_out + rstd·(a − n·mean(a·n)), ∂x = ∂s, ∂y = ∂s·gate; per table
// row Σ ∂s·y (gate), Σ ∂h (shift), w·Σ ∂h·n (scale); w_part = scale·Σ ∂h·n. Each thread sums its own
// columns over the group's rows in registers (deterministic, no atomics, no cross-warp epilogue); only
// mean(a·n) is block-wide, one reduction per B rows, whose loads are all issued before it.
template <typename T, int C, int B = kBackwardBatch>
__global__ void __launch_bounds__(32 * C, kBackwardWarpsPerSm / C)
    rms_step_backward_kernel(const float* __restrict__ s, const float* __restrict__ rstd, const T* __restrict__ y,
                             const float* __restrict__ grad_s, const T* __restrict__ grad_h,
                             const int64_t* __restrict__ order, const int64_t* __restrict__ offsets, int64_t rows,
                             int per_group, const float* __restrict__ gate, int64_t gate_ld,
                             const float* __restrict__ mod, int64_t mod_ld, const float* __restrict__ w,
                             float* __restrict__ grad_x, T* __restrict__ grad_y, float* __restrict__ grad_gate,
                             float* __restrict__ grad_mod, float* __restrict__ w_part) {
  constexpr int d = 128 * C;
  __shared__ float part[2][B][C];
  const int j = threadIdx.x * 4;
  const int64_t grp = blockIdx.x;
  const GroupRows g(offsets, rows, per_group);
  float wv[4], scv[4] = {1.f, 1.f, 1.f, 1.f}, gv[4] = {1.f, 1.f, 1.f, 1.f};
  load<4>(w + j, wv);
  if (mod) load<4>(mod + grp * mod_ld + d + j, scv);
  if (gate) load<4>(gate + grp * gate_ld + j, gv);
  float acc_gate[4] = {}, acc_hn[4] = {}, acc_shift[4] = {};
  int parity = 0;
  for (int64_t i0 = g.beg; i0 < g.end; i0 += B, parity ^= 1) {
    float n[B][4] = {}, gh[B][4] = {}, gs[B][4] = {}, yv[B][4] = {}, rs[B], dot[B];
    int64_t base[B];
#pragma unroll
    for (int b = 0; b < B; ++b) {
      base[b] = -1;
      rs[b] = 0.f;
      if (i0 + b < g.end) {
        const int64_t row = order ? order[i0 + b] : i0 + b;
        base[b] = row * d + j;
        rs[b] = rstd[row];
        load<4>(s + base[b], n[b]);
        if (grad_h) load<4>(grad_h + base[b], gh[b]);
        if (grad_s) load<4>(grad_s + base[b], gs[b]);
        if (y && gate) load<4>(y + base[b], yv[b]);
      }
    }
#pragma unroll
    for (int b = 0; b < B; ++b) {
      dot[b] = 0.f;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        n[b][k] *= rs[b];
        dot[b] += gh[b][k] * scv[k] * wv[k] * n[b][k];
      }
    }
    block_sums<C, B>(dot, part, parity);
#pragma unroll
    for (int b = 0; b < B; ++b) {
      if (base[b] < 0) continue;
      const float mean = dot[b] / d;
      float gx[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        gx[k] = gs[b][k] + rs[b] * (gh[b][k] * scv[k] * wv[k] - n[b][k] * mean);
        acc_hn[k] += gh[b][k] * n[b][k];
        acc_shift[k] += gh[b][k];
      }
      store<4>(grad_x + base[b], gx);
      if (y) {
        float gy[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          gy[k] = gx[k] * gv[k];
          acc_gate[k] += gx[k] * yv[b][k];
        }
        store<4>(grad_y + base[b], gy);
      }
    }
  }
  if (grad_gate) store<4>(grad_gate + grp * d + j, acc_gate);
  float hn_w[4], hn_scale[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    hn_w[k] = acc_hn[k] * wv[k];
    hn_scale[k] = acc_hn[k] * scv[k];
  }
  if (grad_mod) {
    store<4>(grad_mod + grp * 2 * d + j, acc_shift);
    store<4>(grad_mod + grp * 2 * d + d + j, hn_w);
  }
  store<4>(w_part + grp * d + j, hn_scale);
}

// qk_rms_norm: L lanes per (token n, head) pair, 8 elements each (h = 8·L; a 16-byte load per lane in
// bf16), so a warp holds 32/L pairs: q at qkv[n, 0, head], k at qkv[n, 1, head], v at qkv[n, 2, head]. A
// pair's sums run over its L lanes (an aligned lane group; `mask` names it).
template <int L>
__device__ __forceinline__ unsigned group_mask() {
  if constexpr (L == 32) {
    return 0xffffffffu;
  } else {
    return ((1u << L) - 1u) << (threadIdx.x % 32 / L * L);
  }
}
template <int L>
__device__ __forceinline__ float group_sum(float v, unsigned mask) {
#pragma unroll
  for (int off = L / 2; off > 0; off >>= 1) v += __shfl_xor_sync(mask, v, off);
  return v;
}

template <typename T, int L>
__global__ void __launch_bounds__(32 * kWarps)
    qk_norm_forward_kernel(const T* __restrict__ qkv, int64_t pairs, int H, const float* __restrict__ wq,
                           const float* __restrict__ wk, float eps, T* __restrict__ q, T* __restrict__ k,
                           T* __restrict__ v, float* __restrict__ rstd) {
  constexpr int h = 8 * L;
  const int sub = threadIdx.x % L;
  const int64_t pair = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * (32 / L) + threadIdx.x % 32 / L;
  if (pair >= pairs) return;  // the whole lane group leaves together
  const unsigned mask = group_mask<L>();
  const int64_t n = pair / H, head = pair % H, plane = static_cast<int64_t>(H) * h;
  const T* src = qkv + n * 3 * plane + head * h + sub * 8;
  const int64_t dst = pair * h + sub * 8;
  // Every load is issued before the first reduction, so a thread has its q, k and v in flight at once.
  float xv[2][8];
  load<8>(src, xv[0]);
  load<8>(src + plane, xv[1]);
  const Pack<T, 8> vp = *reinterpret_cast<const Pack<T, 8>*>(src + 2 * plane);
#pragma unroll
  for (int which = 0; which < 2; ++which) {
    float wv[8], sq = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) sq += xv[which][e] * xv[which][e];
    const float rs = rsqrtf(group_sum<L>(sq, mask) / h + eps);
    load<8>((which ? wk : wq) + sub * 8, wv);
#pragma unroll
    for (int e = 0; e < 8; ++e) xv[which][e] *= rs * wv[e];
    store<8>((which ? k : q) + dst, xv[which]);
    if (rstd && sub == 0) rstd[which * pairs + pair] = rs;
  }
  *reinterpret_cast<Pack<T, 8>*>(v + dst) = vp;
}

// Grid-stride over (token, head) pairs, 32/L per warp; w_part (gridDim.x, 2, h) holds each block's Σ ∂out·n̂
// for wq and wk (summed over the warp's lane groups by shuffles, then over the warps in shared memory).
template <typename T, int L>
__global__ void __launch_bounds__(32 * kWarps)
    qk_norm_backward_kernel(const T* __restrict__ qkv, const float* __restrict__ rstd, const T* __restrict__ gq,
                            const T* __restrict__ gk, const T* __restrict__ gv, int64_t pairs, int H,
                            const float* __restrict__ wq, const float* __restrict__ wk, T* __restrict__ gqkv,
                            float* __restrict__ w_part) {
  constexpr int h = 8 * L, kPerWarp = 32 / L;
  __shared__ float red[kWarps][2 * h];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, sub = lane % L;
  const int64_t plane = static_cast<int64_t>(H) * h;
  const unsigned mask = group_mask<L>();
  float acc[2][8] = {}, wv[2][8];
  load<8>(wq + sub * 8, wv[0]);
  load<8>(wk + sub * 8, wv[1]);
  for (int64_t first = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * kPerWarp; first < pairs;
       first += static_cast<int64_t>(gridDim.x) * kWarps * kPerWarp) {
    const int64_t pair = first + lane / L;
    if (pair >= pairs) continue;  // uniform within the lane group
    const int64_t n = pair / H, head = pair % H;
    const int64_t src = n * 3 * plane + head * h + sub * 8, dst = pair * h + sub * 8;
    float xv[2][8], g[2][8];
#pragma unroll
    for (int which = 0; which < 2; ++which) {
      load<8>(qkv + src + which * plane, xv[which]);
      load<8>((which ? gk : gq) + dst, g[which]);
    }
    const Pack<T, 8> gvp = *reinterpret_cast<const Pack<T, 8>*>(gv + dst);
#pragma unroll
    for (int which = 0; which < 2; ++which) {
      float a[8], dot = 0.f;
      const float rs = rstd[which * pairs + pair];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        xv[which][e] *= rs;  // n̂
        a[e] = g[which][e] * wv[which][e];
        dot += a[e] * xv[which][e];
        acc[which][e] += g[which][e] * xv[which][e];
      }
      dot = group_sum<L>(dot, mask) / h;
#pragma unroll
      for (int e = 0; e < 8; ++e) a[e] = rs * (a[e] - xv[which][e] * dot);
      store<8>(gqkv + src + which * plane, a);
    }
    *reinterpret_cast<Pack<T, 8>*>(gqkv + src + 2 * plane) = gvp;
  }
  // The warp's lane groups hold the same columns: fold them onto lanes 0 … L−1.
#pragma unroll
  for (int which = 0; which < 2; ++which)
#pragma unroll
    for (int e = 0; e < 8; ++e)
#pragma unroll
      for (int off = L; off < 32; off <<= 1) acc[which][e] += __shfl_xor_sync(0xffffffffu, acc[which][e], off);
  if (lane < L)
#pragma unroll
    for (int which = 0; which < 2; ++which)
#pragma unroll
      for (int e = 0; e < 8; ++e) red[warp][which * h + sub * 8 + e] = acc[which][e];
  __syncthreads();
  for (int j = threadIdx.x; j < 2 * h; j += blockDim.x) {
    float t = 0.f;
#pragma unroll
    for (int q = 0; q < kWarps; ++q) t += red[q][j];
    w_part[blockIdx.x * 2 * h + j] = t;
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
      TORCH_CHECK(false, "rms_norm: d = ", d, " is not covered");
  }
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
                                            const RowIndex& rows, double eps, torch::ScalarType out_dtype,
                                            bool save_rstd) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t N = x.size(0), d = x.size(1);
  Tensor s = y.defined() ? torch::empty_like(x) : Tensor();
  Tensor rstd = save_rstd ? torch::empty({N}, x.options()) : Tensor();
  Tensor h = torch::empty({N, d}, x.options().dtype(out_dtype));
  if (N == 0) return {s, rstd, h};
  const bool tables = t.gate.defined() || t.mod.defined();
  const bool grouped = tables && rows.offsets.defined() && rows.table_rows <= 0x7fffffff;
  const Tensor idx_d = tables && !grouped ? rows.idx.to(x.device(), torch::kLong).contiguous() : Tensor();
  // The block-a-row kernel reads the index before its wait: one just copied or converted by the kernel right
  // before it may not be visible yet (decode_scope.h), so that launch waits in stream order.
  const bool early_reads = !idx_d.defined() || idx_d.data_ptr() == rows.idx.data_ptr();
  // A RowIndex may have been built on the CPU: the kernels read its groups on x's device.
  const Tensor order = grouped ? rows.order.to(x.device()).contiguous() : Tensor();
  const Tensor offsets = grouped ? rows.offsets.to(x.device()).contiguous() : Tensor();
  const auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_type(out_dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_chunks(d, [&](auto chunks) {
      constexpr int C = decltype(chunks)::value;
      const float* gate = t.gate.defined() ? t.gate.data_ptr<float>() : nullptr;
      const float* mod = t.mod.defined() ? t.mod.data_ptr<float>() : nullptr;
      const int64_t gate_ld = t.gate.defined() ? t.gate.stride(0) : 0, mod_ld = t.mod.defined() ? t.mod.stride(0) : 0;
      const T* yp = y.defined() ? y.data_ptr<T>() : nullptr;
      float* sp = s.defined() ? s.data_ptr<float>() : nullptr;
      float* rp = save_rstd ? rstd.data_ptr<float>() : nullptr;
      if (grouped)
        rms_step_forward_grouped_kernel<T, C><<<static_cast<unsigned>(rows.table_rows), 32 * C, 0, stream>>>(
            x.data_ptr<float>(), yp, order.data_ptr<int64_t>(), offsets.data_ptr<int64_t>(), gate, gate_ld, mod, mod_ld,
            weight.data_ptr<float>(), static_cast<float>(eps), sp, rp, h.data_ptr<T>());
      else
        split_rows<C, kWarps>(block_per_row(N), N, [&](auto split, dim3 grid, dim3 block) {
          launch_kernel<rms_step_forward_kernel<T, C, decltype(split)::value>>(
              grid, block, stream, decode_pdl() && early_reads, x.data_ptr<float>(), yp,
              tables ? idx_d.data_ptr<int64_t>() : nullptr, gate, gate_ld, mod, mod_ld, weight.data_ptr<float>(), N,
              static_cast<float>(eps), sp, rp, h.data_ptr<T>());
        });
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
  const Tensor order = tables ? rows.order.to(s.device()).contiguous() : Tensor();  // a CPU-built RowIndex too
  const Tensor offsets = tables ? rows.offsets.to(s.device()).contiguous() : Tensor();
  const auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_chunks(d, [&](auto chunks) {
      constexpr int C = decltype(chunks)::value;
      rms_step_backward_kernel<T, C><<<static_cast<unsigned>(groups), 32 * C, 0, stream>>>(
          s.data_ptr<float>(), rstd.data_ptr<float>(), y.defined() ? y.data_ptr<T>() : nullptr,
          grad_s.defined() ? grad_s.data_ptr<float>() : nullptr, grad_h.defined() ? grad_h.data_ptr<T>() : nullptr,
          tables ? order.data_ptr<int64_t>() : nullptr, tables ? offsets.data_ptr<int64_t>() : nullptr, N,
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
  // Each lane moves 8 elements at once: 8-element alignment for qkv, 32 bytes for the fp32 weights.
  return qkv.is_contiguous() && float_type(qkv.scalar_type()) && (h == 32 || h == 64 || h == 128 || h == 256) &&
         aligned(qkv, 8 * qkv.element_size()) && wq.scalar_type() == torch::kFloat &&
         wk.scalar_type() == torch::kFloat && wq.is_contiguous() && wk.is_contiguous() && aligned(wq, 32) &&
         aligned(wk, 32) && wq.device() == qkv.device() && wk.device() == qkv.device();
}

// Calls fn(std::integral_constant<int, L>) for h = 8·L lanes' worth of 8 elements, h ∈ {32, 64, 128, 256}.
template <typename Fn>
void dispatch_head(int64_t h, Fn&& fn) {
  dispatch_lanes(h / 8, fn);
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
    dispatch_head(h, [&](auto lanes) {
      constexpr int L = decltype(lanes)::value, per_block = kWarps * 32 / L;
      qk_norm_forward_kernel<T, L>
          <<<static_cast<unsigned>((pairs + per_block - 1) / per_block), 32 * kWarps, 0, stream>>>(
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
  // The kernel moves 8 elements per lane: a gradient view off that alignment is copied first.
  auto fit = [](const Tensor& g) { return aligned(g, 8 * g.element_size()) ? g : g.clone(); };
  const Tensor gq = fit(grad_q), gk = fit(grad_k), gv = fit(grad_v);
  Tensor grad_qkv = torch::empty_like(qkv);
  // A fixed grid (a few blocks per SM) keeps the weight partials small and the sums deterministic per device.
  const int64_t pairs_per_block = kWarps * 32 / (h / 8);
  const int64_t blocks =
      std::max<int64_t>(1, std::min<int64_t>((pairs + pairs_per_block - 1) / pairs_per_block,
                                             4 * at::cuda::getCurrentDeviceProperties()->multiProcessorCount));
  Tensor w_part = torch::zeros({blocks, 2, h}, qkv.options().dtype(torch::kFloat));
  if (pairs == 0) return {grad_qkv, w_part.sum(0)[0], w_part.sum(0)[1]};
  const auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_type(qkv.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    dispatch_head(h, [&](auto lanes) {
      qk_norm_backward_kernel<T, decltype(lanes)::value><<<static_cast<unsigned>(blocks), 32 * kWarps, 0, stream>>>(
          qkv.data_ptr<T>(), rstd.data_ptr<float>(), gq.data_ptr<T>(), gk.data_ptr<T>(), gv.data_ptr<T>(), pairs,
          static_cast<int>(H), wq.data_ptr<float>(), wk.data_ptr<float>(), grad_qkv.data_ptr<T>(),
          w_part.data_ptr<float>());
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  auto w = w_part.sum(0);  // (2, h)
  return {grad_qkv, w[0], w[1]};
}

}  // namespace aobench::common
