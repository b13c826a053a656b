// Implements: the CUDA kernels of common::fused_draw (sampling.h): temperature, HF top-p and float64
// Gumbel-max on the GPU. Per row of logits (N, V), u_v float64 uniforms in [0, 1) from the generator's Philox
// stream (or a given noise tensor for the test against the LibTorch reference):
//   1. m = max l, then Z = Σ exp((l − m)/T) in float64; logp = (l − m)/T − log Z;
//   2. v₁ = argmax over all v of logp_v − log(−log u_v): the draw without top-p (with top-p, every score is
//      stored: (N, V) float64);
//   3. top-p < 1: v₁ is the answer when it is in the nucleus, i.e. when the mass of the tokens before it in
//      the stable descending order (larger logit, or equal and lower index) is below top_p — true with
//      probability ≥ top_p, as v₁ follows softmax(l/T). Otherwise the nucleus lies among those tokens, and
//      v₂ = their best stored score is the next candidate (one pass checks v_r and finds v_{r+1}), for
//      `rounds` rounds (kDrawRounds, sampling.h);
//   4. a row still undecided (probability ≈ (1 − top_p)^rounds) takes the exact nucleus: a 4 × 8-bit radix
//      select on an order-preserving key of the float logit finds the token that crosses top_p, ties with it
//      kept lowest index first, and the argmax over the kept tokens.
// The argmax over a set containing the nucleus equals the argmax over the nucleus whenever it lies in the
// nucleus, so steps 2–4 give the same id as step 4 alone. Masses are summed in 2⁻⁶⁰ fixed point (exact, so
// the nucleus does not depend on the order of the atomics).
// Two launch forms of the same phases (the device functions below): with many rows, ONE kernel and one
// 1024-thread block per row (the row stays in L2 between the passes: 50257 bf16 logits = 100 KB); with fewer
// rows than SMs (a decode step: 32 rows), each row is split into S chunks of whole 1024-logit sweeps, one
// block each, and the phases become kernels whose blocks meet in global memory — integer atomics, and the
// last block of a row (a ticket counter) combining the row's partials — so all SMs work; a phase kernel
// returns at once for the rows already decided. Both forms give token v the same uniform (Philox
// subsequence row·1024 + v mod 1024, pair ⌊v / 2048⌋) and the same nucleus; Z is summed per chunk, so it may
// differ between S in its last bits.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGuard.h>
#include <curand_kernel.h>
#include <torch/types.h>
#include <ATen/cuda/PhiloxUtils.cuh>
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "plugins/common/sampling.h"

