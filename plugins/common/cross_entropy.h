// Row-wise reductions over the full vocabulary, fused: the log-sum-exp of each row, the head's per-token NLL
// and the training cross-entropy, where an fp32 copy of the (N, V) logits and a separate log_softmax pass were
// the largest cost of an evaluation forward and of the training loss (docs/results/README.md). On CUDA one
// kernel reads each logit once (cross_entropy_cuda.cu); lm_cross_entropy is an autograd Function with a
// one-pass backward kernel. On CPU, and where a kernel does not cover a call, the LibTorch expressions of
// lm_cross_entropy_reference, which the kernels are tested against (tests/fused_ops_test.cpp).
#pragma once

#include <utility>

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

// CUDA entry points (cross_entropy_cuda.cu, built with CUDA only): what the functions above dispatch to.
// row_logsumexp of x + bias (bias (V_pad) in x's dtype, or undefined), (N) or (n) float32.
torch::Tensor row_logsumexp_cuda(const torch::Tensor& x, int64_t cols, const torch::Tensor& rows,
                                 const torch::Tensor& bias = {});
// ∂ mean CE / ∂logits (N, V_pad) in the logits' dtype and ∂bias (V_pad) (undefined without a bias), given the
// forward's lse (N) and the scale g/N as a float32 0-dim device tensor.
std::pair<torch::Tensor, torch::Tensor> lm_cross_entropy_backward_cuda(const torch::Tensor& logits,
                                                                       const torch::Tensor& bias,
                                                                       const torch::Tensor& targets,
                                                                       const torch::Tensor& lse,
                                                                       const torch::Tensor& grad_scale, int64_t vocab);

}  // namespace aobench::common
