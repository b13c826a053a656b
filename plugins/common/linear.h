// The Linear layers of the fused blocks: one 2-D GEMM with the bias in cuBLASLt's epilogue, the adaLN tables'
// bf16-operand GEMM with an fp32 output, and the adaLN bias with its constant 1 in the scale chunks.
#pragma once

#include <torch/torch.h>

#include <utility>

#include "plugins/common/decode_linear.h"

namespace aobench::common {

// x (.., in) → (.., out) as ONE 2-D addmm, so on CUDA cuBLASLt adds the bias in the GEMM epilogue (a 3-D
// input was profiled as a GEMM plus a separate, slow broadcast bias kernel). Same numbers on CPU. The few rows
// of a decode step in bf16 without gradients take decode_linear's kernel instead (decode_linear.h). Training
// under bf16 autocast on a GPU takes linear2d_training (below) while fused_linear_enabled().
torch::Tensor linear2d(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);
// The same with a Linear's weight; `bias` overrides its own (adaln_bias) when defined.
torch::Tensor linear2d(const torch::nn::Linear& l, const torch::Tensor& x, const torch::Tensor& bias = {});
// torch::gelu(linear2d(l, x), approximate) ("none" or "tanh"), the GELU in decode_linear's kernel when it
// takes the call (one launch instead of two).
torch::Tensor linear2d_gelu(const torch::nn::Linear& l, const torch::Tensor& x, const std::string& approximate);

// The training Linear under bf16 autocast, as an autograd Function: the forward is autocast's addmm of x, w and b
// cast to bf16 (the same bits), then act (torch::gelu of it); the backward gives ∂x = g·w in bf16 (autocast's),
// ∂w = gᵀ·x accumulated and written in w's dtype by one GEMM (autocast's addmm rounded it to bf16 and a cast
// followed), and ∂b = bias_grad(g), fp32 column sums in one read of g (autocast's was a bf16 sum(0) at a third
// of the bandwidth, then a cast), where g is the addmm's output gradient: after a GELU, computed together with
// its column sums by gelu_backward_bias_grad. x (M, in) on CUDA, w (out, in), b (out) or undefined → (M,
// out) bf16.
torch::Tensor linear2d_training(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                DecodeActivation act = DecodeActivation::none);
// Whether linear2d takes linear2d_training for these tensors: the kernels are built and switched on
// (AOBENCH_FUSED_LINEAR, perf.fused_linear), a gradient is recorded, x is a 2-D CUDA tensor and bf16 autocast is on.
bool linear2d_training_applies(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);
bool fused_linear_enabled();
void set_fused_linear_enabled(bool on);
// The bias gradient of a Linear from its output's gradient g (M, N): the column sums Σ_m g[m, n] in fp32. Through
// the column-sum kernel (linear_cuda.cu) when column_sum_kernel_takes(g), else g.sum(0) in fp32.
torch::Tensor bias_grad(const torch::Tensor& g);
// GELU's backward and the bias gradient of the Linear before it: g_pre = gelu'(pre)·g_h rounded to bf16
// (at::gelu_backward's float expressions; tanh_approx: GELU's tanh form) and its fp32 column sums, the bits of
// bias_grad(g_pre). In one pass of the kernel when it takes both (the same shape), else at::gelu_backward, then
// bias_grad. → (g_pre, sums)
std::pair<torch::Tensor, torch::Tensor> gelu_backward_bias_grad(const torch::Tensor& g_h, const torch::Tensor& pre,
                                                                bool tanh_approx);
// The rows a block of the column-sum kernel's first pass adds: fixed, so the sums' order is the same on every GPU.
inline constexpr int64_t kColumnSumSliceRows = 128;
// Whether the column-sum kernel takes g: the kernels are built and g is a contiguous, 16-byte aligned bf16 CUDA
// (M, N) with N a multiple of 8 (and ⌈M / 128⌉ ≤ 65 535 blocks).
bool column_sum_kernel_takes(const torch::Tensor& g);
// CUDA entry points (linear_cuda.cu, built with CUDA only) for tensors the kernel takes.
torch::Tensor bias_grad_cuda(const torch::Tensor& g);
std::pair<torch::Tensor, torch::Tensor> gelu_backward_bias_grad_cuda(const torch::Tensor& g_h, const torch::Tensor& pre,
                                                                     bool tanh_approx);

// x·wᵀ + b in float32 from x and w rounded to bf16, accumulated in fp32 (at::mm's out_dtype form), forward
// and backward: x (R, in), w (out, in), b (out) or undefined, all float32 on CUDA. For the adaLN tables
// under bf16 autocast, whose fp32 GEMMs of ≈ T rows ran on CUDA cores (about 1 ms of a small AO-GPT
// training step), while a bf16 output would resolve 1 + γ only in steps of 2⁻⁷. b is not rounded to bf16:
// it rides the GEMM as two more columns of w (its bf16 rounding and the remainder, within 2⁻¹⁸ of b
// together) against two columns of ones in x, so no broadcast bias pass follows the GEMM; its gradient is
// the fp32 column sum of the output's. (A non-finite b gives NaN in its column, where an added b gave ±inf.)
torch::Tensor linear_bf16_operands(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);

// Bias of an adaLN Linear (weight (parts·d, C)) whose output is `parts` chunks (shift, scale, gate, …) of
// width d, with 1 added to every scale chunk (1 and 4 of six; 1 of two): ln(x)·(1+γ)+β then costs one
// addcmul or nothing extra in add_layer_norm. (parts·d). `ones` caches the constant (built on first use,
// rebuilt if the weights move to another device or dtype).
torch::Tensor adaln_bias(const torch::nn::Linear& l, int64_t parts, torch::Tensor& ones);
// adaln_bias's constant: 1 in every scale chunk of `parts` chunks of width d, 0 elsewhere. (parts·d)
torch::Tensor adaln_scale_ones(int64_t parts, int64_t d, const torch::TensorOptions& options);

}  // namespace aobench::common
