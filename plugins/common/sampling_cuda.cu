// Implements: the CUDA kernel of common::fused_draw (sampling.h): temperature, HF top-p and float64
// Gumbel-max in one kernel. One 1024-thread block per row of logits (N, V):
//   1. m = max l, Z = Σ exp((l − m)/T) in float64 (logp = (l − m)/T − log Z, log_softmax of l/T);
//   2. top-p < 1: a 4 × 8-bit radix select on an order-preserving key of the float logit finds the token that
//      crosses top_p; the masses are summed in 2⁻⁶⁰ fixed point (exact, so the nucleus does not depend on the
//      order of the atomics); tokens tied with it are kept lowest index first (a stable descending sort);
//   3. argmax over kept v of logp_v − log(−log u_v), u_v float64 uniforms in [0, 1) from the generator's
//      Philox stream (or a given noise tensor for the test against the LibTorch reference).
// The row stays in L2 between the passes (50257 bf16 logits = 100 KB). The histogram atomics are
// aggregated per warp and bin; the masses are integers, so the sums do not depend on the order.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGuard.h>
#include <curand_kernel.h>
#include <torch/types.h>
#include <ATen/cuda/PhiloxUtils.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>
#include <mutex>

namespace aobench::common {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr double kFixed = 1152921504606846976.0;  // 2^60: masses in [0, 1] as integers

// Larger float → larger key (sign flipped for positives, all bits for negatives).
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

template <typename R, typename Op>
__device__ R block_reduce(R v, R* shared, Op op) {
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // `shared` may still be read by the previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = shared[0];
  for (int w = 1; w < kWarps; ++w) v = op(v, shared[w]);  // same order in every thread: deterministic
  return v;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    fused_draw_kernel(const T* __restrict__ logits, int64_t row_stride, int64_t V, double temperature, double top_p,
                      at::PhiloxCudaState philox, const double* __restrict__ noise, int64_t* __restrict__ out) {
  const T* row = logits + static_cast<int64_t>(blockIdx.x) * row_stride;
  __shared__ float red_f[kWarps];
  __shared__ double red_d[kWarps];
  __shared__ unsigned long long hist[256];
  __shared__ unsigned int hist_n[256];
  __shared__ uint32_t s_prefix, s_mask;
  __shared__ unsigned long long s_above;
  __shared__ bool s_keep_all;
  __shared__ int64_t s_best_i[kWarps];
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;

  float m = -INFINITY;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) m = fmaxf(m, static_cast<float>(row[v]));
  m = block_reduce(m, red_f, [](float a, float b) { return fmaxf(a, b); });
  double z = 0.0;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) z += exp((static_cast<double>(row[v]) - m) / temperature);
  z = block_reduce(z, red_d, [](double a, double b) { return a + b; });
  const double log_z = log(z);
  auto logp = [&](float l) { return (static_cast<double>(l) - m) / temperature - log_z; };

  // Radix select of the crossing token: after the loop every key > s_prefix is kept, s_above is their mass.
  const bool nucleus = top_p < 1.0;
  const unsigned long long target = static_cast<unsigned long long>(top_p * kFixed);
  unsigned long long tie_keep = ~0ull;  // ties of the crossing key kept, lowest index first
  if (threadIdx.x == 0) {
    s_prefix = 0;
    s_mask = 0;
    s_above = 0;
    s_keep_all = !nucleus;
  }
  __syncthreads();
  for (int shift = 24; nucleus && shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kThreads) {
      hist[b] = 0;
      hist_n[b] = 0;
    }
    __syncthreads();
    const uint32_t prefix = s_prefix, mask = s_mask;
    for (int64_t base = 0; base < V; base += kThreads) {  // same trip count in every thread: full warps
      const int64_t v = base + threadIdx.x;
      int b = -1;  // this token's bin, −1 when it is out of range or outside the prefix
      unsigned long long mass = 0;
      if (v < V) {
        const float l = static_cast<float>(row[v]);
        const uint32_t key = order_key(l);
        if ((key & mask) == prefix) {
          b = (key >> shift) & 255;
          mass = static_cast<unsigned long long>(llrint(exp(logp(l)) * kFixed));
        }
      }
      // Most logits share one or two bins of the top byte (sign + exponent), so one shared atomic per token
      // serialises the pass; the lanes of a bin add their masses first and the lowest lane adds the sum.
      const unsigned peers = __match_any_sync(0xffffffffu, b);
      if (b >= 0) {
        unsigned long long sum = 0;
        for (unsigned rest = peers; rest; rest &= rest - 1) sum += __shfl_sync(peers, mass, __ffs(rest) - 1);
        if (static_cast<int>(threadIdx.x % 32) == __ffs(peers) - 1) {
          atomicAdd(&hist[b], sum);
          atomicAdd(&hist_n[b], static_cast<unsigned>(__popc(peers)));
        }
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long above = s_above;
      int pick = -1, lowest = -1;
      for (int b = 255; b >= 0; --b) {
        if (hist_n[b] == 0) continue;
        lowest = b;
        if (above + hist[b] >= target) {
          pick = b;
          break;
        }
        above += hist[b];
      }
      if (pick < 0) {  // the rounded total mass stays below top_p: every token is kept
        s_keep_all = true;
        pick = lowest;
        above -= hist[lowest];
      }
      s_prefix = prefix | (static_cast<uint32_t>(pick) << shift);
      s_mask = mask | (255u << shift);
      s_above = above;
      if (shift == 0) {
        // Ties: the j-th (by index) has mass_before = above + j·p*, kept while that is < top_p.
        const unsigned long long p_star = hist[pick] / hist_n[pick];
        const unsigned long long ties = p_star == 0 ? ~0ull : (target - above + p_star - 1) / p_star;
        s_above = ties > 0 ? ties : 1;  // reuse: ties to keep; the first is the crossing token itself
      }
    }
    __syncthreads();
  }
  if (nucleus) tie_keep = s_above;
  const bool keep_all = s_keep_all;
  const uint32_t crossing = s_prefix;

