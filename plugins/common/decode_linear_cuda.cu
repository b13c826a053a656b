// Implements: the CUDA kernel of decode_linear (decode_linear.h): y = act(x·wᵀ + b) for R ≤ 32 rows in bf16.
// A block owns 8·NT output columns for every row and a 1/S share of K; its 8 warps split that share between them;
// a warp walks its chunks of 32 K elements with tensor-core MMAs (m16n8k16, fp32 accumulators), loading one 16
// bytes per lane of each of 8 weight rows per chunk, the loads of several chunks issued before their MMAs. The
// block adds its warps' partial tiles in shared memory in warp order; with S > 1 the S blocks of a thread-block
// cluster (sm_90) that share the columns then add their sums through distributed shared memory in rank order,
// each block finishing 1/S of the outputs (the same sums every launch). The bias is added, the sum rounded to
// bf16 and the activation applied to the rounded value (what torch::gelu of addmm's output computes).
// Why split K: every block reads all R rows of its share of x, so x's traffic from L2 is R·K·2 bytes times the
// column tiles; for 32 rows it outweighs the weight itself (MLP c_proj at NT 1: 18.9 MB of x for 4.7 MB of
// weight). Wider column tiles cut that, and the split keeps ≥ one block per SM and few chunks per warp, so a
// warp's loads of x are all in flight at once. decode_linear_tile chooses NT and S from a sweep on an H200
// (docs/results/perf/): the cluster's two syncs and DSMEM adds cost more than they save while a warp has ≤ 24
// chunks (K = 768), so only a longer K is split (MLP c_proj, K 3072: 5.8 → 4.6 µs a launch at NT 4, S 4 in a
// chain of c_proj launches; NT 2, S 4 in whole samples, where the c_fc before it holds the SMs: 6.1 µs against
// 6.9 µs on an H100).
// A few µs a launch are fixed costs (the launch, the first DRAM round trip, the drain), larger than streaming
// a few MB, so inside a sampler (decode_scope.h: its weights are constant) the kernel is launched as a
// programmatic dependent (PDL): its blocks start while the kernel before it finishes, load their share of the
// weight, and only then wait for that kernel's writes (griddepcontrol.wait) before reading x. Nothing is written
// before the wait, so a buffer the kernel before still reads is never overwritten. It lets the kernel after it
// start once its MMAs are done. Launched without PDL, the wait returns at once.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cooperative_groups.h>
#include <torch/types.h>

#include <cmath>
#include <cstdint>
#include <optional>

#include "plugins/common/cuda_vec.cuh"
#include "plugins/common/decode_linear.h"

