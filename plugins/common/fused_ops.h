// Fused passes for the memory-bound parts of a forward: row-wise reductions over the full vocabulary, where
// an fp32 copy of the (N, V) logits and a separate log_softmax pass were the largest cost of an evaluation
// forward, and the residual add + LayerNorm of every block (docs/results/README.md).
// On CUDA they run one kernel that reads each logit once (fused_ops_cuda.cu); on CPU, and whenever a
// gradient is needed (the kernel has no backward), they are the plain LibTorch expressions, which the
// CUDA kernel is tested against (plugins/gpt/fused_ops_test.cpp).
#pragma once

#include <torch/torch.h>

namespace aobench::common {

// log Σ_{j<cols} exp(x[i, j]) per row, float32 (N). x (N, ≥cols) float/bf16/half with unit column
// stride (the padded head columns beyond `cols` are never read). Statistics are kept in fp32.
torch::Tensor row_logsumexp(const torch::Tensor& x, int64_t cols);

// −log softmax(h·Wᵀ + b)[target] over the first `vocab` columns, float64 (N). h (N, d); weight (V_pad, d);
// bias (V_pad) or undefined; targets (N) long. The head runs on chunks of rows, so only a (chunk, V_pad)
// slice of logits (in the autocast dtype on GPU) lives at once.
torch::Tensor head_nll(const torch::Tensor& h, const torch::Tensor& weight, const torch::Tensor& bias,
                       const torch::Tensor& targets, int64_t vocab);

// The pre-norm residual step s = x + y, h = LayerNorm(s)·w + b in one pass: (s, h). x (N, d) float32 (the
// residual stream); y (N, d) the branch output; weight (d); bias (d) or undefined; both contiguous. h comes
// out in y's dtype (bf16 under autocast: what the next Linear reads) with fp32 statistics. Used by the GPT
// blocks in every mode: the CUDA kernel serves inference; training and CPU take x + y then layer_norm.
std::pair<torch::Tensor, torch::Tensor> add_layer_norm(const torch::Tensor& x, const torch::Tensor& y,
                                                       const torch::Tensor& weight, const torch::Tensor& bias,
                                                       double eps);

}  // namespace aobench::common