namespace aobench::common {
namespace {

constexpr int kThreads = 1024;  // one sweep: kThreads consecutive logits, one per thread
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 256;
constexpr int kMaxSplit = 16;
constexpr double kFixed = 1152921504606846976.0;  // 2^60: masses in [0, 1] as integers
constexpr int64_t kNone = INT64_MAX;              // no token: every score −inf (or NaN)

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

// (score, id) of the larger score, the lower id among equal scores (torch's argmax returns the first maximum).
__device__ __forceinline__ void keep_best(double d, int64_t i, double& best_d, int64_t& best_i) {
  if (d > best_d || (d == best_d && i < best_i)) {
    best_d = d;
    best_i = i;
  }
}

// The block's best (score, id), valid in thread 0.
__device__ void block_argmax(double& best_d, int64_t& best_i) {
  __shared__ double s_best_d[kWarps];
  __shared__ int64_t s_best_i[kWarps];
  for (int off = 16; off > 0; off >>= 1)
    keep_best(__shfl_xor_sync(0xffffffffu, best_d, off), __shfl_xor_sync(0xffffffffu, best_i, off), best_d, best_i);
  __syncthreads();  // the arrays may still be read by the previous call
  if (threadIdx.x % 32 == 0) {
    s_best_d[threadIdx.x / 32] = best_d;
    s_best_i[threadIdx.x / 32] = best_i;
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < kWarps; ++w) keep_best(s_best_d[w], s_best_i[w], best_d, best_i);
}

// The sweeps [s0, s1) of one row that a block covers: logit v = s · kThreads + threadIdx.x.
struct Chunk {
  int64_t s0, s1;
};

// The radix select's state of one row, carried from pass to pass.
struct Nucleus {
  uint32_t prefix, mask;     // every key whose masked bits exceed `prefix` is kept
  unsigned long long above;  // their mass (2⁻⁶⁰ units); after the last pass: how many ties to keep
  int keep_all;              // the rounded total mass stays below top_p: every token is kept
};

// A row's candidate (steps 2–3): token v with order key `key`; `mass` gathers the mass before it.
struct Candidate {
  unsigned long long mass;
  int64_t v;
  uint32_t key;
  int decided;  // the row's id is written
};

// Token (key, v) comes before candidate c in the stable descending order.
__device__ __forceinline__ bool before(uint32_t key, int64_t v, const Candidate& c) {
  return key > c.key || (key == c.key && v < c.v);
}

// Row-wide temperature-scaled log-softmax in float64 (inv_t = 1 / temperature: a multiply, not a division,
// per token).
struct LogSoftmax {
  float m;
  double inv_t, log_z;
  __device__ double operator()(float l) const { return (static_cast<double>(l) - m) * inv_t - log_z; }
  // Token mass in 2⁻⁶⁰ units: the same expression in every pass that sums masses.
  __device__ unsigned long long mass(float l) const {
    return static_cast<unsigned long long>(llrint(exp((*this)(l)) * kFixed));
  }
  // The Gumbel score logp(l) − log(−log u) in float64; u = 0: −log(inf) = −inf, never chosen.
  __device__ double score(float l, double u) const { return (*this)(l)-log(-log(u)); }
};

// The uniforms: a noise tensor (N, V) of the test against the LibTorch reference, or the generator's Philox
// stream (token v of row n: pair ⌊s / 2⌋ of subsequence n·kThreads + (v mod kThreads), sweep s = ⌊v / kThreads⌋,
// x for even sweeps, y for odd ones).
struct Uniforms {
  at::PhiloxCudaState philox;
  const double* noise;
};

// The chunk's max and Σ exp((l − max)/T), block-reduced in a fixed order: every thread gets them. Two passes
// (the max, then the sum) take fewer instructions than one online pass, which rescales at each new max. An all
// −inf chunk gives (−inf, 0).
template <typename T>
__device__ void chunk_softmax(const T* row, int64_t V, Chunk c, double inv_t, float& m_out, double& z_out) {
  __shared__ float red_f[kWarps];
  __shared__ double red_d[kWarps];
  float m = -INFINITY;
  for (int64_t s = c.s0; s < c.s1; ++s) {
    const int64_t v = s * kThreads + threadIdx.x;
    if (v < V) m = fmaxf(m, static_cast<float>(row[v]));
  }
  m = block_reduce(m, red_f, [](float a, float b) { return fmaxf(a, b); });
  double z = 0.0;
  for (int64_t s = c.s0; m != -INFINITY && s < c.s1; ++s) {
    const int64_t v = s * kThreads + threadIdx.x;
    if (v < V) z += exp((static_cast<double>(row[v]) - m) * inv_t);
  }
  z_out = block_reduce(z, red_d, [](double a, double b) { return a + b; });
  m_out = m;
}

// Histogram (mass, count) over the byte at `shift` of the keys that match the state's prefix, for the chunk's
// logits, into shared `hist` / `hist_n` (zeroed here). Ends synchronised.
template <typename T>
__device__ void chunk_histogram(const T* row, int64_t V, Chunk c, int shift, const Nucleus& st, const LogSoftmax& logp,
                                unsigned long long* hist, unsigned* hist_n) {
  for (int b = threadIdx.x; b < kBins; b += kThreads) {
    hist[b] = 0;
    hist_n[b] = 0;
  }
  __syncthreads();
  for (int64_t s = c.s0; s < c.s1; ++s) {  // same trip count in every thread: full warps
    const int64_t v = s * kThreads + threadIdx.x;
    int b = -1;  // this token's bin, −1 when it is out of range or outside the prefix
    unsigned long long mass = 0;
    if (v < V) {
      const float l = static_cast<float>(row[v]);
      const uint32_t key = order_key(l);
      if ((key & st.mask) == st.prefix) {
        b = (key >> shift) & 255;
        mass = logp.mass(l);
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
}

// One thread: picks the bin of the row's histogram (at `shift`) where the descending mass crosses `target`
// and narrows the state to it; after the last byte, `above` becomes the number of tied tokens to keep.
__device__ void select_bin(const unsigned long long* hist, const unsigned* hist_n, int shift, unsigned long long target,
                           Nucleus& st) {
  unsigned long long above = st.above;
  int pick = -1, lowest = -1;
  for (int b = kBins - 1; b >= 0; --b) {
    if (hist_n[b] == 0) continue;
    lowest = b;
    if (above + hist[b] >= target) {
      pick = b;
      break;
    }
    above += hist[b];
  }
  if (pick < 0) {  // the rounded total mass stays below top_p: every token is kept
    st.keep_all = 1;
    pick = lowest;
    above -= hist[lowest];
  }
  st.prefix |= static_cast<uint32_t>(pick) << shift;
  st.mask |= 255u << shift;
  st.above = above;
  if (shift == 0) {
    // Ties: the j-th (by index) has mass_before = above + j·p*, kept while that is < top_p.
    const unsigned long long p_star = hist[pick] / hist_n[pick];
    const unsigned long long ties = p_star == 0 ? ~0ull : (target - above + p_star - 1) / p_star;
    st.above = ties > 0 ? ties : 1;  // the first tie is the crossing token itself
  }
}

// Gumbel-max over the chunk's kept tokens (all valid ones when !nucleus), the block's best (score, id)
// returned in thread 0. Every thread takes one uniform per sweep, kept or not; `ties_before` = tied tokens
// in the row's earlier chunks. `scores` (the row's V, or null) receives every kept token's score.
template <typename T>
__device__ void chunk_gumbel(const T* row, int64_t V, Chunk c, int64_t n, const LogSoftmax& logp, const Nucleus& st,
                             bool nucleus, unsigned long long ties_before, const Uniforms& uniforms, double* scores,
                             double& out_d, int64_t& out_i) {
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  const bool keep_all = !nucleus || st.keep_all;
  const uint32_t crossing = st.prefix;
  const unsigned long long tie_keep = nucleus ? st.above : ~0ull;
  curandStatePhilox4_32_10_t state;
  if (!uniforms.noise) {
    const auto seeds = at::cuda::philox::unpack(uniforms.philox);
    // Pair k of a thread's subsequence sits 4k 32-bit values in: the chunk starts at pair ⌊s0 / 2⌋.
    curand_init(std::get<0>(seeds), static_cast<uint64_t>(n) * kThreads + threadIdx.x,
                std::get<1>(seeds) + 4 * static_cast<uint64_t>(c.s0 / 2), &state);
  }
  double2 pair{};
  int64_t best_i = kNone;
  double best_d = -INFINITY;
  for (int64_t s = c.s0; s < c.s1; ++s) {
    const int64_t v = s * kThreads + threadIdx.x;
    const bool valid = v < V;
    const float l = valid ? static_cast<float>(row[v]) : 0.f;
    const uint32_t key = order_key(l);
    const int tie = valid && !keep_all && key == crossing ? 1 : 0;
    int rank = 0, n_ties = 0;
    // Ties of the crossing logit are rare: the block-wide scan runs only in sweeps that hold one.
    if (!keep_all && __syncthreads_or(tie)) {
      Scan(scan_tmp).ExclusiveSum(tie, rank, n_ties);
      __syncthreads();  // scan_tmp is reused by the next sweep
    }
    double u;
    if (uniforms.noise) {
      u = valid ? uniforms.noise[n * V + v] : 0.5;
    } else {
      if (s % 2 == 0 || s == c.s0) pair = curand_uniform2_double(&state);
      u = s % 2 == 0 ? pair.x : pair.y;
      if (u == 1.0) u = 0.0;  // curand gives (0, 1]; torch's uniform_ maps 1 to 0: [0, 1)
    }
    const bool kept = valid && (keep_all || key > crossing || (tie && ties_before + rank < tie_keep));
    ties_before += n_ties;
    if (kept) {
      const double score = logp.score(l, u);
      if (scores) scores[v] = score;
      keep_best(score, v, best_d, best_i);
    }
  }
  block_argmax(best_d, best_i);
  if (threadIdx.x == 0) {
    out_d = best_d;
    out_i = best_i;
  }
}

// One round of step 3 over the chunk: the mass of the tokens before candidate c, and the Gumbel-max over
// them (the next candidate) from the scores step 2 stored, both valid in thread 0.
template <typename T>
__device__ void chunk_round(const T* row, int64_t V, Chunk c, const LogSoftmax& logp, const Candidate& cand,
                            const double* scores, unsigned long long& out_mass, double& out_d, int64_t& out_i) {
  __shared__ unsigned long long red_u[kWarps];
  unsigned long long mass = 0;
  int64_t best_i = kNone;
  double best_d = -INFINITY;
  for (int64_t s = c.s0; s < c.s1; ++s) {
    const int64_t v = s * kThreads + threadIdx.x;
    if (v >= V) break;
    const float l = static_cast<float>(row[v]);
    if (!before(order_key(l), v, cand)) continue;
    mass += logp.mass(l);
    keep_best(scores[v], v, best_d, best_i);
  }
  mass = block_reduce(mass, red_u, [](unsigned long long a, unsigned long long b) { return a + b; });
  block_argmax(best_d, best_i);
  if (threadIdx.x == 0) {
    out_mass = mass;
    out_d = best_d;
    out_i = best_i;
  }
}

// The id of a row's best token: index 0 when every score is −inf (or NaN), like argmax.
__device__ __forceinline__ int64_t id_of(int64_t best_i) { return best_i == kNone ? 0 : best_i; }

// Thread 0, after step 2: the row's first candidate, best_i; without top-p, or with no token, the row is
// decided and its id written.
template <typename T>
__device__ Candidate first_candidate(int64_t best_i, bool nucleus, const T* row, int64_t* out) {
  if (!nucleus || best_i == kNone) {
    *out = id_of(best_i);
    return Candidate{0, best_i, 0, 1};
  }
  return Candidate{0, best_i, order_key(static_cast<float>(row[best_i])), 0};
}

// Thread 0: the decision on candidate c once the mass before it is known (step 3): its id when it is in the
// nucleus, else the next candidate (next_i); a row with no next candidate has only −inf scores left: id 0.
template <typename T>
__device__ void decide(Candidate& cand, unsigned long long mass, int64_t next_i, unsigned long long target,
                       const T* row, int64_t* out) {
  if (mass < target || next_i == kNone) {
    *out = mass < target ? cand.v : 0;
    cand.decided = 1;
    return;
  }
  cand.v = next_i;
  cand.key = order_key(static_cast<float>(row[next_i]));
}

// ---- One block per row: every phase in one kernel. ----

template <typename T>
__global__ void __launch_bounds__(kThreads)
    fused_draw_kernel(const T* __restrict__ logits, int64_t row_stride, int64_t V, double inv_t, bool nucleus,
                      unsigned long long target, int rounds, Uniforms uniforms, double* __restrict__ scores,
                      int64_t* __restrict__ out) {
  const int64_t n = blockIdx.x;
  const T* row = logits + n * row_stride;
  const Chunk all{0, (V + kThreads - 1) / kThreads};
  __shared__ unsigned long long hist[kBins];
  __shared__ unsigned hist_n[kBins];
  __shared__ Nucleus st;
  __shared__ Candidate cand;
  __shared__ unsigned long long s_mass;
  __shared__ double s_d;
  __shared__ int64_t s_i;

  float m;
  double z;
  chunk_softmax(row, V, all, inv_t, m, z);
  const LogSoftmax logp{m, inv_t, log(z)};
  double* row_scores = scores ? scores + n * V : nullptr;
  if (threadIdx.x == 0) st = Nucleus{0, 0, 0, 0};  // read by step 4 only, after many barriers
  chunk_gumbel(row, V, all, n, logp, Nucleus{0, 0, 0, 0}, false, 0, uniforms, row_scores, s_d, s_i);
  if (threadIdx.x == 0) cand = first_candidate(s_i, nucleus, row, &out[n]);
  __syncthreads();
  for (int r = 0; r < rounds && !cand.decided; ++r) {
    const Candidate c = cand;
    chunk_round(row, V, all, logp, c, row_scores, s_mass, s_d, s_i);
    if (threadIdx.x == 0) decide(cand, s_mass, s_i, target, row, &out[n]);
    __syncthreads();
  }
  if (cand.decided) return;
  for (int shift = 24; shift >= 0; shift -= 8) {
    chunk_histogram(row, V, all, shift, st, logp, hist, hist_n);
    if (threadIdx.x == 0) select_bin(hist, hist_n, shift, target, st);
    __syncthreads();
  }
  chunk_gumbel(row, V, all, n, logp, st, true, 0, uniforms, nullptr, s_d, s_i);
  if (threadIdx.x == 0) out[n] = id_of(s_i);
}

// ---- A row split over S blocks: one kernel per phase, block b = row · S + chunk. ----

// Global scratch of the split form; hist, hist_n, state, candidates and tickets start zeroed.
struct Split {
  int S;
  int64_t sweeps_per_chunk;
  float* part_max;           // (N, S)
  double* part_z;            // (N, S)
  double* part_best_d;       // (N, S)
  int64_t* part_best_i;      // (N, S)
  unsigned long long* hist;  // (N, 256) the row's histogram of the current pass
  unsigned* hist_n;          // (N, 256)
  unsigned* chunk_n;         // (N, S, 256) each chunk's counts of the last pass: ties before a chunk
  Nucleus* state;            // (N)
  Candidate* cand;           // (N)
  unsigned* tickets;         // (N) blocks of the row done with the current phase
  // The resident form only (null in the split form):
  unsigned* arrivals;             // (N) the row's blocks' arrivals at its barriers so far
  unsigned long long* part_mass;  // (2, N, S) each round's mass before the candidate, by phase parity
};

__device__ Chunk chunk_of(const Split& sp, int64_t V) {
  const int64_t c = blockIdx.x % sp.S, sweeps = (V + kThreads - 1) / kThreads;
  return {std::min(sweeps, c * sp.sweeps_per_chunk), std::min(sweeps, (c + 1) * sp.sweeps_per_chunk)};
}

// m and log Z of row n from its chunks' partials, combined in chunk order (the same in every block).
__device__ LogSoftmax row_log_softmax(const Split& sp, int64_t n, double inv_t) {
  // Read past L1: in the resident form the partials were written by other blocks of the same kernel.
  float m = -INFINITY;
  for (int c = 0; c < sp.S; ++c) m = fmaxf(m, __ldcg(&sp.part_max[n * sp.S + c]));
  double z = 0.0;
  for (int c = 0; c < sp.S; ++c) {
    const float mc = __ldcg(&sp.part_max[n * sp.S + c]);
    if (mc != -INFINITY) z += __ldcg(&sp.part_z[n * sp.S + c]) * exp((static_cast<double>(mc) - m) * inv_t);
  }
  return {m, inv_t, log(z)};
}

// True in every thread of the block that finishes a phase of its row last; the others' global writes are
// visible to it. That block resets the ticket for the next phase.
__device__ bool last_of_row(const Split& sp, int64_t n) {
  __shared__ bool s_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) s_last = atomicAdd(&sp.tickets[n], 1u) == static_cast<unsigned>(sp.S - 1);
  __syncthreads();
  if (s_last) {
    __threadfence();
    if (threadIdx.x == 0) sp.tickets[n] = 0;
  }
  return s_last;
}

// Thread 0 of the row's last block: the best of the row's partials, from best_d / best_i on.
__device__ void row_argmax(const Split& sp, int64_t n, double& best_d, int64_t& best_i) {
  for (int e = 0; e < sp.S; ++e)
    keep_best(__ldcg(&sp.part_best_d[n * sp.S + e]), __ldcg(&sp.part_best_i[n * sp.S + e]), best_d, best_i);
}

// Step 1 per chunk.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    split_softmax_kernel(const T* __restrict__ logits, int64_t row_stride, int64_t V, double inv_t, Split sp) {
  const int64_t n = blockIdx.x / sp.S;
  float m;
  double z;
  chunk_softmax(logits + n * row_stride, V, chunk_of(sp, V), inv_t, m, z);
  if (threadIdx.x == 0) {
    sp.part_max[blockIdx.x] = m;
    sp.part_z[blockIdx.x] = z;
  }
}

// Step 2 per chunk; the row's last block takes the first candidate (or, without top-p, the id).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    split_first_kernel(const T* __restrict__ logits, int64_t row_stride, int64_t V, double inv_t, bool nucleus,
                       Uniforms uniforms, double* __restrict__ scores, Split sp, int64_t* __restrict__ out) {
  const int64_t n = blockIdx.x / sp.S;
  const T* row = logits + n * row_stride;
  double best_d;
  int64_t best_i;
  chunk_gumbel(row, V, chunk_of(sp, V), n, row_log_softmax(sp, n, inv_t), Nucleus{0, 0, 0, 0}, false, 0, uniforms,
               scores ? scores + n * V : nullptr, best_d, best_i);
  if (threadIdx.x == 0) {
    sp.part_best_d[blockIdx.x] = best_d;
    sp.part_best_i[blockIdx.x] = best_i;
  }
  if (!last_of_row(sp, n) || threadIdx.x != 0) return;
  row_argmax(sp, n, best_d, best_i);
  sp.cand[n] = first_candidate(best_i, nucleus, row, &out[n]);
}

// One round of step 3 per chunk: the mass before the candidate and the next candidate; the row's last block
// decides.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    split_round_kernel(const T* __restrict__ logits, int64_t row_stride, int64_t V, double inv_t,
                       unsigned long long target, const double* __restrict__ scores, Split sp,
                       int64_t* __restrict__ out) {
  const int64_t n = blockIdx.x / sp.S;
  const Candidate c = sp.cand[n];
  if (c.decided) return;
  const T* row = logits + n * row_stride;
  unsigned long long mass;
  double best_d;
  int64_t best_i;
  chunk_round(row, V, chunk_of(sp, V), row_log_softmax(sp, n, inv_t), c, scores + n * V, mass, best_d, best_i);
  if (threadIdx.x == 0) {
    atomicAdd(&sp.cand[n].mass, mass);
    sp.part_best_d[blockIdx.x] = best_d;
    sp.part_best_i[blockIdx.x] = best_i;
  }
  if (!last_of_row(sp, n) || threadIdx.x != 0) return;
  row_argmax(sp, n, best_d, best_i);
  Candidate next = c;
  decide(next, __ldcg(&sp.cand[n].mass), best_i, target, row, &out[n]);
  next.mass = 0;
  sp.cand[n] = next;
}

// One radix pass of step 4: the chunks' histograms are added into the row's (integers: order-free), and the
// row's last block selects the bin and clears the histogram for the next pass.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    split_radix_kernel(const T* __restrict__ logits, int64_t row_stride, int64_t V, double inv_t,
                       unsigned long long target, int shift, Split sp) {
  __shared__ unsigned long long hist[kBins];
  __shared__ unsigned hist_n[kBins];
  const int64_t n = blockIdx.x / sp.S;
  if (sp.cand[n].decided) return;
  const Nucleus st = sp.state[n];
  chunk_histogram(logits + n * row_stride, V, chunk_of(sp, V), shift, st, row_log_softmax(sp, n, inv_t), hist, hist_n);
  for (int b = threadIdx.x; b < kBins; b += kThreads) {
    if (hist_n[b] != 0) {
      atomicAdd(&sp.hist[n * kBins + b], hist[b]);
      atomicAdd(&sp.hist_n[n * kBins + b], hist_n[b]);
    }
    if (shift == 0) sp.chunk_n[static_cast<int64_t>(blockIdx.x) * kBins + b] = hist_n[b];
  }
  if (!last_of_row(sp, n)) return;
  for (int b = threadIdx.x; b < kBins; b += kThreads) {  // the row's totals, read past L1
    hist[b] = __ldcg(&sp.hist[n * kBins + b]);
    hist_n[b] = __ldcg(&sp.hist_n[n * kBins + b]);
    sp.hist[n * kBins + b] = 0;
    sp.hist_n[n * kBins + b] = 0;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    Nucleus next = st;
    select_bin(hist, hist_n, shift, target, next);
    sp.state[n] = next;
  }
}

