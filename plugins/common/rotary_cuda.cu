// Implements: the CUDA kernel of plugins/common/rotary.h: q and k of a fused projection rotated in one pass.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/types.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "plugins/common/cuda_vec.cuh"
#include "plugins/common/rotary.h"

namespace aobench::common {
namespace {

// NeoX rotary on q and k of a fused (B, T, 3, nh, hd) projection, written to (2, B, T, nh, hd): element j < hd/2
// pairs with j + hd/2; out_j = x_j·cos_j + x_swap(j)·sin±_j with sin± = (−sin, sin). One block per token
// (b, t); its threads walk the 2·nh·hd/2 pairs of that token with 32-bit index math.
template <typename T, int kV>
__global__ void rotary_qk_kernel(const T* __restrict__ qkv, const T* __restrict__ cos, const T* __restrict__ sin_signed,
                                 int Tn, int nh, int hd, int64_t plane, T* __restrict__ out) {
  using P = Pack<T, kV>;
  const int64_t token = blockIdx.x;                                                        // b·T + t
  const int t = static_cast<int>(token % Tn), half = hd / 2, per_tensor = nh * half / kV;  // packs per q or k
  const T* c = cos + static_cast<int64_t>(t) * hd;
  const T* sn = sin_signed + static_cast<int64_t>(t) * hd;
  for (int p = threadIdx.x; p < 2 * per_tensor; p += blockDim.x) {
    const int which = p / per_tensor, rem = p - which * per_tensor;  // 0 = q, 1 = k
    const int head = rem / (half / kV), j = (rem - head * (half / kV)) * kV;
    const T* src = qkv + (token * 3 + which) * nh * hd + head * hd;
    T* dst = out + which * plane + token * nh * hd + head * hd;
    const P x1 = *reinterpret_cast<const P*>(src + j), x2 = *reinterpret_cast<const P*>(src + j + half);
    const P c1 = *reinterpret_cast<const P*>(c + j), c2 = *reinterpret_cast<const P*>(c + j + half);
    const P s1 = *reinterpret_cast<const P*>(sn + j), s2 = *reinterpret_cast<const P*>(sn + j + half);
    P o1, o2;
#pragma unroll
    for (int k = 0; k < kV; ++k) {
      const float a = static_cast<float>(x1.v[k]), b = static_cast<float>(x2.v[k]);
      o1.v[k] = static_cast<T>(a * static_cast<float>(c1.v[k]) + b * static_cast<float>(s1.v[k]));
      o2.v[k] = static_cast<T>(b * static_cast<float>(c2.v[k]) + a * static_cast<float>(s2.v[k]));
    }
    *reinterpret_cast<P*>(dst + j) = o1;
    *reinterpret_cast<P*>(dst + j + half) = o2;
  }
}

}  // namespace

torch::Tensor rotary_qk_cuda(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin_signed) {
  TORCH_CHECK(qkv.dim() == 5 && qkv.size(2) == 3 && qkv.is_contiguous() && cos.is_contiguous() &&
                  sin_signed.is_contiguous() && cos.scalar_type() == qkv.scalar_type() &&
                  sin_signed.scalar_type() == qkv.scalar_type() && qkv.size(4) % 2 == 0,
              "rotary_qk: qkv must be contiguous (B, T, 3, nh, hd) with tables (T, hd) of its dtype");
  const c10::cuda::CUDAGuard guard(qkv.device());
  const int64_t B = qkv.size(0), Tn = qkv.size(1), nh = qkv.size(3), hd = qkv.size(4);
  auto out = torch::empty({2, B, Tn, nh, hd}, qkv.options());
  const int64_t tokens = B * Tn;
  if (tokens == 0 || nh * hd == 0) return out;
  TORCH_CHECK(tokens <= 0x7fffffff && 3 * nh * hd <= 0x7fffffff, "rotary_qk: shape too large ", qkv.sizes());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, qkv.scalar_type(), "rotary_qk", [&] {
    // Four elements per load where the half head dim allows it (every pack then stays 4-element aligned).
    auto launch = [&](auto vec) {
      rotary_qk_kernel<scalar_t, decltype(vec)::value>
          <<<static_cast<unsigned>(tokens), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
              qkv.data_ptr<scalar_t>(), cos.data_ptr<scalar_t>(), sin_signed.data_ptr<scalar_t>(), static_cast<int>(Tn),
              static_cast<int>(nh), static_cast<int>(hd), tokens * nh * hd, out.data_ptr<scalar_t>());
    };
    if ((hd / 2) % 4 == 0)
      launch(std::integral_constant<int, 4>());
    else
      launch(std::integral_constant<int, 1>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace aobench::common
