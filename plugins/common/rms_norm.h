// The RMSNorm steps of AO-GPT as differentiable ops with CUDA forward AND backward kernels
// (rms_norm_cuda.cu): the residual add + RMSNorm + adaLN modulation between sub-layers, and the per-head
// QK RMSNorm. Training AO-GPT with plain LibTorch ops spent about half its step in memory-bound passes
// around these norms (dtype casts, strided adaLN chunks, separate norm / modulate / gate kernels and their
// backward); each step is now one read and one write per direction. CPU, and shapes the kernels do not
// cover, take the LibTorch expressions (*_reference), which are also the kernels' test oracle.
#pragma once

#include <array>

#include <torch/torch.h>

namespace aobench::common {

// Which adaLN table row each of N rows reads: idx (N) int64 in [0, R). For the backward the rows are also
// grouped by table row (a stable sort: order (N), offsets (R + 1)), so a table row's gradient is one
// deterministic sum over its rows, without atomics or an (N, 6d) per-row gradient.
struct RowIndex {
  torch::Tensor idx, order, offsets;
  int64_t table_rows = 0;
  // `grouped`: build order/offsets (needed only when a gradient will be taken).
  static RowIndex of(const torch::Tensor& idx, int64_t table_rows, bool grouped);
};

// adaLN tables of one step, each row a table row (R rows, unit column stride, any row stride: column
// slices of one (R, 6d) adaLN output): gate (R, d) and mod (R, 2d) = [shift | scale] (scale holds 1 + γ).
// Undefined: gate 1 / no modulation.
struct StepTables {
  torch::Tensor gate, mod;
};

// One pre-norm residual step of rows x (N, d) float32: s = x + gate[idx]·y, and
// h = RMSNorm(s)·weight·scale[idx] + shift[idx] with fp32 statistics. y (N, d) or undefined (then s = x).
// h has y's dtype (without y: the autocast dtype under autocast, else x's). Returns (s, h).
std::pair<torch::Tensor, torch::Tensor> rms_step(const torch::Tensor& x, const torch::Tensor& y,
                                                 const torch::Tensor& weight, const StepTables& tables,
                                                 const RowIndex& rows, double eps);
std::pair<torch::Tensor, torch::Tensor> rms_step_reference(const torch::Tensor& x, const torch::Tensor& y,
                                                           const torch::Tensor& weight, const StepTables& tables,
                                                           const RowIndex& rows, double eps);

// Per-head RMSNorm of q and k from a fused projection qkv (N, 3, H, h): q̂ = RMSNorm(q)·wq, k̂ likewise,
// v copied out, each (N, H, h) contiguous in qkv's dtype (statistics in fp32; weights (h) any float dtype).
std::array<torch::Tensor, 3> qk_rms_norm(const torch::Tensor& qkv, const torch::Tensor& wq, const torch::Tensor& wk,
                                         double eps);
std::array<torch::Tensor, 3> qk_rms_norm_reference(const torch::Tensor& qkv, const torch::Tensor& wq,
                                                   const torch::Tensor& wk, double eps);

// Whether rms_step and qk_rms_norm may take the CUDA kernels: yes unless the environment sets
// AOBENCH_FUSED_NORMS=0 (to rule them out when a GPU run looks wrong); tests switch it directly.
bool fused_norms_enabled();
void set_fused_norms_enabled(bool on);

// CUDA entry points (rms_norm_cuda.cu, built with CUDA only): the forward and backward kernels the autograd
// Functions of rms_step and qk_rms_norm call; save_rstd keeps the per-row 1/rms for the backward.
bool rms_step_cuda_supports(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& weight,
                            const StepTables& t, torch::ScalarType out_dtype);
std::array<torch::Tensor, 3> rms_step_forward_cuda(const torch::Tensor& x, const torch::Tensor& y,
                                                   const torch::Tensor& weight, const StepTables& t,
                                                   const RowIndex& rows, double eps, torch::ScalarType out_dtype,
                                                   bool save_rstd);
std::array<torch::Tensor, 5> rms_step_backward_cuda(const torch::Tensor& grad_s, const torch::Tensor& grad_h,
                                                    const torch::Tensor& s, const torch::Tensor& rstd,
                                                    const torch::Tensor& y, const torch::Tensor& weight,
                                                    const StepTables& t, const RowIndex& rows);
bool qk_rms_norm_cuda_supports(const torch::Tensor& qkv, const torch::Tensor& wq, const torch::Tensor& wk);
std::array<torch::Tensor, 4> qk_rms_norm_forward_cuda(const torch::Tensor& qkv, const torch::Tensor& wq,
                                                      const torch::Tensor& wk, double eps, bool save_rstd);
std::array<torch::Tensor, 3> qk_rms_norm_backward_cuda(const torch::Tensor& grad_q, const torch::Tensor& grad_k,
                                                       const torch::Tensor& grad_v, const torch::Tensor& qkv,
                                                       const torch::Tensor& rstd, const torch::Tensor& wq,
                                                       const torch::Tensor& wk);

}  // namespace aobench::common