// Step 4's Gumbel-max over the kept tokens per chunk; the row's last block writes the id.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    split_kept_kernel(const T* __restrict__ logits, int64_t row_stride, int64_t V, double inv_t, Uniforms uniforms,
                      Split sp, int64_t* __restrict__ out) {
  const int64_t n = blockIdx.x / sp.S;
  if (sp.cand[n].decided) return;
  const int c = blockIdx.x % sp.S;
  const Nucleus st = sp.state[n];
  unsigned long long ties_before = 0;  // tokens with the crossing key in the earlier chunks
  if (!st.keep_all)
    for (int e = 0; e < c; ++e) ties_before += sp.chunk_n[(n * sp.S + e) * kBins + (st.prefix & 255)];
  double best_d;
  int64_t best_i;
  chunk_gumbel(logits + n * row_stride, V, chunk_of(sp, V), n, row_log_softmax(sp, n, inv_t), st, true, ties_before,
               uniforms, nullptr, best_d, best_i);
  if (threadIdx.x == 0) {
    sp.part_best_d[blockIdx.x] = best_d;
    sp.part_best_i[blockIdx.x] = best_i;
  }
  if (!last_of_row(sp, n) || threadIdx.x != 0) return;
  row_argmax(sp, n, best_d, best_i);
  out[n] = id_of(best_i);
}

