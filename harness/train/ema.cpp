// Implements: EMA of weights (see ema.h; spec-ao-gpt §2.3, spec-sedd-radd §2.6).
#include "harness/train/ema.h"

#include <algorithm>

#include "core/errors.h"

namespace aobench {

double ema_decay_at(double decay, int64_t n) { return std::min(decay, (1.0 + double(n)) / (10.0 + double(n))); }

Ema::Ema(torch::nn::Module& module, double decay) : module_(module), decay_(decay) {
  torch::NoGradGuard no_grad;
  for (auto& p : module_.named_parameters()) {
    params_.emplace_back(p.key(), p.value());
    shadow_.push_back(p.value().detach().to(torch::kFloat32).clone());
  }
}

void Ema::update() {
  torch::NoGradGuard no_grad;
  ++n_;
  const double d = ema_decay_at(decay_, n_);
  // shadow + (1 − d)(θ − shadow): one multi-tensor lerp when the parameters are fp32 (they are the master
  // weights of a training run), else one lerp per parameter through an fp32 copy.
  if (live_.empty())
    for (const auto& p : params_) live_.push_back(p.second.detach());
  bool all_fp32 = true;
  for (const auto& p : live_) all_fp32 &= p.scalar_type() == torch::kFloat32 && p.device() == shadow_[0].device();
  if (all_fp32 && !live_.empty()) {
    torch::_foreach_lerp_(shadow_, live_, 1.0 - d);
    return;
  }
  for (size_t i = 0; i < params_.size(); ++i) shadow_[i].lerp_(live_[i].to(torch::kFloat32), 1.0 - d);
}

void Ema::swap_in() {
  torch::NoGradGuard no_grad;
  backup_.clear();
  for (size_t i = 0; i < params_.size(); ++i) {
    backup_.push_back(params_[i].second.detach().clone());
    params_[i].second.copy_(shadow_[i]);
  }
}

void Ema::swap_out() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size() && i < backup_.size(); ++i) params_[i].second.copy_(backup_[i]);
  backup_.clear();
}

TensorMap Ema::state() const {
  TensorMap out;
  for (size_t i = 0; i < params_.size(); ++i) out[params_[i].first] = shadow_[i].to(torch::kCPU).clone();
  return out;
}

void Ema::load_state(const TensorMap& shadows, int64_t num_updates, const std::string& origin) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto it = shadows.find(params_[i].first);
    if (it == shadows.end() || it->second.sizes() != shadow_[i].sizes())
      throw CheckpointError("EMA state in '" + origin + "' lacks or mis-shapes '" + params_[i].first + "'",
                            "the checkpoint was written by a different model configuration");
    shadow_[i].copy_(it->second);
  }
  n_ = num_updates;
}

}  // namespace aobench
