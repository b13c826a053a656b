// Implements: the CUDA kernel of decode_attention (decode_attention.h): the S ≤ 16 new slots of a step (one for
// a decode step) per (batch, head) row over the slots 0..slot + S − 1 of a static KV cache. A block walks its
// row's slots in steps of kStep keys, scoring every key against NQ ≤ 4 of the row's S queries (one block per
// group of NQ: the registers of more would halve the blocks an SM holds), with the running max m, sum l and
// Σ p·v of an online softmax in fp32 per query and lane group; slots a query may not see score −∞, and no slot
// past the step is read. When the tasks (row, group) fill less than one wave of resident blocks the slots are
// split over several blocks per task (flash-decoding) and the last block of a task to finish (an atomic
// counter per task, which that block resets) combines their partials. The blocks holding the new slots first write
// them into the cache (the keys QK-normalised when the weights are given) and read them back like the others:
// one launch replaces the QK norm, the cache writes, the mask and the attention of a step.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "plugins/common/cuda_vec.cuh"
#include "plugins/common/decode_attention.h"
#include "plugins/common/decode_scope.h"
#include "plugins/common/kernel_util.h"

namespace aobench::common {
namespace {

using torch::Tensor;

constexpr int kMaxSplits = 64;  // blocks per row at most (the combine keeps their m and l in shared memory)

// A key's h elements are spread over L lanes of kV = 16 / sizeof(T) elements (one 16-byte load per lane and
// key); a warp holds G = 32 / L keys side by side and each lane group loads kKeys keys per step. A block has
// kWarps warps and kMinBlocks fit an SM (a thread's registers: at most 65536 / (32 · kWarps · kMinBlocks)).
// One query (a decode step): 8 warps of 2 keys (≤ 85 registers), so the 384 rows of the small models at batch 32
// run in one wave of 24 warps an SM, against 12 with 4 warps of 4 keys: 16.7 against 18.3 µs at 512 held slots,
// 27.5 against 31.4 at 1023 under PDL (H200, BM_DecodeAttention); whole samples 0.5–1.3 % faster, within their
// noise (docs/results/perf/). NQ queries: a lane also holds NQ query vectors and accumulators, so 4 warps.
template <typename T, int L, int NQ>
struct Shape {
  static constexpr int kWarps = NQ == 1 ? 8 : 4, kMinBlocks = 3;
  static constexpr int kV = 16 / sizeof(T), h = L * kV, G = 32 / L;
  static constexpr int kKeys = NQ == 2 ? 4 : 2;
  static constexpr int kStep = kWarps * G * kKeys;  // keys per block step: 64 for h = 64 in bf16, one query
};

template <int kV, typename T>
__device__ __forceinline__ void to_float(const Pack<T, kV>& p, float (&o)[kV]) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {  // bf16 is the top half of a float: two per 32-bit word
    const auto* u = reinterpret_cast<const uint32_t*>(&p);
#pragma unroll
    for (int e = 0; e < kV / 2; ++e) {
      o[2 * e] = __uint_as_float(u[e] << 16);
      o[2 * e + 1] = __uint_as_float(u[e] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int e = 0; e < kV; ++e) o[e] = static_cast<float>(p.v[e]);
  }
}

// x · rsqrt(mean(x²) + eps) · w over the L lanes of a group, rounded to T (qk_rms_norm's forward); every lane
// of the warp calls it.
template <int L, int kV, typename T>
__device__ __forceinline__ Pack<T, kV> rms_normed(const Pack<T, kV>& x, const float* w, float eps) {
  float f[kV], sq = 0.f;
  to_float(x, f);
#pragma unroll
  for (int e = 0; e < kV; ++e) sq += f[e] * f[e];
#pragma unroll
  for (int off = L / 2; off > 0; off >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, off);
  const float rs = rsqrtf(sq / (L * kV) + eps);
  Pack<T, kV> o;
#pragma unroll
  for (int e = 0; e < kV; ++e) o.v[e] = static_cast<T>(f[e] * (rs * w[e]));  // qk_norm_forward_kernel's order
  return o;
}

// Merges the softmax partial (m2, l2, a2) into (m, l, a); m = −inf marks an empty partial (l = 0, a = 0).
template <int kV>
__device__ __forceinline__ void merge(float& m, float& l, float (&a)[kV], float m2, float l2, const float (&a2)[kV]) {
  const float M = fmaxf(m, m2);
  if (M == -INFINITY) return;
  const float s1 = m == -INFINITY ? 0.f : exp2f(m - M), s2 = m2 == -INFINITY ? 0.f : exp2f(m2 - M);
  l = l * s1 + l2 * s2;
#pragma unroll
  for (int e = 0; e < kV; ++e) a[e] = a[e] * s1 + a2[e] * s2;
  m = M;
}

struct Params {
  const void *q, *k_new, *v_new;
  // element (b, head, i, e) at b·s_b + head·s_h + i·s_s + e
  int64_t q_sb, q_sh, q_ss, kn_sb, kn_sh, kn_ss, vn_sb, vn_sh, vn_ss;
  void *k_cache, *v_cache;  // (rows, cap, h) contiguous
  const int64_t* slot;      // the step's first slot (the slots held before it)
  int n_new, seen;          // new slot i sees slots < slot + min(i, seen) and slot + i
  const float *wq, *wk;     // (h) QK-norm weights, or null
  float eps, scale_log2;
  int H, cap, steps_per_split;
  float* part;   // (rows, groups, splits, NQ, h + 2): Σ p·v, m (log2 units), l of each split and query
  int* counter;  // (rows, groups) int32, zero between launches
  void* out;     // (rows, n_new, h)
};

// Block (row, split, group) scores the group's queries q0 … q0 + n_q − 1.
template <typename T, int L, int NQ>
__global__ void __launch_bounds__(32 * Shape<T, L, NQ>::kWarps, Shape<T, L, NQ>::kMinBlocks)
    decode_attention_kernel(const Params p) {
  using S = Shape<T, L, NQ>;
  constexpr int kWarps = S::kWarps;
  constexpr int kV = S::kV, h = S::h, G = S::G, kKeys = S::kKeys, kStep = S::kStep;
  using P = Pack<T, kV>;
  let_dependents_launch();  // the output projection (decode_linear) may start loading its weights
  const int row = blockIdx.x, split = blockIdx.y, n_split_max = gridDim.y, n_new = p.n_new;
  const int q0 = blockIdx.z * NQ, n_q = min(NQ, n_new - q0), task = row * gridDim.z + blockIdx.z;
  T* out = static_cast<T*>(p.out) + static_cast<int64_t>(row) * n_new * h;
  // The slot counter and the slots before it were written before the step's first kernel (decode_scope.h): read
  // before the wait, with the block's first step of keys when it holds no new slot.
  const int64_t slot64 = *p.slot;
  const bool in_cache = slot64 >= 0 && slot64 + n_new <= p.cap;
  const int slot = in_cache ? static_cast<int>(slot64) : 0, last = slot + n_new - 1, n_steps = last / kStep + 1;
  const int step0 = split * p.steps_per_split, step1 = min(n_steps, step0 + p.steps_per_split);
  const int n_split = (n_steps + p.steps_per_split - 1) / p.steps_per_split;  // splits holding slots
  const int b = row / p.H, head = row % p.H;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, grp = lane / L, sub = lane % L;
  T* kc = static_cast<T*>(p.k_cache) + static_cast<int64_t>(row) * p.cap * h + sub * kV;
  T* vc = static_cast<T*>(p.v_cache) + static_cast<int64_t>(row) * p.cap * h + sub * kV;
  // A step's keys of this lane group: a warp reads G consecutive keys at a time (G·h contiguous elements).
  auto load = [&](int st, P(&kp)[kKeys], P(&vp)[kKeys]) {
    const int first = st * kStep + warp * G * kKeys + grp;
#pragma unroll
    for (int i = 0; i < kKeys; ++i) {
      const int j = first + i * G;
      if (j <= last) {
        kp[i] = *reinterpret_cast<const P*>(kc + static_cast<int64_t>(j) * h);
        vp[i] = *reinterpret_cast<const P*>(vc + static_cast<int64_t>(j) * h);
      }
    }
  };
  P k0[kKeys], v0[kKeys], k1[kKeys], v1[kKeys];
  const bool early = in_cache && (step0 + 1) * kStep <= slot;  // step0 holds cached slots only
  if (early) load(step0, k0, v0);
  wait_for_inputs();  // launched as a decode step's dependent: q, k and v are the kernels' before it
  if (!in_cache) {    // no slots to write: NaN out rather than memory past the cache
    if (split == 0 && blockIdx.z == 0)
      for (int t = threadIdx.x; t < n_new * h; t += blockDim.x) out[t] = static_cast<T>(NAN);
    return;
  }
  if (step0 >= n_steps) return;
  auto row_vec = [&](const void* base, int64_t sb, int64_t sh, int64_t ss, int i) {
    return *reinterpret_cast<const P*>(static_cast<const T*>(base) + b * sb + head * sh + i * ss + sub * kV);
  };

  // The queries first: their loads go out with the new slots' below (the queries past n_q copy query 0 and never
  // see a key).
  float qf[NQ][kV];
#pragma unroll
  for (int qi = 0; qi < NQ; ++qi) {
    P qp = row_vec(p.q, p.q_sb, p.q_sh, p.q_ss, qi < n_q ? q0 + qi : 0);
    if (p.wq) qp = rms_normed<L>(qp, p.wq + sub * kV, p.eps);
    to_float(qp, qf[qi]);
  }
  // The new slots this block walks, into the cache first (each group's block writes the same bytes). Every
  // lane runs the loop (the norm's shuffles stay warp-wide); __syncthreads makes the writes visible to the
  // block's other threads.
  const int lo = max(slot, step0 * kStep), hi = min(last + 1, step1 * kStep);
  for (int i0 = 0; i0 < n_new; i0 += kWarps * G) {
    const int i = i0 + warp * G + grp;
    const bool mine = i < n_new && slot + i >= lo && slot + i < hi;
    P kn = row_vec(p.k_new, p.kn_sb, p.kn_sh, p.kn_ss, mine ? i : 0);
    if (p.wk) kn = rms_normed<L>(kn, p.wk + sub * kV, p.eps);
    if (mine) {
      *reinterpret_cast<P*>(kc + static_cast<int64_t>(slot + i) * h) = kn;
      *reinterpret_cast<P*>(vc + static_cast<int64_t>(slot + i) * h) = row_vec(p.v_new, p.vn_sb, p.vn_sh, p.vn_ss, i);
    }
  }
  __syncthreads();
  // Query qi sees key j: every cached slot, the step's slots before min(qi, seen), and its own.
  auto sees = [&](int qi, int j) {
    const int g = q0 + qi;
    return qi < n_q && (j < slot + min(g, p.seen) || j == slot + g);
  };

  float m[NQ], l[NQ], a[NQ][kV];
#pragma unroll
  for (int qi = 0; qi < NQ; ++qi) {
    m[qi] = -INFINITY, l[qi] = 0.f;
#pragma unroll
    for (int e = 0; e < kV; ++e) a[qi][e] = 0.f;
  }
  auto consume = [&](int st, const P(&kp)[kKeys], const P(&vp)[kKeys]) {
    const int first = st * kStep + warp * G * kKeys + grp;
    float s[NQ][kKeys];
#pragma unroll
    for (int i = 0; i < kKeys; ++i) {
      float kf[kV];
      to_float(kp[i], kf);  // past the step kp[i] is unloaded: its scores are replaced below
#pragma unroll
      for (int qi = 0; qi < NQ; ++qi) {
        float dot = 0.f;
#pragma unroll
        for (int e = 0; e < kV; ++e) dot += qf[qi][e] * kf[e];
#pragma unroll
        for (int off = L / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        s[qi][i] = sees(qi, first + i * G) ? dot * p.scale_log2 : -INFINITY;
      }
    }
#pragma unroll
    for (int qi = 0; qi < NQ; ++qi) {
      float m_step = -INFINITY;
#pragma unroll
      for (int i = 0; i < kKeys; ++i) m_step = fmaxf(m_step, s[qi][i]);
      if (m_step == -INFINITY) continue;  // this query sees none of the group's keys of the step
      const float m_new = fmaxf(m[qi], m_step), corr = m[qi] == -INFINITY ? 0.f : exp2f(m[qi] - m_new);
      l[qi] *= corr;
#pragma unroll
      for (int e = 0; e < kV; ++e) a[qi][e] *= corr;
#pragma unroll
      for (int i = 0; i < kKeys; ++i) {
        if (s[qi][i] == -INFINITY) continue;  // unseen (vp[i] may be unloaded)
        const float w = exp2f(s[qi][i] - m_new);
        float vf[kV];
        to_float(vp[i], vf);
        l[qi] += w;
#pragma unroll
        for (int e = 0; e < kV; ++e) a[qi][e] += w * vf[e];
      }
      m[qi] = m_new;
    }
  };
  // The next step's keys are loaded before the current ones are used, so a block keeps two steps in flight.
  if (!early) load(step0, k0, v0);
  for (int st = step0; st < step1; st += 2) {  // two register sets, alternating
    if (st + 1 < step1) load(st + 1, k1, v1);
    consume(st, k0, v0);
    if (st + 1 >= step1) break;
    if (st + 2 < step1) load(st + 2, k0, v0);
    consume(st + 1, k1, v1);
  }
  // The warp's G groups into one partial per query (every group ends with it), then the block's warps
  // through shared memory.
#pragma unroll
  for (int qi = 0; qi < NQ; ++qi)
#pragma unroll
    for (int off = L; off < 32; off <<= 1) {
      float a2[kV];
#pragma unroll
      for (int e = 0; e < kV; ++e) a2[e] = __shfl_xor_sync(0xffffffffu, a[qi][e], off);
      const float m2 = __shfl_xor_sync(0xffffffffu, m[qi], off), l2 = __shfl_xor_sync(0xffffffffu, l[qi], off);
      merge<kV>(m[qi], l[qi], a[qi], m2, l2, a2);
    }
  __shared__ float sm_a[kWarps][NQ][h], sm_wm[kWarps][NQ], sm_wl[kWarps][NQ], sm_m[kMaxSplits][NQ],
      sm_l[kMaxSplits][NQ];
  __shared__ float sm_M[NQ], sm_lsum[NQ], sm_ws[kWarps][NQ];
  __shared__ bool last_block;
  if (grp == 0) {
#pragma unroll
    for (int qi = 0; qi < NQ; ++qi) {
#pragma unroll
      for (int e = 0; e < kV; ++e) sm_a[warp][qi][sub * kV + e] = a[qi][e];
      if (sub == 0) {
        sm_wm[warp][qi] = m[qi];
        sm_wl[warp][qi] = l[qi];
      }
    }
  }
  __syncthreads();
  if (threadIdx.x < NQ) {  // per query: the block's max (−∞ when it sees none of the block's keys) and sum
    const int qi = threadIdx.x;
    float M = -INFINITY, lsum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sm_wm[w][qi]);
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      sm_ws[w][qi] = sm_wm[w][qi] == -INFINITY ? 0.f : exp2f(sm_wm[w][qi] - M);
      lsum += sm_wl[w][qi] * sm_ws[w][qi];
    }
    sm_M[qi] = M;
    sm_lsum[qi] = lsum;
  }
  __syncthreads();
  auto block_acc = [&](int qi, int e) {
    float acc = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) acc += sm_a[w][qi][e] * sm_ws[w][qi];
    return acc;
  };
  T* outq = out + q0 * h;  // (n_q, h)
  if (n_split == 1) {      // the whole row in this block
    for (int t = threadIdx.x; t < n_q * h; t += blockDim.x)
      outq[t] = static_cast<T>(block_acc(t / h, t % h) / sm_lsum[t / h]);
    return;
  }
  float* row_part = p.part + static_cast<int64_t>(task) * n_split_max * NQ * (h + 2);
  float* mine = row_part + split * NQ * (h + 2);  // (NQ, h + 2)
  for (int t = threadIdx.x; t < n_q * h; t += blockDim.x) mine[(t / h) * (h + 2) + t % h] = block_acc(t / h, t % h);
  if (threadIdx.x < n_q) {
    mine[threadIdx.x * (h + 2) + h] = sm_M[threadIdx.x];
    mine[threadIdx.x * (h + 2) + h + 1] = sm_lsum[threadIdx.x];
  }
  __threadfence();  // the partial is visible device-wide before the counter says so
  __syncthreads();
  if (threadIdx.x == 0) last_block = atomicAdd(p.counter + task, 1) == n_split - 1;
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  // The row's last block combines the n_split partials, read past L1 (other SMs wrote them): their m and l
  // in parallel into shared memory, then each output element over the splits. Every query sees a key of some
  // split (its own slot), so its max over the splits is finite.
  for (int t = threadIdx.x; t < n_split * n_q; t += blockDim.x) {
    const int c = t / n_q, qi = t % n_q;
    sm_m[c][qi] = __ldcg(row_part + (c * NQ + qi) * (h + 2) + h);
    sm_l[c][qi] = __ldcg(row_part + (c * NQ + qi) * (h + 2) + h + 1);
  }
  __syncthreads();
  if (threadIdx.x < n_q) {
    const int qi = threadIdx.x;
    float Mrow = -INFINITY, lrow = 0.f;
    for (int c = 0; c < n_split; ++c) Mrow = fmaxf(Mrow, sm_m[c][qi]);
    for (int c = 0; c < n_split; ++c) {
      sm_m[c][qi] = sm_m[c][qi] == -INFINITY ? 0.f : exp2f(sm_m[c][qi] - Mrow);  // now the split's weight
      lrow += sm_l[c][qi] * sm_m[c][qi];
    }
    sm_lsum[qi] = lrow;
  }
  __syncthreads();
  for (int t = threadIdx.x; t < n_q * h; t += blockDim.x) {
    const int qi = t / h, e = t % h;
    float acc = 0.f;
#pragma unroll 8
    for (int c = 0; c < n_split; ++c) acc += __ldcg(row_part + (c * NQ + qi) * (h + 2) + e) * sm_m[c][qi];
    outq[t] = static_cast<T>(acc / sm_lsum[qi]);
  }
  if (threadIdx.x == 0) p.counter[task] = 0;  // ready for the next launch (graph replays included)
}