// ---- A row split over S blocks that are all on the GPU at once: every phase in one cooperative kernel. ----
// The split kernels' phases and expressions, so the same ids bit for bit, but each block keeps its chunk (its
// logits and then its Gumbel scores, ≤ kResidentSweeps sweeps) in shared memory from phase to phase, and the
// row's blocks meet at per-row barriers in global memory instead of at kernel boundaries: a decode step's draw
// is one launch instead of ten, with no (N, V) score buffer.

constexpr int kResidentSweeps = 16;  // 16 × 1024 × (8 + 4) bytes = 192 KiB of shared memory a block at most

// Shared memory a block of the resident form needs for chunks of `sweeps` sweeps.
constexpr size_t resident_smem(int64_t sweeps) { return static_cast<size_t>(sweeps) * kThreads * (8 + 4); }

// Every block of a row arrives, then waits until the row's `target` arrivals are in (the cooperative launch keeps
// all blocks resident, so the wait ends). Global writes before it are visible to the row's blocks after it when
// read past L1 (__ldcg): L1 is not coherent between SMs.
__device__ void row_barrier(unsigned* arrivals, unsigned target) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicAdd(arrivals, 1u);
    unsigned seen;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(arrivals) : "memory");
    } while (seen < target);
  }
  __syncthreads();
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    resident_draw_kernel(const T* __restrict__ logits, int64_t row_stride, int64_t V, double inv_t, bool nucleus,
                         unsigned long long target, int rounds, Uniforms uniforms, Split sp,
                         int64_t* __restrict__ out) {
  using Scan = cub::BlockScan<int, kThreads>;
  extern __shared__ double held[];  // (sweeps, kThreads) log(−log u), then the scores; then (sweeps, kThreads) logits
  __shared__ float red_f[kWarps];
  __shared__ double red_d[kWarps];
  __shared__ unsigned long long red_u[kWarps];
  __shared__ unsigned long long hist[kBins];
  __shared__ unsigned hist_n[kBins];
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ Candidate cand;
  __shared__ Nucleus st;
  const int64_t n = blockIdx.x / sp.S, NS = static_cast<int64_t>(gridDim.x);
  const int c = blockIdx.x % sp.S, t = threadIdx.x;
  const T* row = logits + n * row_stride;
  const Chunk ch = chunk_of(sp, V);
  const int sweeps = static_cast<int>(ch.s1 - ch.s0);
  double* score = held;
  float* logit = reinterpret_cast<float*>(held + sp.sweeps_per_chunk * kThreads);
  auto v_of = [&](int i) { return (ch.s0 + i) * kThreads + t; };  // the logit of sweep i of the chunk
  unsigned arrived = 0;
  auto barrier = [&] { row_barrier(&sp.arrivals[n], arrived += sp.S); };
  int parity = 0;  // the partials of consecutive phases alternate, so a block ahead never overwrites unread ones
  auto row_best = [&](double& best_d, int64_t& best_i) {  // thread 0 after a barrier: the best of the chunks
    best_d = -INFINITY;
    best_i = kNone;
    for (int e = 0; e < sp.S; ++e) {
      const int64_t j = parity * NS + n * sp.S + e;
      keep_best(__ldcg(&sp.part_best_d[j]), __ldcg(&sp.part_best_i[j]), best_d, best_i);
    }
  };
  auto post_best = [&](double best_d, int64_t best_i) {  // thread 0: the chunk's best of this phase
    sp.part_best_d[parity * NS + blockIdx.x] = best_d;
    sp.part_best_i[parity * NS + blockIdx.x] = best_i;
  };

  // The chunk's logits and their uniforms' log(−log u) (chunk_gumbel's stream), loaded once.
  curandStatePhilox4_32_10_t state;
  if (!uniforms.noise) {
    const auto seeds = at::cuda::philox::unpack(uniforms.philox);
    curand_init(std::get<0>(seeds), static_cast<uint64_t>(n) * kThreads + t,
                std::get<1>(seeds) + 4 * static_cast<uint64_t>(ch.s0 / 2), &state);
  }
#pragma unroll 4
  for (int i = 0; i < sweeps; ++i) {  // loads only: several in flight
    const int64_t v = v_of(i);
    logit[i * kThreads + t] = v < V ? static_cast<float>(row[v]) : -INFINITY;
  }
  double2 pair{};
  for (int i = 0; i < sweeps; ++i) {
    const int64_t s = ch.s0 + i, v = v_of(i);
    const bool valid = v < V;
    double u;
    if (uniforms.noise) {
      u = valid ? uniforms.noise[n * V + v] : 0.5;
    } else {
      if (s % 2 == 0 || s == ch.s0) pair = curand_uniform2_double(&state);
      u = s % 2 == 0 ? pair.x : pair.y;
      if (u == 1.0) u = 0.0;
    }
    score[i * kThreads + t] = log(-log(u));
  }

  // Step 1 (chunk_softmax): the chunk's max and Σ exp((l − max)/T); the row's from its chunks.
  float m = -INFINITY;
  for (int i = 0; i < sweeps; ++i)
    if (v_of(i) < V) m = fmaxf(m, logit[i * kThreads + t]);
  m = block_reduce(m, red_f, [](float a, float b) { return fmaxf(a, b); });
  double z = 0.0;
  for (int i = 0; m != -INFINITY && i < sweeps; ++i)
    if (v_of(i) < V) z += exp((static_cast<double>(logit[i * kThreads + t]) - m) * inv_t);
  z = block_reduce(z, red_d, [](double a, double b) { return a + b; });
  if (t == 0) {
    sp.part_max[blockIdx.x] = m;
    sp.part_z[blockIdx.x] = z;
  }
  barrier();
  const LogSoftmax logp = row_log_softmax(sp, n, inv_t);

  // Step 2: every token's Gumbel score (held from here on) and the first candidate.
  double best_d = -INFINITY;
  int64_t best_i = kNone;
  for (int i = 0; i < sweeps; ++i) {
    const int64_t v = v_of(i);
    if (v >= V) break;
    const double d = logp(logit[i * kThreads + t]) - score[i * kThreads + t];  // LogSoftmax::score
    score[i * kThreads + t] = d;
    keep_best(d, v, best_d, best_i);
  }
  block_argmax(best_d, best_i);
  if (t == 0) post_best(best_d, best_i);
  barrier();
  if (t == 0) {
    row_best(best_d, best_i);
    int64_t id = 0;
    cand = first_candidate(best_i, nucleus, row, &id);
    if (cand.decided && c == 0) out[n] = id;
  }
  __syncthreads();
  if (cand.decided) return;

  // Step 3 (chunk_round): the mass before the candidate and the best score among those tokens, per round.
  for (int r = 0; r < rounds; ++r) {
    const Candidate cd = cand;
    unsigned long long mass = 0;
    best_d = -INFINITY;
    best_i = kNone;
    for (int i = 0; i < sweeps; ++i) {
      const int64_t v = v_of(i);
      if (v >= V) break;
      const float l = logit[i * kThreads + t];
      if (!before(order_key(l), v, cd)) continue;
      mass += logp.mass(l);
      keep_best(score[i * kThreads + t], v, best_d, best_i);
    }
    mass = block_reduce(mass, red_u, [](unsigned long long a, unsigned long long b) { return a + b; });
    block_argmax(best_d, best_i);
    parity ^= 1;
    if (t == 0) {
      sp.part_mass[parity * NS + blockIdx.x] = mass;
      post_best(best_d, best_i);
    }
    barrier();
    if (t == 0) {
      unsigned long long total = 0;  // integers: the same sum in any order
      for (int e = 0; e < sp.S; ++e) total += __ldcg(&sp.part_mass[parity * NS + n * sp.S + e]);
      row_best(best_d, best_i);
      int64_t id = 0;
      Candidate next = cd;
      decide(next, total, best_i, target, row, &id);
      if (next.decided && c == 0) out[n] = id;
      cand = next;
    }
    __syncthreads();
    if (cand.decided) return;
  }

  // Step 4 (chunk_histogram, select_bin): the radix select, each pass's row histogram in its own slice of
  // sp.hist (zeroed), selected by every block alike.
  if (t == 0) st = Nucleus{0, 0, 0, 0};
  __syncthreads();
  for (int pass = 0, shift = 24; shift >= 0; ++pass, shift -= 8) {
    const Nucleus cur = st;  // read before the barrier below, written after it
    for (int b = t; b < kBins; b += kThreads) {
      hist[b] = 0;
      hist_n[b] = 0;
    }
    __syncthreads();
    for (int i = 0; i < sweeps; ++i) {  // the same trip count in every thread: full warps for __match_any_sync
      const int64_t v = v_of(i);
      int b = -1;
      unsigned long long mass = 0;
      if (v < V) {
        const float l = logit[i * kThreads + t];
        const uint32_t key = order_key(l);
        if ((key & cur.mask) == cur.prefix) {
          b = (key >> shift) & 255;
          mass = logp.mass(l);
        }
      }
      const unsigned peers = __match_any_sync(0xffffffffu, b);
      if (b >= 0) {
        unsigned long long sum = 0;
        for (unsigned rest = peers; rest; rest &= rest - 1) sum += __shfl_sync(peers, mass, __ffs(rest) - 1);
        if (t % 32 == __ffs(peers) - 1) {
          atomicAdd(&hist[b], sum);
          atomicAdd(&hist_n[b], static_cast<unsigned>(__popc(peers)));
        }
      }
    }
    __syncthreads();
    unsigned long long* row_hist = sp.hist + (pass * (NS / sp.S) + n) * kBins;
    unsigned* row_hist_n = sp.hist_n + (pass * (NS / sp.S) + n) * kBins;
    for (int b = t; b < kBins; b += kThreads) {
      if (hist_n[b] != 0) {
        atomicAdd(&row_hist[b], hist[b]);
        atomicAdd(&row_hist_n[b], hist_n[b]);
      }
      if (shift == 0) sp.chunk_n[static_cast<int64_t>(blockIdx.x) * kBins + b] = hist_n[b];
    }
    barrier();
    for (int b = t; b < kBins; b += kThreads) {
      hist[b] = __ldcg(&row_hist[b]);
      hist_n[b] = __ldcg(&row_hist_n[b]);
    }
    __syncthreads();
    if (t == 0) select_bin(hist, hist_n, shift, target, st);
    __syncthreads();
  }

  // Step 4's Gumbel-max over the kept tokens (chunk_gumbel with the nucleus), their scores held.
  unsigned long long ties_before = 0;  // tokens with the crossing key in the earlier chunks
  if (!st.keep_all)
    for (int e = 0; e < c; ++e) ties_before += __ldcg(&sp.chunk_n[(n * sp.S + e) * kBins + (st.prefix & 255)]);
  const bool keep_all = st.keep_all;
  const uint32_t crossing = st.prefix;
  const unsigned long long tie_keep = st.above;
  best_d = -INFINITY;
  best_i = kNone;
  for (int i = 0; i < sweeps; ++i) {
    const int64_t v = v_of(i);
    const bool valid = v < V;
    const uint32_t key = order_key(valid ? logit[i * kThreads + t] : 0.f);
    const int tie = valid && !keep_all && key == crossing ? 1 : 0;
    int rank = 0, n_ties = 0;
    if (!keep_all && __syncthreads_or(tie)) {
      Scan(scan_tmp).ExclusiveSum(tie, rank, n_ties);
      __syncthreads();
    }
    const bool kept = valid && (keep_all || key > crossing || (tie && ties_before + rank < tie_keep));
    ties_before += n_ties;
    if (kept) keep_best(score[i * kThreads + t], v, best_d, best_i);
  }
  block_argmax(best_d, best_i);
  parity ^= 1;
  if (t == 0) post_best(best_d, best_i);
  barrier();
  if (t == 0 && c == 0) {
    row_best(best_d, best_i);
    out[n] = id_of(best_i);
  }
}

