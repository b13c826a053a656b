// Implements: the exponential moving average of weights used for evaluation (spec-ao-gpt §2.3,
// spec-sedd-radd §2.6; torch_ema): fp32 shadows of every parameter, updated once per optimizer step
// with decay_n = min(decay, (1+n)/(10+n)) where n counts updates including this one.
#pragma once
#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "core/safetensors.h"

namespace aobench {

// The warm-up rule: 0.18 at n = 1, ≈0.9174 at n = 100, capped at `decay`.
double ema_decay_at(double decay, int64_t n);

class Ema {
 public:
  // Shadows start as fp32 copies of the current parameters (the initial weights).
  Ema(torch::nn::Module& module, double decay);

  // shadow ← shadow − (1 − decay_n)(shadow − θ); call right after optimizer.step().
  void update();
  // Evaluation: swap_in() copies the shadows into the model (saving the raw weights); swap_out() restores.
  void swap_in();
  void swap_out();

  int64_t num_updates() const { return n_; }
  double decay() const { return decay_; }
  TensorMap state() const;  // name → fp32 CPU shadow
  // Restores shadows (by parameter name) and the update count; throws CheckpointError on a mismatch.
  void load_state(const TensorMap& shadows, int64_t num_updates, const std::string& origin);

 private:
  torch::nn::Module& module_;
  double decay_;
  int64_t n_ = 0;
  std::vector<std::pair<std::string, torch::Tensor>> params_;  // live parameters, registration order
  std::vector<torch::Tensor> shadow_;                          // fp32, same device as the parameters
  std::vector<torch::Tensor> live_;                            // detached views of the parameters (update())
  std::vector<torch::Tensor> backup_;                          // raw weights while swapped in
};

}  // namespace aobench