// Blocks of one instantiation resident per SM: a property of the compiled kernel, read once.
template <typename T, int L, int NQ>
int blocks_per_sm() {
  static const int n = [] {
    int k = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k, decode_attention_kernel<T, L, NQ>,
                                                                 32 * Shape<T, L, NQ>::kWarps, 0));
    return std::max(1, k);
  }();
  return n;
}

// A launch's blocks per (row, group): as many as fit the GPU at once (one wave), one per task when the tasks
// fill it, else the slots of a row are split over several (flash-decoding), per_split steps of kStep keys each.
struct Grid {
  int64_t splits, per_split;
};
template <typename T, int L, int NQ>
Grid grid_for(int64_t tasks, int64_t cap) {
  constexpr int kStep = Shape<T, L, NQ>::kStep;
  const int64_t steps = (cap + kStep - 1) / kStep;
  const int64_t resident =
      blocks_per_sm<T, L, NQ>() * static_cast<int64_t>(at::cuda::getCurrentDeviceProperties()->multiProcessorCount);
  const int64_t want = std::clamp<int64_t>(resident / tasks, 1, std::min<int64_t>(steps, kMaxSplits));
  const int64_t per_split = (steps + want - 1) / want;
  return {(steps + per_split - 1) / per_split, per_split};
}