// Chunks per row: enough blocks to cover the SMs when there are fewer rows than SMs.
int auto_split(int64_t N, int64_t sweeps) {
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  return static_cast<int>(std::clamp<int64_t>(sms / std::max<int64_t>(N, 1), 1, std::min<int64_t>(sweeps, kMaxSplit)));
}

// Bytes `n` rounded up to 16, for packing the scratch buffers into one allocation.
int64_t aligned(int64_t n) { return (n + 15) / 16 * 16; }

// Blocks of the resident form the GPU holds at once (every SM, each as many as fit: one), 0 when the kernel
// cannot take the shared memory.
template <typename T>
int64_t resident_capacity() {
  static const int64_t blocks = [] {
    const auto kernel = resident_draw_kernel<T>;
    const size_t smem = resident_smem(kResidentSweeps);
    int per_sm = 0;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)) !=
            cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem) != cudaSuccess) {
      (void)cudaGetLastError();  // not a launch's error: the form is left out
      return int64_t(0);
    }
    return static_cast<int64_t>(per_sm) * at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  }();
  return blocks;
}

// The blocks a row is split into (split 0: auto_split) and whether the resident form takes them.
struct DrawShape {
  int S;
  bool resident;
};
DrawShape draw_shape(c10::ScalarType dtype, int64_t N, int64_t V, int split, bool resident) {
  const int64_t sweeps = (V + kThreads - 1) / kThreads;
  const int S = static_cast<int>(std::min<int64_t>(split > 0 ? split : auto_split(N, sweeps), sweeps));
  if (S == 1 || !resident || (sweeps + S - 1) / S > kResidentSweeps) return {S, false};
  int64_t capacity = 0;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, dtype, "fused_draw",
                                  [&] { capacity = resident_capacity<scalar_t>(); });
  return {S, N * S <= capacity};
}

}  // namespace

