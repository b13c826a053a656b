// NeoX rotary embedding of q and k straight from a fused qkv projection: one pass on CUDA (rotary_cuda.cu),
// rotary_qk_reference elsewhere and as the kernel's test oracle.
#pragma once

#include <torch/torch.h>

namespace aobench::common {

// NeoX rotary of q and k from a fused projection: qkv (B, T, 3, nh, hd) contiguous, cos and sin± = (−sin, sin)
// (T, hd) in qkv's dtype (RotaryCache) → (2, B, T, nh, hd): x·cos + (x2, x1)·sin± per head. One pass on CUDA.
torch::Tensor rotary_qk(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin_signed);

// The LibTorch expressions of rotary_qk, in the inputs' dtype (float64 inputs: the oracle).
torch::Tensor rotary_qk_reference(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin_signed);

// CUDA entry point (rotary_cuda.cu, built with CUDA only): qkv contiguous, tables of its dtype.
torch::Tensor rotary_qk_cuda(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin_signed);

}  // namespace aobench::common