// The partials' floats for `tasks` (row, group) pairs of an NQ-query kernel (1 when it splits no row).
template <typename T, int L, int NQ>
int64_t partials_for(int64_t tasks, int64_t cap, int64_t h) {
  const Grid g = grid_for<T, L, NQ>(tasks, cap);
  return g.splits > 1 ? tasks * g.splits * NQ * (h + 2) : 1;
}

}  // namespace

bool decode_attention_cuda_supports(const Tensor& q, const Tensor& k_new, const Tensor& v_new, const Tensor& k_buf,
                                    const Tensor& v_buf) {
  const auto dt = q.scalar_type();
  if (!(dt == torch::kFloat || dt == torch::kBFloat16 || dt == torch::kHalf)) return false;
  const int64_t h = q.size(3), kv = 16 / q.element_size(), lanes = h % kv == 0 ? h / kv : 0;
  if (!(lanes == 4 || lanes == 8 || lanes == 16 || lanes == 32) || h < 32) return false;  // h ∈ {32, …, 256}
  for (const Tensor* t : {&q, &k_new, &v_new, &k_buf, &v_buf})
    if (!t->is_cuda() || t->device() != q.device() || t->scalar_type() != dt || t->dim() != 4 || t->size(3) != h ||
        t->stride(3) != 1 || !aligned(*t, 16) || t->size(0) != q.size(0) || t->size(1) != q.size(1))
      return false;
  const int64_t S = q.size(2);
  if (S < 1 || S > kDecodeMaxSlots) return false;
  for (const Tensor* t : {&q, &k_new, &v_new})  // head, batch and slot strides keep every row 16-byte aligned
    if (t->size(2) != S || t->stride(0) % kv != 0 || t->stride(1) % kv != 0 || (S > 1 && t->stride(2) % kv != 0))
      return false;
  return k_buf.is_contiguous() && v_buf.is_contiguous() && k_buf.sizes() == v_buf.sizes() &&
         k_buf.size(2) < (int64_t{1} << 30) && q.size(0) * q.size(1) < (int64_t{1} << 31);
}