namespace aobench::common {
namespace {

using bf16 = c10::BFloat16;

constexpr int kWarps = 8;   // warps per block, each summing its share of the K chunks
constexpr int kChunk = 32;  // K elements a chunk: a lane's 16 bytes of a row, at q·8 within the chunk

// d += a·b for one m16n8k16 tile: bf16 operands, fp32 accumulators (PTX ISA, warp-level mma.sync).
__device__ __forceinline__ void mma_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                          uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// 16 bytes of a weight, read once a step: not kept in L1, so the rows of x that every block reads stay there.
// volatile: issued where written, before the wait (the non-coherent path is right for them: no kernel writes the
// weights while this one runs).
__device__ __forceinline__ uint4 load_weight(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
// 16 bytes of x, which the kernel before may still be writing until the wait: a coherent load after it.
__device__ __forceinline__ uint4 load_input(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// torch's CUDA GELU (ActivationGeluKernel.cu) in float, the same expressions.
__device__ __forceinline__ float activate(float v, DecodeActivation act) {
  if (act == DecodeActivation::gelu) return v * 0.5f * (1.0f + erff(v * static_cast<float>(M_SQRT1_2)));
  if (act == DecodeActivation::gelu_tanh) {
    constexpr float kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715f;
    return 0.5f * v * (1.0f + tanhf(kBeta * (v + kKappa * (v * v * v))));
  }
  return v;
}

struct Params {
  const bf16* x;  // (R, K)
  const bf16* w;  // (N, K)
  const bf16* b;  // (N) or null
  bf16* y;        // (R, N)
  int R, N, K;
  DecodeActivation act;
};

// MT 16-row tiles of x (R ≤ 16·MT), NT 8-column tiles of w a block, S blocks of a cluster splitting K. The
// physical K order inside a chunk differs from the MMA's logical one (a lane loads K elements q·8 … q·8 + 7 and
// hands pairs 0, 1 to the first MMA's k slots 2q and 2q + 8, pairs 2, 3 to the second's), identically for x and
// w, so each dot product is complete.
template <int MT, int NT, int S>
__global__ void __launch_bounds__(32 * kWarps, 2) decode_linear_kernel(const Params p) {
  // Chunks of weight loads in flight per warp (48 registers): every chunk of a warp's share for the GPT-2 small
  // shapes, so the whole weight is loaded before the wait.
  constexpr int kUnroll = 12 / NT;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
  // Clusters are S consecutive blocks along x: rank blockIdx.x % S of column tile blockIdx.x / S.
  const int rank = static_cast<int>(blockIdx.x) % S, n0 = static_cast<int>(blockIdx.x) / S * 8 * NT;
  const int chunks = p.K / kChunk, per_block = (chunks + S - 1) / S;
  const int b0 = min(chunks, rank * per_block), b1 = min(chunks, b0 + per_block);
  const int per_warp = (b1 - b0 + kWarps - 1) / kWarps;
  const int c0 = min(b1, b0 + warp * per_warp), c1 = min(b1, c0 + per_warp);

  // Rows g and g + 8 of each x tile (rows past R read row 0 and are never written) and row n0 + 8t + g of w.
  const uint4* xr[MT][2];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 16 * m + 8 * h + g;
      xr[m][h] = reinterpret_cast<const uint4*>(p.x + static_cast<int64_t>(r < p.R ? r : 0) * p.K + q * 8);
    }
  const uint4* wr[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t)
    wr[t] = reinterpret_cast<const uint4*>(p.w + static_cast<int64_t>(n0 + 8 * t + g) * p.K + q * 8);

  float acc[MT][NT][4];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][t][i] = 0.f;

  constexpr int kPerChunk = kChunk / 8;  // uint4 of a row per chunk
  uint4 wf[kUnroll][NT];
  auto load_weights = [&](int c) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int t = 0; t < NT; ++t)
        wf[u][t] = c + u < c1 ? load_weight(wr[t] + (c + u) * kPerChunk) : make_uint4(0u, 0u, 0u, 0u);
  };
  load_weights(c0);
  wait_for_inputs();  // x (and the buffer y reuses) belong to the kernels before this one until here
  for (int c = c0; c < c1; c += kUnroll) {
    if (c != c0) load_weights(c);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (c + u >= c1) break;
      uint4 xf[MT][2];
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) xf[m][h] = load_input(xr[m][h] + (c + u) * kPerChunk);
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          mma_16816(acc[m][t], xf[m][0].x, xf[m][1].x, xf[m][0].y, xf[m][1].y, wf[u][t].x, wf[u][t].y);
          mma_16816(acc[m][t], xf[m][0].z, xf[m][1].z, xf[m][0].w, xf[m][1].w, wf[u][t].z, wf[u][t].w);
        }
    }
  }

  let_dependents_launch();
  // The warps' partial tiles, summed in warp order. Accumulator i of tile (m, t) in lane (g, q) is row
  // 16m + g + 8·(i ≥ 2), column n0 + 8t + 2q + i % 2 (the m16n8 C fragment); slot e = (m·NT + t)·4 + i, lane l
  // is element e·32 + l of the block's sums.
  constexpr int kSlots = MT * NT * 4, kSums = kSlots * 32;
  __shared__ float part[kWarps][kSums];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) part[warp][((m * NT + t) * 4 + i) * 32 + lane] = acc[m][t][i];
  __syncthreads();
  auto warps_sum = [&](int e) {  // element e of the block's sums, in warp order
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += part[w][e];
    return s;
  };
  // Element e, summed over the warps (and with S > 1 over the cluster's blocks), then written out.
  auto finish = [&](int e, float s) {
    const int slot = e / 32, ln = e % 32, i = slot % 4, m = slot / 4 / NT, t = slot / 4 % NT;
    const int row = 16 * m + ln / 4 + (i >= 2 ? 8 : 0), col = n0 + 8 * t + 2 * (ln % 4) + i % 2;
    if (row >= p.R) return;
    if (p.b) s += static_cast<float>(p.b[col]);
    bf16 out = s;  // addmm's one rounding
    if (p.act != DecodeActivation::none) out = activate(static_cast<float>(out), p.act);
    p.y[static_cast<int64_t>(row) * p.N + col] = out;
  };
  if constexpr (S == 1) {
    for (int e = threadIdx.x; e < kSums; e += 32 * kWarps) finish(e, warps_sum(e));
  } else {
    // The block's sums in part[0] (each element is read and written by one thread only).
    for (int e = threadIdx.x; e < kSums; e += 32 * kWarps) part[0][e] = warps_sum(e);
    namespace cg = cooperative_groups;
    const cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every block's sums are written and visible to the cluster
    const float* sums[S];
#pragma unroll
    for (int r = 0; r < S; ++r) sums[r] = cluster.map_shared_rank(&part[0][0], r);
    for (int e = rank * 32 * kWarps + threadIdx.x; e < kSums; e += S * 32 * kWarps) {
      float s = 0.f;
#pragma unroll
      for (int r = 0; r < S; ++r) s += sums[r][e];
      finish(e, s);
    }
    cluster.sync();  // no block leaves while another still reads its shared memory
  }
}

}  // namespace

