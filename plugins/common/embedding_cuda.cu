// Implements: the CUDA kernel of embed_sum (embedding.h): a block a row of the output, each thread four columns at
// a time (16-byte loads), the token's row (or the [None] row) plus the position's row in float32, the add the
// reference makes; an id outside its table reads nothing and gives NaN. Launched in plain stream order: the
// kernels after it in a decode step read their constants before they wait (decode_scope.h), which holds only
// after a kernel that ends before they start.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "plugins/common/embedding.h"

namespace aobench::common {
namespace {

struct Params {
  const float* tok;                   // (V, d), row stride tok_ld
  const float* none;                  // (d) or null
  const float* pos;                   // (P, d), row stride pos_ld
  const int64_t *tokens, *positions;  // (B·S); (B·S) or (S)
  int64_t tok_ld, pos_ld, V, P, S, pos_seq_stride, pos_offset, d4;
  float* out;  // (B·S, d)
};

__global__ void embed_sum_kernel(const Params p) {
  const int64_t n = blockIdx.x, t = p.tokens[n];
  const int64_t q = p.positions[n / p.S * p.pos_seq_stride + n % p.S] + p.pos_offset;
  const float* tr = t < 0 ? p.none : t < p.V ? p.tok + t * p.tok_ld : nullptr;
  const float* pr = q >= 0 && q < p.P ? p.pos + q * p.pos_ld : nullptr;
  const float4 nan4 = make_float4(NAN, NAN, NAN, NAN);
  float4* out = reinterpret_cast<float4*>(p.out + n * p.d4 * 4);
  for (int64_t c = threadIdx.x; c < p.d4; c += blockDim.x) {
    const float4 a = tr ? reinterpret_cast<const float4*>(tr)[c] : nan4;
    const float4 b = pr ? reinterpret_cast<const float4*>(pr)[c] : nan4;
    out[c] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
  }
}

}  // namespace

torch::Tensor embed_sum_cuda(const torch::Tensor& tok_table, const torch::Tensor& tokens, const torch::Tensor& none,
                             const torch::Tensor& pos_table, const torch::Tensor& positions, int64_t pos_offset) {
  const c10::cuda::CUDAGuard guard(tokens.device());
  const int64_t B = tokens.size(0), S = tokens.size(1), d = tok_table.size(1);
  auto out = torch::empty({B, S, d}, tok_table.options());
  if (B * S == 0 || d == 0) return out;
  const Params p{tok_table.data_ptr<float>(),
                 none.defined() ? none.data_ptr<float>() : nullptr,
                 pos_table.data_ptr<float>(),
                 tokens.data_ptr<int64_t>(),
                 positions.data_ptr<int64_t>(),
                 tok_table.stride(0),
                 pos_table.stride(0),
                 tok_table.size(0),
                 pos_table.size(0),
                 S,
                 positions.dim() == 2 ? S : 0,
                 pos_offset,
                 d / 4,
                 out.data_ptr<float>()};
  const int threads = static_cast<int>(std::min<int64_t>(256, (d / 4 + 31) / 32 * 32));
  embed_sum_kernel<<<static_cast<unsigned>(B * S), threads, 0, at::cuda::getCurrentCUDAStream()>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace aobench::common