Tensor decode_attention_cuda(const Tensor& q, const Tensor& k_new, const Tensor& v_new, Tensor& k_buf, Tensor& v_buf,
                             const Tensor& slot, int64_t seen, double scale, DecodeScratch& scratch,
                             const QkNorm* norm) {
  const c10::cuda::CUDAGuard guard(q.device());
  TORCH_CHECK(slot.is_cuda() && slot.scalar_type() == torch::kLong && slot.numel() == 1 && slot.device() == q.device(),
              "decode_attention: slot must be one int64 on the query's device");
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2), h = q.size(3), rows = B * H, cap = k_buf.size(2);
  Tensor wq, wk;
  if (norm) {  // fp32 (h), read one float at a time
    auto fit = [&](const Tensor& w) {
      TORCH_CHECK(w.dim() == 1 && w.size(0) == h, "decode_attention: a QK-norm weight must be (", h, "), got ",
                  w.sizes());
      return w.to(q.device(), torch::kFloat).contiguous();
    };
    wq = fit(norm->wq);
    wk = fit(norm->wk);
  }
  Tensor out = torch::empty({B, H, S, h}, q.options());
  if (rows == 0) return out;
  const auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_type(q.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    dispatch_lanes(h / (16 / static_cast<int64_t>(sizeof(T))), [&](auto lanes) {
      constexpr int L = decltype(lanes)::value;
      auto launch = [&](auto queries) {  // the step's S slots in groups of NQ queries, a block each
        constexpr int NQ = decltype(queries)::value;
        const int64_t groups = (S + NQ - 1) / NQ, tasks = rows * groups;
        const Grid grid = grid_for<T, L, NQ>(tasks, cap);
        // Scratch kept by the caller (the KV cache), so a captured step reuses the same memory on every replay:
        // sized at once for every kernel width and group count a step may take, since a step that grew it would
        // free the memory the graphs captured before it write to.
        const int64_t max_groups = (kDecodeMaxSlots + 3) / 4;
        if (!scratch.counter.defined() || scratch.counter.numel() < rows * max_groups ||
            scratch.counter.device() != q.device())
          scratch.counter = torch::zeros({rows * max_groups}, q.options().dtype(torch::kInt));
        int64_t need = std::max(partials_for<T, L, 1>(rows, cap, h), partials_for<T, L, 2>(rows, cap, h));
        for (int64_t g = 1; g <= max_groups; ++g) need = std::max(need, partials_for<T, L, 4>(rows * g, cap, h));
        if (!scratch.partials.defined() || scratch.partials.numel() < need || scratch.partials.device() != q.device())
          scratch.partials = torch::empty({need}, q.options().dtype(torch::kFloat));
        Params p{};
        p.q = q.data_ptr();
        p.k_new = k_new.data_ptr();
        p.v_new = v_new.data_ptr();
        p.q_sb = q.stride(0), p.q_sh = q.stride(1), p.q_ss = q.stride(2);
        p.kn_sb = k_new.stride(0), p.kn_sh = k_new.stride(1), p.kn_ss = k_new.stride(2);
        p.vn_sb = v_new.stride(0), p.vn_sh = v_new.stride(1), p.vn_ss = v_new.stride(2);
        p.k_cache = k_buf.data_ptr();
        p.v_cache = v_buf.data_ptr();
        p.slot = slot.data_ptr<int64_t>();
        p.n_new = static_cast<int>(S);
        p.seen = static_cast<int>(std::clamp<int64_t>(seen, 0, S));
        p.wq = norm ? wq.data_ptr<float>() : nullptr;
        p.wk = norm ? wk.data_ptr<float>() : nullptr;
        p.eps = norm ? static_cast<float>(norm->eps) : 0.f;
        p.scale_log2 = static_cast<float>(scale * 1.4426950408889634);  // exp(x) = exp2(x·log2 e)
        p.H = static_cast<int>(H);
        p.cap = static_cast<int>(cap);
        p.steps_per_split = static_cast<int>(grid.per_split);
        p.part = scratch.partials.data_ptr<float>();
        p.counter = scratch.counter.data_ptr<int>();
        p.out = out.data_ptr();
        launch_kernel<decode_attention_kernel<T, L, NQ>>(
            dim3(static_cast<unsigned>(rows), static_cast<unsigned>(grid.splits), static_cast<unsigned>(groups)),
            dim3(32 * Shape<T, L, NQ>::kWarps), stream, decode_pdl(), p);
      };
      // Four queries a block at most: eight would need more than half the registers an SM has per block.
      if (S == 1) {
        launch(std::integral_constant<int, 1>());
      } else if (S == 2) {
        launch(std::integral_constant<int, 2>());
      } else {
        launch(std::integral_constant<int, 4>());
      }
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace aobench::common
