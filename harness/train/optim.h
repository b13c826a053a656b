// Implements: the optimizer step of the training loop (spec-ao-gpt §2.2; DESIGN.md §3) without per-parameter
// kernels or host synchronisation: the global gradient norm in one multi-tensor pass, and AdamW (decoupled
// weight decay, bias-corrected moments: the update of torch::optim::AdamW) as ONE launch of ATen's fused
// multi-tensor kernel per parameter group (at::_fused_adamw_, CPU and CUDA) instead of ≈ 8 kernels per
// parameter. The clip factor and the "skip this update" flag stay on the device and go into that kernel.
// AOBENCH_FUSED_ADAMW=0 takes the per-parameter LibTorch expressions instead (the reference the fused path is
// tested against in tests/unit/optim_test.cpp, next to torch::optim::AdamW itself).
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/safetensors.h"

namespace aobench {

// True unless AOBENCH_FUSED_ADAMW=0.
bool fused_adamw_default();

struct AdamWGroup {
  std::vector<torch::Tensor> params;
  double weight_decay = 0;
};

class AdamW {
 public:
  AdamW(std::vector<AdamWGroup> groups, double beta1, double beta2, double eps, bool fused = fused_adamw_default());

  // Every parameter, group by group (the order of the groups given).
  const std::vector<torch::Tensor>& params() const { return all_; }
  void zero_grad();  // gradients set to none

  // ‖(∇θ₁, …, ∇θₙ)‖₂ over every defined gradient, float32 0-dim on the parameters' device (no host sync).
  torch::Tensor grad_norm() const;

  // θ ← θ − lr·(m̂ / (√v̂ + eps) + wd·θ) for every parameter with a gradient, the gradients first multiplied
  // by min(1, max_norm / (norm + 1e-6)) when max_norm > 0 (torch.nn.utils.clip_grad_norm_'s factor).
  // norm: grad_norm()'s tensor. skip: float32 0-dim on the device, 1 = make no update at all (a non-finite
  // loss or norm), 0 = update; undefined = update. Nothing here waits for the device, except that the
  // reference path (fused = false) reads `skip` on the host.
  void step(double lr, double max_norm, const torch::Tensor& norm, const torch::Tensor& skip = {});
  // The same with lr a float32 0-dim tensor on the parameters' device, read by the fused kernel when it runs:
  // the form a CUDA graph can record once and replay with a new learning rate filled in.
  void step(const torch::Tensor& lr, double max_norm, const torch::Tensor& norm, const torch::Tensor& skip = {});
  // After a step whose skip flag turned out 1: the step counters go back (bias correction unchanged).
  void undo_step_count();

  // "<name>.exp_avg", "<name>.exp_avg_sq" (parameter dtype) and "<name>.step" (int64 0-dim) on the CPU, by
  // the names given (one per parameter of params()); never-stepped parameters are left out.
  TensorMap state(const std::vector<std::string>& names) const;
  // Restores what state() wrote; `origin` names the file in errors (CheckpointError on a mis-shaped entry).
  void load_state(const std::vector<std::string>& names, const TensorMap& m, const std::string& origin);

  bool fused() const { return fused_; }

 private:
  struct Slot {
    torch::Tensor exp_avg, exp_avg_sq, step;  // step: float32 0-dim on the device (what the fused kernel reads)
  };
  void init_slot(size_t i);
  void step_impl(double lr, const torch::Tensor& lr_tensor, double max_norm, const torch::Tensor& norm,
                 const torch::Tensor& skip);

  std::vector<AdamWGroup> groups_;
  std::vector<torch::Tensor> all_;
  std::vector<Slot> slots_;      // one per params() entry; undefined until first stepped
  std::vector<size_t> stepped_;  // indices stepped by the last step() (for undo_step_count)
  double beta1_, beta2_, eps_;
  bool fused_;
};

}  // namespace aobench