bool fused_draw_resident_cuda(const torch::Tensor& logits, int split) {
  TORCH_CHECK(logits.is_cuda() && logits.dim() == 2, "fused_draw_is_resident: logits must be (N, V) on CUDA");
  c10::cuda::CUDAGuard guard(logits.device());
  return draw_shape(logits.scalar_type(), logits.size(0), logits.size(1), split, true).resident;
}

torch::Tensor fused_draw_cuda(const torch::Tensor& logits, double temperature, double top_p, at::Generator* gen,
                              const torch::Tensor& noise, int split, int rounds, bool resident) {
  TORCH_CHECK(logits.is_cuda() && logits.dim() == 2 && (logits.size(1) <= 1 || logits.stride(1) == 1),
              "fused_draw: logits must be (N, V) on CUDA with unit column stride, got ", logits.sizes(), " strides ",
              logits.strides());
  const int64_t N = logits.size(0), V = logits.size(1);
  TORCH_CHECK(V >= 1 && V < (int64_t(1) << 31), "fused_draw: vocabulary of ", V, " columns");
  TORCH_CHECK(split >= 0 && split <= kMaxSplit, "fused_draw: split ", split, " outside [0, ", kMaxSplit, "]");
  TORCH_CHECK(rounds >= 0 && rounds <= 16, "fused_draw: rounds ", rounds, " outside [0, 16]");
  c10::cuda::CUDAGuard guard(logits.device());
  auto out = torch::empty({N}, logits.options().dtype(torch::kLong));
  if (N == 0) return out;
  const int64_t sweeps = (V + kThreads - 1) / kThreads;
  const DrawShape shape = draw_shape(logits.scalar_type(), N, V, split, resident);
  const int S = shape.S;
  torch::Tensor u;
  Uniforms uniforms{};
  if (noise.defined()) {
    TORCH_CHECK(noise.sizes() == logits.sizes(), "fused_draw: noise ", noise.sizes(), " vs logits ", logits.sizes());
    u = noise.to(logits.device(), torch::kFloat64).contiguous();
    uniforms.noise = u.data_ptr<double>();
  } else {
    TORCH_CHECK(gen != nullptr, "fused_draw: a CUDA generator or a noise tensor is needed");
    auto* g = at::check_generator<at::CUDAGeneratorImpl>(*gen);
    std::lock_guard<std::mutex> lock(g->mutex_);
    uniforms.philox = g->philox_cuda_state(4 * ((sweeps + 1) / 2));  // 4 32-bit values per curand_uniform2_double
  }
  const bool nucleus = top_p < 1.0;
  const double inv_t = 1.0 / temperature;
  // The rounds read the scores step 2 stores: (N, V) float64, 8 bytes a logit (the resident form holds them).
  torch::Tensor scores;
  if (nucleus && rounds > 0 && !shape.resident) scores = torch::empty({N, V}, logits.options().dtype(torch::kFloat64));
  double* sc = scores.defined() ? scores.data_ptr<double>() : nullptr;
  // The nucleus: tokens whose mass before them is below target (at least 1, so that the top-1 always is).
  const auto target = std::max<unsigned long long>(1, static_cast<unsigned long long>(top_p * kFixed));
  auto stream = at::cuda::getCurrentCUDAStream();
  if (S == 1) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, logits.scalar_type(), "fused_draw", [&] {
      fused_draw_kernel<scalar_t><<<N, kThreads, 0, stream>>>(logits.data_ptr<scalar_t>(), logits.stride(0), V, inv_t,
                                                              nucleus, target, rounds, uniforms, sc,
                                                              out.data_ptr<int64_t>());
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
  }
  // Scratch: the zeroed part first (histograms, states, candidates, tickets, arrivals), then the partials. The
  // resident form keeps each radix pass's row histograms (4 slices) and two parities of each phase's partials.
  const int64_t NS = N * S, passes = shape.resident ? 4 : 1, parities = shape.resident ? 2 : 1;
  const int64_t b_hist = aligned(passes * N * kBins * 8), b_hist_n = aligned(passes * N * kBins * 4),
                b_state = aligned(N * static_cast<int64_t>(sizeof(Nucleus))),
                b_cand = aligned(N * static_cast<int64_t>(sizeof(Candidate))), b_tickets = aligned(N * 4),
                b_arrivals = shape.resident ? aligned(N * 4) : 0;
  const int64_t zeroed = b_hist + b_hist_n + b_state + b_cand + b_tickets + b_arrivals;
  const int64_t b_chunk_n = aligned(NS * kBins * 4), b_max = aligned(NS * 4), b_z = aligned(NS * 8),
                b_best_d = aligned(parities * NS * 8), b_best_i = aligned(parities * NS * 8),
                b_mass = shape.resident ? aligned(2 * NS * 8) : 0;
  auto scratch = torch::empty({zeroed + b_chunk_n + b_max + b_z + b_best_d + b_best_i + b_mass},
                              logits.options().dtype(torch::kUInt8));
  scratch.narrow(0, 0, zeroed).zero_();
  char* p = static_cast<char*>(scratch.data_ptr());
  auto take = [&](int64_t bytes) {
    char* q = p;
    p += bytes;
    return q;
  };
  Split sp;
  sp.S = S;
  sp.sweeps_per_chunk = (sweeps + S - 1) / S;
  sp.hist = reinterpret_cast<unsigned long long*>(take(b_hist));
  sp.hist_n = reinterpret_cast<unsigned*>(take(b_hist_n));
  sp.state = reinterpret_cast<Nucleus*>(take(b_state));
  sp.cand = reinterpret_cast<Candidate*>(take(b_cand));
  sp.tickets = reinterpret_cast<unsigned*>(take(b_tickets));
  sp.arrivals = shape.resident ? reinterpret_cast<unsigned*>(take(b_arrivals)) : nullptr;
  sp.chunk_n = reinterpret_cast<unsigned*>(take(b_chunk_n));
  sp.part_max = reinterpret_cast<float*>(take(b_max));
  sp.part_z = reinterpret_cast<double*>(take(b_z));
  sp.part_best_d = reinterpret_cast<double*>(take(b_best_d));
  sp.part_best_i = reinterpret_cast<int64_t*>(take(b_best_i));
  sp.part_mass = shape.resident ? reinterpret_cast<unsigned long long*>(take(b_mass)) : nullptr;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, logits.scalar_type(), "fused_draw", [&] {
    const scalar_t* x = logits.data_ptr<scalar_t>();
    const int64_t rs = logits.stride(0);
    int64_t* o = out.data_ptr<int64_t>();
    if (shape.resident) {
      // One cooperative launch: its N·S blocks run at once (draw_shape checked they fit), so the row barriers end.
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(static_cast<unsigned>(NS));
      config.blockDim = dim3(kThreads);
      config.dynamicSmemBytes = resident_smem(sp.sweeps_per_chunk);
      config.stream = stream;
      cudaLaunchAttribute cooperative;
      cooperative.id = cudaLaunchAttributeCooperative;
      cooperative.val.cooperative = 1;
      config.attrs = &cooperative;
      config.numAttrs = 1;
      C10_CUDA_CHECK(cudaLaunchKernelEx(&config, resident_draw_kernel<scalar_t>, x, rs, V, inv_t, nucleus, target,
                                        rounds, uniforms, sp, o));
      return;
    }
    split_softmax_kernel<scalar_t><<<NS, kThreads, 0, stream>>>(x, rs, V, inv_t, sp);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    split_first_kernel<scalar_t><<<NS, kThreads, 0, stream>>>(x, rs, V, inv_t, nucleus, uniforms, sc, sp, o);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (!nucleus) return;
    for (int r = 0; r < rounds; ++r) {
      split_round_kernel<scalar_t><<<NS, kThreads, 0, stream>>>(x, rs, V, inv_t, target, sc, sp, o);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    for (int shift = 24; shift >= 0; shift -= 8) {
      split_radix_kernel<scalar_t><<<NS, kThreads, 0, stream>>>(x, rs, V, inv_t, target, shift, sp);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    split_kept_kernel<scalar_t><<<NS, kThreads, 0, stream>>>(x, rs, V, inv_t, uniforms, sp, o);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace aobench::common
