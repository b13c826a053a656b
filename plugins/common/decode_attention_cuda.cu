// Implements: the CUDA kernel of decode_attention (attention.h): one query per (batch, head) row over the
// slots 0..slot of a static KV cache. A block walks its row's slots in steps of kStep keys, with the
// running max m, sum l and Σ p·v of an online softmax in fp32 per lane group; the slots are not masked but
// never read past `slot`. When the rows fill less than one wave of resident blocks the slots are
// split over several blocks per row (flash-decoding) and the last block of a row to finish (an atomic counter per
// row, which that block resets) combines their partials. The block that meets `slot` takes the new key and
// value from k_new / v_new (QK-normalised first when the weights are given) and writes them into the cache:
// no other block reads that slot, so one launch replaces the QK norm, the cache writes, the mask and the
// attention of a decode step.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "plugins/common/cuda_vec.cuh"
#include "plugins/common/decode_attention.h"

namespace aobench::common {
namespace {

using torch::Tensor;

constexpr int kWarps = 4;       // warps per block
constexpr int kMaxSplits = 64;  // blocks per row at most (the combine keeps their m and l in shared memory)

// A key's h elements are spread over L lanes of kV = 16 / sizeof(T) elements (one 16-byte load per lane and
// key); a warp holds G = 32 / L keys side by side and each lane group loads kKeys keys per step.
template <typename T, int L>
struct Shape {
  static constexpr int kV = 16 / sizeof(T), h = L * kV, G = 32 / L;
  static constexpr int kKeys = 4;
  static constexpr int kStep = kWarps * G * kKeys;  // keys per block step: 64 for h = 64 in bf16
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
  int64_t q_sb, q_sh, kn_sb, kn_sh, vn_sb, vn_sh;  // element (b, head, i) at b·s_b + head·s_h + i
  void *k_cache, *v_cache;                         // (rows, cap, h) contiguous
  const int64_t* slot;
  const float *wq, *wk;  // (h) QK-norm weights, or null
  float eps, scale_log2;
  int H, cap, steps_per_split;
  float* part;   // (rows, splits, h + 2): Σ p·v, m (log2 units), l of each split
  int* counter;  // (rows) int32, zero between launches
  void* out;     // (rows, h)
};

// At most 128 registers, so 4 blocks fit an SM: B·H = 384 rows (the small models at batch 32) run in one wave.
template <typename T, int L>
__global__ void __launch_bounds__(32 * kWarps, 4) decode_attention_kernel(const Params p) {
  using S = Shape<T, L>;
  constexpr int kV = S::kV, h = S::h, G = S::G, kKeys = S::kKeys, kStep = S::kStep;
  using P = Pack<T, kV>;
  const int row = blockIdx.x, split = blockIdx.y, n_split_max = gridDim.y;
  T* out = static_cast<T*>(p.out) + static_cast<int64_t>(row) * h;
  const int64_t slot64 = *p.slot;
  if (slot64 < 0 || slot64 >= p.cap) {  // no slot to write: NaN out rather than memory past the cache
    if (split == 0)
      for (int t = threadIdx.x; t < h; t += blockDim.x) out[t] = static_cast<T>(NAN);
    return;
  }
  const int slot = static_cast<int>(slot64), n_steps = slot / kStep + 1;
  const int step0 = split * p.steps_per_split, step1 = min(n_steps, step0 + p.steps_per_split);
  if (step0 >= n_steps) return;
  const int n_split = (n_steps + p.steps_per_split - 1) / p.steps_per_split;  // splits holding slots
  const int b = row / p.H, head = row % p.H;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, grp = lane / L, sub = lane % L;

  // The query and the new key/value (every lane group holds them: the shuffles of the norm stay warp-wide).
  P qp = *reinterpret_cast<const P*>(static_cast<const T*>(p.q) + b * p.q_sb + head * p.q_sh + sub * kV);
  P kn = *reinterpret_cast<const P*>(static_cast<const T*>(p.k_new) + b * p.kn_sb + head * p.kn_sh + sub * kV);
  const P vn = *reinterpret_cast<const P*>(static_cast<const T*>(p.v_new) + b * p.vn_sb + head * p.vn_sh + sub * kV);
  if (p.wq) {
    qp = rms_normed<L>(qp, p.wq + sub * kV, p.eps);
    kn = rms_normed<L>(kn, p.wk + sub * kV, p.eps);
  }
  float qf[kV];
  to_float(qp, qf);
  T* kc = static_cast<T*>(p.k_cache) + static_cast<int64_t>(row) * p.cap * h + sub * kV;
  T* vc = static_cast<T*>(p.v_cache) + static_cast<int64_t>(row) * p.cap * h + sub * kV;

  // A step's keys of this lane group: a warp reads G consecutive keys at a time (G·h contiguous elements).
  // The next step's keys are loaded before the current ones are used, so a block keeps two steps in flight.
  auto load = [&](int st, P(&kp)[kKeys], P(&vp)[kKeys]) {
    const int first = st * kStep + warp * G * kKeys + grp;
#pragma unroll
    for (int i = 0; i < kKeys; ++i) {
      const int j = first + i * G;
      if (j < slot) {
        kp[i] = *reinterpret_cast<const P*>(kc + static_cast<int64_t>(j) * h);
        vp[i] = *reinterpret_cast<const P*>(vc + static_cast<int64_t>(j) * h);
      } else if (j == slot) {
        kp[i] = kn;
        vp[i] = vn;
        *reinterpret_cast<P*>(kc + static_cast<int64_t>(j) * h) = kn;
        *reinterpret_cast<P*>(vc + static_cast<int64_t>(j) * h) = vn;
      }
    }
  };
  float m = -INFINITY, l = 0.f, a[kV] = {};
  auto consume = [&](int st, const P(&kp)[kKeys], const P(&vp)[kKeys]) {
    const int first = st * kStep + warp * G * kKeys + grp;
    float s[kKeys], m_step = -INFINITY;
#pragma unroll
    for (int i = 0; i < kKeys; ++i) {
      float kf[kV], dot = 0.f;
      to_float(kp[i], kf);  // past the slot kp[i] is unloaded: its score is replaced below
#pragma unroll
      for (int e = 0; e < kV; ++e) dot += qf[e] * kf[e];
#pragma unroll
      for (int off = L / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
      s[i] = first + i * G <= slot ? dot * p.scale_log2 : -INFINITY;
      m_step = fmaxf(m_step, s[i]);
    }
    if (m_step == -INFINITY) return;  // all this group's keys of the step lie past the slot
    const float m_new = fmaxf(m, m_step), corr = m == -INFINITY ? 0.f : exp2f(m - m_new);
    l *= corr;
#pragma unroll
    for (int e = 0; e < kV; ++e) a[e] *= corr;
#pragma unroll
    for (int i = 0; i < kKeys; ++i) {
      if (first + i * G > slot) continue;  // vp[i] was never loaded
      const float w = exp2f(s[i] - m_new);
      float vf[kV];
      to_float(vp[i], vf);
      l += w;
#pragma unroll
      for (int e = 0; e < kV; ++e) a[e] += w * vf[e];
    }
    m = m_new;
  };
  P k0[kKeys], v0[kKeys], k1[kKeys], v1[kKeys];
  load(step0, k0, v0);
  for (int st = step0; st < step1; st += 2) {  // two register sets, alternating
    if (st + 1 < step1) load(st + 1, k1, v1);
    consume(st, k0, v0);
    if (st + 1 >= step1) break;
    if (st + 2 < step1) load(st + 2, k0, v0);
    consume(st + 1, k1, v1);
  }
  // The warp's G groups into one partial (every group ends with it), then the block's warps through shared.
#pragma unroll
  for (int off = L; off < 32; off <<= 1) {
    float a2[kV];
#pragma unroll
    for (int e = 0; e < kV; ++e) a2[e] = __shfl_xor_sync(0xffffffffu, a[e], off);
    const float m2 = __shfl_xor_sync(0xffffffffu, m, off), l2 = __shfl_xor_sync(0xffffffffu, l, off);
    merge<kV>(m, l, a, m2, l2, a2);
  }
  __shared__ float sm_a[kWarps][h], sm_m[kMaxSplits], sm_l[kMaxSplits];
  __shared__ bool last;
  if (grp == 0) {
#pragma unroll
    for (int e = 0; e < kV; ++e) sm_a[warp][sub * kV + e] = a[e];
    if (sub == 0) {
      sm_m[warp] = m;
      sm_l[warp] = l;
    }
  }
  __syncthreads();
  float M = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sm_m[w]);  // finite: the split's first slot is ≤ slot
  float wscale[kWarps], lsum = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    wscale[w] = sm_m[w] == -INFINITY ? 0.f : exp2f(sm_m[w] - M);
    lsum += sm_l[w] * wscale[w];
  }
  if (n_split == 1) {  // the whole row in this block
    for (int t = threadIdx.x; t < h; t += blockDim.x) {
      float acc = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) acc += sm_a[w][t] * wscale[w];
      out[t] = static_cast<T>(acc / lsum);
    }
    return;
  }
  float* row_part = p.part + static_cast<int64_t>(row) * n_split_max * (h + 2);
  float* mine = row_part + split * (h + 2);
  for (int t = threadIdx.x; t < h; t += blockDim.x) {
    float acc = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) acc += sm_a[w][t] * wscale[w];
    mine[t] = acc;
  }
  if (threadIdx.x == 0) {
    mine[h] = M;
    mine[h + 1] = lsum;
  }
  __threadfence();  // the partial is visible device-wide before the counter says so
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(p.counter + row, 1) == n_split - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  // The row's last block combines the n_split partials, read past L1 (other SMs wrote them): their m and l
  // in parallel into shared memory (sm_m, sm_l are free again), then each output element over the splits.
  __syncthreads();
  for (int c = threadIdx.x; c < n_split; c += blockDim.x) {
    sm_m[c] = __ldcg(row_part + c * (h + 2) + h);
    sm_l[c] = __ldcg(row_part + c * (h + 2) + h + 1);
  }
  __syncthreads();
  float Mrow = -INFINITY, lrow = 0.f;
  for (int c = 0; c < n_split; ++c) Mrow = fmaxf(Mrow, sm_m[c]);
  for (int c = 0; c < n_split; ++c) lrow += sm_l[c] * exp2f(sm_m[c] - Mrow);
  for (int t = threadIdx.x; t < h; t += blockDim.x) {
    float acc = 0.f;
#pragma unroll 8
    for (int c = 0; c < n_split; ++c) acc += __ldcg(row_part + c * (h + 2) + t) * exp2f(sm_m[c] - Mrow);
    out[t] = static_cast<T>(acc / lrow);
  }
  if (threadIdx.x == 0) p.counter[row] = 0;  // ready for the next launch (graph replays included)
}