  // Gumbel-max over the kept tokens; every thread takes one uniform per sweep, kept or not.
  curandStatePhilox4_32_10_t state;
  if (!noise) {
    const auto seeds = at::cuda::philox::unpack(philox);
    curand_init(std::get<0>(seeds), static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x, std::get<1>(seeds),
                &state);
  }
  double2 pair{};
  int64_t best_i = INT64_MAX;
  double best_d = -INFINITY;
  int ties_before = 0;
  int sweep = 0;
  for (int64_t base = 0; base < V; base += kThreads, ++sweep) {
    const int64_t v = base + threadIdx.x;
    const bool valid = v < V;
    const float l = valid ? static_cast<float>(row[v]) : 0.f;
    const uint32_t key = order_key(l);
    const int tie = valid && !keep_all && key == crossing ? 1 : 0;
    int rank = 0, n_ties = 0;
    // Ties of the crossing logit are rare: the block-wide scan runs only in sweeps that hold one.
    if (nucleus && !keep_all && __syncthreads_or(tie)) {
      Scan(scan_tmp).ExclusiveSum(tie, rank, n_ties);
      __syncthreads();  // scan_tmp is reused by the next sweep
    }
    double u;
    if (noise) {
      u = valid ? noise[static_cast<int64_t>(blockIdx.x) * V + v] : 0.5;
    } else {
      if (sweep % 2 == 0) pair = curand_uniform2_double(&state);
      u = sweep % 2 == 0 ? pair.x : pair.y;
      if (u == 1.0) u = 0.0;  // curand gives (0, 1]; torch's uniform_ maps 1 to 0: [0, 1)
    }
    const bool kept = valid && (keep_all || key > crossing ||
                                (tie && static_cast<unsigned long long>(ties_before + rank) < tie_keep));
    ties_before += n_ties;
    if (kept) {
      const double score = logp(l) - log(-log(u));  // u = 0: −log(inf) = −inf, never chosen
      if (score > best_d || (score == best_d && v < best_i)) {
        best_d = score;
        best_i = v;
      }
    }
  }
  // Block argmax, lowest index among equal scores (torch's argmax returns the first maximum).
  for (int off = 16; off > 0; off >>= 1) {
    const double od = __shfl_xor_sync(0xffffffffu, best_d, off);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, best_i, off);
    if (od > best_d || (od == best_d && oi < best_i)) {
      best_d = od;
      best_i = oi;
    }
  }
  __shared__ double s_best_d[kWarps];
  if (threadIdx.x % 32 == 0) {
    s_best_d[threadIdx.x / 32] = best_d;
    s_best_i[threadIdx.x / 32] = best_i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kWarps; ++w)
      if (s_best_d[w] > best_d || (s_best_d[w] == best_d && s_best_i[w] < best_i)) {
        best_d = s_best_d[w];
        best_i = s_best_i[w];
      }
    out[blockIdx.x] = best_i == INT64_MAX ? 0 : best_i;  // all −inf (or NaN): index 0, like argmax
  }
}

}  // namespace

torch::Tensor fused_draw_cuda(const torch::Tensor& logits, double temperature, double top_p, at::Generator* gen,
                              const torch::Tensor& noise) {
  TORCH_CHECK(logits.is_cuda() && logits.dim() == 2 && (logits.size(1) <= 1 || logits.stride(1) == 1),
              "fused_draw: logits must be (N, V) on CUDA with unit column stride, got ", logits.sizes(), " strides ",
              logits.strides());
  const int64_t N = logits.size(0), V = logits.size(1);
  TORCH_CHECK(V >= 1 && V < (int64_t(1) << 31), "fused_draw: vocabulary of ", V, " columns");
  c10::cuda::CUDAGuard guard(logits.device());
  auto out = torch::empty({N}, logits.options().dtype(torch::kLong));
  if (N == 0) return out;
  torch::Tensor u;
  at::PhiloxCudaState philox;
  if (noise.defined()) {
    TORCH_CHECK(noise.sizes() == logits.sizes(), "fused_draw: noise ", noise.sizes(), " vs logits ", logits.sizes());
    u = noise.to(logits.device(), torch::kFloat64).contiguous();
  } else {
    TORCH_CHECK(gen != nullptr, "fused_draw: a CUDA generator or a noise tensor is needed");
    auto* g = at::check_generator<at::CUDAGeneratorImpl>(*gen);
    const int64_t sweeps = (V + kThreads - 1) / kThreads;
    std::lock_guard<std::mutex> lock(g->mutex_);
    philox = g->philox_cuda_state(4 * ((sweeps + 1) / 2));  // 4 32-bit values per curand_uniform2_double
  }
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, logits.scalar_type(), "fused_draw", [&] {
    fused_draw_kernel<scalar_t>
        <<<N, kThreads, 0, stream>>>(logits.data_ptr<scalar_t>(), logits.stride(0), V, temperature, top_p, philox,
                                     u.defined() ? u.data_ptr<double>() : nullptr, out.data_ptr<int64_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace aobench::common
