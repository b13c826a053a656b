// The residual add + LayerNorm (+ adaLN modulation) of every pre-norm block, fused: one read of x and y and one
// write of s and h per row (layer_norm_cuda.cu), forward for inference and, without adaLN, forward and
// backward for training. CPU, and calls a kernel does not cover, take add_layer_norm_reference, which the
// kernels are tested against (tests/fused_ops_test.cpp).
#pragma once

#include <array>
#include <utility>

#include <torch/torch.h>

namespace aobench::common {

// adaLN vectors of add_layer_norm, one (B, d) row per sequence (B = x.size(0)), unit column stride (column
// slices of one (B, 6d) modulation output are fine); scale holds 1 + γ. Any may be undefined (gate 1,
// scale 1, shift 0).
struct AdaLNMod {
  torch::Tensor gate, scale, shift;
};

// The pre-norm residual step s = x + gate·y, h = (LayerNorm(s)·w + b)·scale + shift in one pass: (s, h).
// x (B, .., d) float32 (the residual stream); y like x (the branch output) or undefined (then s = x);
// weight (d); bias (d) or undefined; all contiguous. h comes out in y's dtype (without y: the autocast dtype
// under autocast, else float32) with fp32 statistics. The CUDA kernel serves inference, and training without
// adaLN through a backward kernel (fused_ln_training_enabled); CPU and the rest take the LibTorch expressions
// (add_layer_norm_reference).
std::pair<torch::Tensor, torch::Tensor> add_layer_norm(const torch::Tensor& x, const torch::Tensor& y,
                                                       const torch::Tensor& weight, const torch::Tensor& bias,
                                                       double eps, const AdaLNMod& mod = {});

// The LibTorch expressions of add_layer_norm: s = x + gate·y (x without y), h = layer_norm(s)·scale + shift in
// x's precision, h cast to norm_out_dtype(x, y). In float64 on float64 inputs: the kernels' test oracle.
std::pair<torch::Tensor, torch::Tensor> add_layer_norm_reference(const torch::Tensor& x, const torch::Tensor& y,
                                                                 const torch::Tensor& weight, const torch::Tensor& bias,
                                                                 double eps, const AdaLNMod& mod = {});
// True unless AOBENCH_FUSED_LN=0: add_layer_norm records its training form (no adaLN, y given, CUDA,
// d = 128·k ≤ 1024) through the forward kernel plus a backward kernel; else the LibTorch expressions.
bool fused_ln_training_enabled();
void set_fused_ln_training_enabled(bool on);

// CUDA entry points (layer_norm_cuda.cu, built with CUDA only). x (.., d) fp32; y like x in the output dtype,
// or undefined (then `out_dtype`); gate / scale / shift (B, d) or undefined. `training`: the backward kernel
// will recompute the statistics, so the forward keeps their summation order (a warp a row at any row count).
bool add_layer_norm_cuda_supports(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& weight,
                                  const torch::Tensor& bias);
std::pair<torch::Tensor, torch::Tensor> add_layer_norm_cuda(const torch::Tensor& x, const torch::Tensor& y,
                                                            const torch::Tensor& weight, const torch::Tensor& bias,
                                                            double eps, const torch::Tensor& gate,
                                                            const torch::Tensor& scale, const torch::Tensor& shift,
                                                            torch::ScalarType out_dtype, bool want_sum,
                                                            bool training = false);
// The training backward without adaLN: from ∂s, ∂h and the saved s → {∂x, ∂y, ∂weight, ∂bias}.
bool add_layer_norm_backward_cuda_supports(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& weight,
                                           const torch::Tensor& bias);
std::array<torch::Tensor, 4> add_layer_norm_backward_cuda(const torch::Tensor& grad_s, const torch::Tensor& grad_h,
                                                          const torch::Tensor& s, const torch::Tensor& weight,
                                                          double eps);

}  // namespace aobench::common
