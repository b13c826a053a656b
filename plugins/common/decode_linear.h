// The Linear layers of a decode step, fused: y = x·wᵀ + b (and GELU) for the few rows of one step in one kernel
// that streams the weight once (decode_linear_cuda.cu), where cuBLAS spent 4–7 µs a GEMM of a few MB on tiles
// that left most SMs idle, plus a split-K reduction and a GELU pass; decode_linear_reference elsewhere and as the
// kernel's test oracle.
#pragma once

#include <torch/torch.h>

#include "plugins/common/decode_scope.h"

namespace aobench::common {

// The activation applied to the rounded output: none, GELU with erf (AO-GPT, GPT-2 "gelu") or with tanh.
enum class DecodeActivation { none, gelu, gelu_tanh };

// The most rows the kernel takes: a decode step of up to 32 sequences.
inline constexpr int64_t kDecodeLinearMaxRows = 32;

// x (R, K), w (N, K), b (N) or undefined → (R, N) as addmm in x's dtype (fp32 accumulation, the bias added
// before the one rounding), then act(y) in fp32 rounded again: torch::gelu of the linear's output.
torch::Tensor decode_linear_reference(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                      DecodeActivation act);
// The same, on CUDA through the kernel when decode_linear_supports(x, w, b), else the reference.
torch::Tensor decode_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                            DecodeActivation act);
// Whether the kernel is built and not switched off (AOBENCH_DECODE_GEMM=0); tests switch it.
bool decode_linear_enabled();
void set_decode_linear_enabled(bool on);
// Whether the kernel takes these tensors: CUDA bf16, x (R ≤ 32, K) and w (N, K) contiguous and 16-byte aligned,
// b bf16 (N) or undefined, K a multiple of 32, N a multiple of 8 in 8 … 16 384 (a vocabulary head stays with
// cuBLAS), no gradient asked for, and under autocast only when its dtype is bf16 (what autocast would compute).
bool decode_linear_supports(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);

// CUDA entry point (decode_linear_cuda.cu, built with CUDA only) for inputs decode_linear_supports has taken
// (decode_linear checks; it does not check again); `early_weights`: launch as a programmatic
// dependent that loads the weights before waiting (decode_pdl(), decode_scope.h).
torch::Tensor decode_linear_cuda(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                 DecodeActivation act, bool early_weights);

}  // namespace aobench::common
