// Fused passes for the memory-bound parts of a forward and a training step: row-wise reductions over the full
// vocabulary, where an fp32 copy of the (N, V) logits and a separate log_softmax pass were the largest cost of
// an evaluation forward (and of the training loss), and the residual add + LayerNorm of every block
// (docs/results/README.md). On CUDA they run one kernel that reads each logit once (fused_ops_cuda.cu); the
// training forms (lm_cross_entropy, add_layer_norm without adaLN) are autograd Functions with a backward
// kernel. On CPU, and where a kernel does not cover a call, they are the plain LibTorch expressions, which the
// CUDA kernels are tested against (plugins/gpt/fused_ops_test.cpp).
#pragma once

#include <optional>

#include <torch/torch.h>

namespace aobench::common {

// log Σ_{j<cols} exp(x[i, j]) per row, float32 (N), or per listed row: (n) for rows (n) int64. x (N, ≥cols)
// float/bf16/half with unit column stride (the padded head columns beyond `cols` are never read).
// Statistics are kept in fp32.
torch::Tensor row_logsumexp(const torch::Tensor& x, int64_t cols, const torch::Tensor& rows = {});

// −log softmax(h·Wᵀ + b)[target] over the first `vocab` columns, float64 (N). h (N, d); weight (V_pad, d);
// bias (V_pad) or undefined; targets (N) long. The head runs on chunks of rows, so only a (chunk, V_pad)
// slice of logits (in the autocast dtype on GPU) lives at once.
torch::Tensor head_nll(const torch::Tensor& h, const torch::Tensor& weight, const torch::Tensor& bias,
                       const torch::Tensor& targets, int64_t vocab);

// Mean cross-entropy −log softmax(logits + bias)[target] over the first `vocab` columns, float32 0-dim: the
// value of F::cross_entropy((logits + bias).narrow(1, 0, vocab).to(float32), targets) without an fp32 (N, V)
// copy, a log_softmax tensor or the narrow. logits (N, V_pad) float/bf16/half with unit column stride (the LM
// head's output as it comes, padded columns included); bias (V_pad) or undefined: the head's bias, taken
// here (rounded to the logits' dtype, as autocast rounds it for the GEMM) instead of in the head's GEMM, so
// its gradient, Σ over rows of ∂logits, comes out of the backward kernel without a second pass over the
// (N, V) gradient; targets (N) int64 in [0, vocab) (not checked on the device). Differentiable in logits
// and bias: the backward writes (softmax − onehot)·g/N in the logits' dtype (0 in the padded columns) in one
// pass. CUDA: row_logsumexp's kernel forward, one kernel backward; CPU: the LibTorch expressions, which the
// kernels are tested against. AOBENCH_FUSED_CE=0: the reference below.
torch::Tensor lm_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets, int64_t vocab,
                               const torch::Tensor& bias = {});
// The same through F::cross_entropy on the fp32 narrow (what the plugins ran before; AOBENCH_FUSED_CE=0).
torch::Tensor lm_cross_entropy_reference(const torch::Tensor& logits, const torch::Tensor& targets, int64_t vocab,
                                         const torch::Tensor& bias = {});
// True unless AOBENCH_FUSED_CE=0 (read once; tests switch it with the setter).
bool fused_ce_enabled();
void set_fused_ce_enabled(bool on);
// True unless AOBENCH_FUSED_LN=0: add_layer_norm records its training form (no adaLN, y given, CUDA,
// d = 128·k ≤ 1024) through the forward kernel plus a backward kernel; else the LibTorch expressions.
bool fused_ln_training_enabled();
void set_fused_ln_training_enabled(bool on);

// adaLN vectors of add_layer_norm, one (B, d) row per sequence (B = x.size(0)), unit column stride (column
// slices of one (B, 6d) modulation output are fine); scale holds 1 + γ. Any may be undefined (gate 1,
// scale 1, shift 0).
struct AdaLNMod {
  torch::Tensor gate, scale, shift;
};

// x (.., in) → (.., out) as ONE 2-D addmm, so on CUDA cuBLASLt adds the bias in the GEMM epilogue (a 3-D
// input was profiled as a GEMM plus a separate, slow broadcast bias kernel). Same numbers on CPU.
torch::Tensor linear2d(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);
// The same with a Linear's weight; `bias` overrides its own (adaln_bias) when defined.
torch::Tensor linear2d(const torch::nn::Linear& l, const torch::Tensor& x, const torch::Tensor& bias = {});

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

// The pre-norm residual step s = x + gate·y, h = (LayerNorm(s)·w + b)·scale + shift in one pass: (s, h).
// x (B, .., d) float32 (the residual stream); y like x (the branch output) or undefined (then s = x);
// weight (d); bias (d) or undefined; all contiguous. h comes out in y's dtype (without y: the autocast dtype
// under autocast, else float32) with fp32 statistics. The CUDA kernel serves inference, and training without
// adaLN through a backward kernel (fused_ln_training_enabled); CPU and the rest take the LibTorch expressions
// (x + gate·y, layer_norm, ·scale + shift).
std::pair<torch::Tensor, torch::Tensor> add_layer_norm(const torch::Tensor& x, const torch::Tensor& y,
                                                       const torch::Tensor& weight, const torch::Tensor& bias,
                                                       double eps, const AdaLNMod& mod = {});

// NeoX rotary of q and k from a fused projection: qkv (B, T, 3, nh, hd) contiguous, cos and sin± = (−sin, sin)
// (T, hd) in qkv's dtype (RotaryCache) → (2, B, T, nh, hd): x·cos + (x2, x1)·sin± per head. One pass on CUDA.
torch::Tensor rotary_qk(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin_signed);

// True when grad mode is on and one of the defined tensors requires a gradient: the kernels without a
// backward (and the autograd Functions' no-grad shortcut) check it.
bool records_grad(std::initializer_list<torch::Tensor> ts);
// An autograd Function's optional tensor input: nullopt for an undefined tensor.
std::optional<torch::Tensor> optional_tensor(const torch::Tensor& t);

// Output dtype of a fused residual + norm step: y's dtype, or without y the autocast dtype under autocast,
// else x's (add_layer_norm, rms_step of fused_norms.h).
torch::ScalarType norm_out_dtype(const torch::Tensor& x, const torch::Tensor& y);

// True when x is on a GPU, the CUDA kernels are built and no gradient is being recorded: the inference paths
// that call the kernels directly (DDiT) check this; add_layer_norm and row_logsumexp check it themselves.
bool fused_inference(const torch::Tensor& x);

}  // namespace aobench::common