bool aligned16(const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0; }

}  // namespace

bool decode_attention_cuda_supports(const Tensor& q, const Tensor& k_new, const Tensor& v_new, const Tensor& k_buf,
                                    const Tensor& v_buf) {
  const auto dt = q.scalar_type();
  if (!(dt == torch::kFloat || dt == torch::kBFloat16 || dt == torch::kHalf)) return false;
  const int64_t h = q.size(3), kv = 16 / q.element_size(), lanes = h % kv == 0 ? h / kv : 0;
  if (!(lanes == 4 || lanes == 8 || lanes == 16 || lanes == 32) || h < 32) return false;  // h ∈ {32, …, 256}
  for (const Tensor* t : {&q, &k_new, &v_new, &k_buf, &v_buf})
    if (!t->is_cuda() || t->device() != q.device() || t->scalar_type() != dt || t->dim() != 4 || t->size(3) != h ||
        t->stride(3) != 1 || !aligned16(*t) || t->size(0) != q.size(0) || t->size(1) != q.size(1))
      return false;
  for (const Tensor* t : {&q, &k_new, &v_new})  // head and batch strides keep every row 16-byte aligned
    if (t->size(2) != 1 || t->stride(0) % kv != 0 || t->stride(1) % kv != 0) return false;
  return k_buf.is_contiguous() && v_buf.is_contiguous() && k_buf.sizes() == v_buf.sizes() &&
         k_buf.size(2) < (int64_t{1} << 30) && q.size(0) * q.size(1) < (int64_t{1} << 31);
}