torch::Tensor decode_linear_cuda(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                 DecodeActivation act, bool early_weights, std::optional<DecodeLinearTile> tile) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t R = x.size(0), K = x.size(1), N = w.size(0);
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const DecodeLinearTile t = tile ? *tile : decode_linear_tile(N, K, sms);
  auto y = torch::empty({R, N}, x.options());
  const Params p{reinterpret_cast<const bf16*>(x.data_ptr()),
                 reinterpret_cast<const bf16*>(w.data_ptr()),
                 b.defined() ? reinterpret_cast<const bf16*>(b.data_ptr()) : nullptr,
                 reinterpret_cast<bf16*>(y.data_ptr()),
                 static_cast<int>(R),
                 static_cast<int>(N),
                 static_cast<int>(K),
                 act};
  const auto stream = at::cuda::getCurrentCUDAStream();
  auto launch = [&](auto mt, auto nt, auto s) {
    constexpr int MT = decltype(mt)::value, NT = decltype(nt)::value, S = decltype(s)::value;
    launch_cluster_kernel<decode_linear_kernel<MT, NT, S>>(dim3(static_cast<unsigned>(N / (8 * NT) * S)),
                                                           dim3(32 * kWarps), S, stream, early_weights, p);
  };
  auto with_split = [&](auto mt, auto nt) {
    switch (t.k_split) {
      case 1:
        return launch(mt, nt, std::integral_constant<int, 1>());
      case 2:
        return launch(mt, nt, std::integral_constant<int, 2>());
      case 4:
        return launch(mt, nt, std::integral_constant<int, 4>());
      default:
        return launch(mt, nt, std::integral_constant<int, 8>());
    }
  };
  auto with_tiles = [&](auto mt) {
    switch (t.col_tiles) {
      case 1:
        return with_split(mt, std::integral_constant<int, 1>());
      case 2:
        return with_split(mt, std::integral_constant<int, 2>());
      default:
        return with_split(mt, std::integral_constant<int, 4>());
    }
  };
  R <= 16 ? with_tiles(std::integral_constant<int, 1>()) : with_tiles(std::integral_constant<int, 2>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

}  // namespace aobench::common