Tensor decode_attention_cuda(const Tensor& q, const Tensor& k_new, const Tensor& v_new, Tensor& k_buf, Tensor& v_buf,
                             const Tensor& slot, double scale, DecodeScratch& scratch, const QkNorm* norm) {
  const c10::cuda::CUDAGuard guard(q.device());
  TORCH_CHECK(slot.is_cuda() && slot.scalar_type() == torch::kLong && slot.numel() == 1 && slot.device() == q.device(),
              "decode_attention: slot must be one int64 on the query's device");
  const int64_t B = q.size(0), H = q.size(1), h = q.size(3), rows = B * H, cap = k_buf.size(2);
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
  Tensor out = torch::empty({B, H, 1, h}, q.options());
  if (rows == 0) return out;
  const auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_type(q.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    dispatch_lanes(h / (16 / static_cast<int64_t>(sizeof(T))), [&](auto lanes) {
      constexpr int L = decltype(lanes)::value, kStep = Shape<T, L>::kStep;
      // As many blocks as fit the GPU at once (one wave): one per row when the rows fill it, else the slots of a
      // row are split over several (flash-decoding).
      const int64_t steps = (cap + kStep - 1) / kStep;
      // Blocks of this instantiation resident per SM: a property of the compiled kernel, read once.
      static const int per_sm = [] {
        int n = 0;
        C10_CUDA_CHECK(
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_attention_kernel<T, L>, 32 * kWarps, 0));
        return std::max(1, n);
      }();
      const int64_t resident =
          per_sm * static_cast<int64_t>(at::cuda::getCurrentDeviceProperties()->multiProcessorCount);
      const int64_t want = std::clamp<int64_t>(resident / rows, 1, std::min<int64_t>(steps, kMaxSplits));
      const int64_t per_split = (steps + want - 1) / want, splits = (steps + per_split - 1) / per_split;
      // Scratch kept by the caller (the KV cache), so a captured step reuses the same memory on every replay.
      if (!scratch.counter.defined() || scratch.counter.numel() < rows || scratch.counter.device() != q.device())
        scratch.counter = torch::zeros({rows}, q.options().dtype(torch::kInt));
      const int64_t need = splits > 1 ? rows * splits * (h + 2) : 1;
      if (!scratch.partials.defined() || scratch.partials.numel() < need || scratch.partials.device() != q.device())
        scratch.partials = torch::empty({need}, q.options().dtype(torch::kFloat));
      Params p{};
      p.q = q.data_ptr();
      p.k_new = k_new.data_ptr();
      p.v_new = v_new.data_ptr();
      p.q_sb = q.stride(0), p.q_sh = q.stride(1);
      p.kn_sb = k_new.stride(0), p.kn_sh = k_new.stride(1);
      p.vn_sb = v_new.stride(0), p.vn_sh = v_new.stride(1);
      p.k_cache = k_buf.data_ptr();
      p.v_cache = v_buf.data_ptr();
      p.slot = slot.data_ptr<int64_t>();
      p.wq = norm ? wq.data_ptr<float>() : nullptr;
      p.wk = norm ? wk.data_ptr<float>() : nullptr;
      p.eps = norm ? static_cast<float>(norm->eps) : 0.f;
      p.scale_log2 = static_cast<float>(scale * 1.4426950408889634);  // exp(x) = exp2(x·log2 e)
      p.H = static_cast<int>(H);
      p.cap = static_cast<int>(cap);
      p.steps_per_split = static_cast<int>(per_split);
      p.part = scratch.partials.data_ptr<float>();
      p.counter = scratch.counter.data_ptr<int>();
      p.out = out.data_ptr();
      decode_attention_kernel<T, L>
          <<<dim3(static_cast<unsigned>(rows), static_cast<unsigned>(splits)), 32 * kWarps, 0, stream>>>(p);
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace aobench::common
