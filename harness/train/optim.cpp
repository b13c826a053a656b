// Implements: harness/train/optim.h (fused multi-tensor AdamW, sync-free gradient norm and clipping).
#include "harness/train/optim.h"

#include <cmath>

#include "core/device.h"
#include "core/errors.h"

namespace aobench {

bool fused_adamw_default() { return env_switch_on("AOBENCH_FUSED_ADAMW"); }

AdamW::AdamW(std::vector<AdamWGroup> groups, double beta1, double beta2, double eps, bool fused)
    : groups_(std::move(groups)), beta1_(beta1), beta2_(beta2), eps_(eps), fused_(fused) {
  for (const auto& g : groups_)
    for (const auto& p : g.params) all_.push_back(p);
  slots_.resize(all_.size());
  // The fused kernel takes one device and one floating dtype per launch; anything else takes the reference.
  for (const auto& p : all_)
    if (p.device() != all_.front().device() || p.scalar_type() != all_.front().scalar_type() ||
        !at::isFloatingType(p.scalar_type()))
      fused_ = false;
}

void AdamW::zero_grad() {
  for (auto& p : all_) p.mutable_grad().reset();
}

torch::Tensor AdamW::grad_norm() const {
  std::vector<torch::Tensor> grads;
  for (const auto& p : all_)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty())
    return torch::zeros(
        {}, torch::TensorOptions().dtype(torch::kFloat32).device(all_.empty() ? torch::kCPU : all_[0].device()));
  // Per-tensor norms in one multi-tensor launch, then the norm of the n norms (clip_grad_norm_'s recipe).
  return at::linalg_vector_norm(torch::stack(torch::_foreach_norm(grads, 2)), 2).to(torch::kFloat32);
}

void AdamW::init_slot(size_t i) {
  torch::NoGradGuard no_grad;
  const auto& p = all_[i];
  slots_[i].exp_avg = torch::zeros_like(p, torch::MemoryFormat::Preserve);
  slots_[i].exp_avg_sq = torch::zeros_like(p, torch::MemoryFormat::Preserve);
  slots_[i].step = torch::zeros({}, p.options().dtype(torch::kFloat32));
}

void AdamW::step(double lr, double max_norm, const torch::Tensor& norm, const torch::Tensor& skip) {
  step_impl(lr, {}, max_norm, norm, skip);
}

void AdamW::step(const torch::Tensor& lr, double max_norm, const torch::Tensor& norm, const torch::Tensor& skip) {
  TORCH_CHECK(lr.dim() == 0 && lr.scalar_type() == torch::kFloat32, "AdamW::step: lr must be a float32 0-dim tensor");
  step_impl(0.0, lr, max_norm, norm, skip);
}

// lr_tensor defined: the learning rate is that tensor (the fused kernel reads it on the device), else lr.
void AdamW::step_impl(double lr, const torch::Tensor& lr_tensor, double max_norm, const torch::Tensor& norm,
                      const torch::Tensor& skip) {
  torch::NoGradGuard no_grad;
  stepped_.clear();
  std::vector<torch::Tensor> steps;
  for (size_t i = 0; i < all_.size(); ++i) {
    if (!all_[i].grad().defined()) continue;
    if (!slots_[i].step.defined()) init_slot(i);
    stepped_.push_back(i);
    steps.push_back(slots_[i].step);
  }
  if (stepped_.empty()) return;
  torch::_foreach_add_(steps, 1.0);  // counted even when skipped; undo_step_count() takes it back

  if (fused_) {
    // The kernel divides each gradient by grad_scale: 1 / clip factor = max((norm + 1e-6) / max_norm, 1).
    std::optional<torch::Tensor> grad_scale, found_inf;
    if (max_norm > 0) grad_scale = torch::clamp_min((norm.to(torch::kFloat32) + 1e-6) / max_norm, 1.0);
    if (skip.defined()) found_inf = skip.to(torch::kFloat32);
    size_t k = 0, first = 0;
    for (const auto& g : groups_) {
      std::vector<torch::Tensor> ps, grads, m, v, st;
      for (; k < stepped_.size() && stepped_[k] < first + g.params.size(); ++k) {
        const size_t i = stepped_[k];
        ps.push_back(all_[i]);
        grads.push_back(all_[i].grad());
        m.push_back(slots_[i].exp_avg);
        v.push_back(slots_[i].exp_avg_sq);
        st.push_back(slots_[i].step);
      }
      first += g.params.size();
      if (ps.empty()) continue;
      if (lr_tensor.defined())
        at::_fused_adamw_(ps, grads, m, v, /*max_exp_avg_sqs=*/{}, st, lr_tensor, beta1_, beta2_, g.weight_decay, eps_,
                          /*amsgrad=*/false, /*maximize=*/false, grad_scale, found_inf);
      else
        at::_fused_adamw_(ps, grads, m, v, /*max_exp_avg_sqs=*/{}, st, lr, beta1_, beta2_, g.weight_decay, eps_,
                          /*amsgrad=*/false, /*maximize=*/false, grad_scale, found_inf);
    }
    return;
  }

  // Reference: torch::optim::AdamW's per-parameter expressions, clip factor as clip_grad_norm_ applies it.
  if (skip.defined() && skip.item<float>() != 0.f) return;
  if (lr_tensor.defined()) lr = lr_tensor.item<double>();
  torch::Tensor coef;
  if (max_norm > 0) coef = torch::clamp_max(max_norm / (norm.to(torch::kFloat32) + 1e-6), 1.0);
  size_t first = 0;
  for (const auto& g : groups_) {
    for (const size_t i : stepped_) {
      if (i < first || i >= first + g.params.size()) continue;
      auto& p = all_[i];
      auto& s = slots_[i];
      torch::Tensor grad = p.grad();
      if (coef.defined()) grad.mul_(coef.to(grad.scalar_type()));
      const double t = s.step.item<double>();
      p.mul_(1 - lr * g.weight_decay);
      s.exp_avg.mul_(beta1_).add_(grad, 1 - beta1_);
      s.exp_avg_sq.mul_(beta2_).addcmul_(grad, grad, 1 - beta2_);
      const double bc1 = 1 - std::pow(beta1_, t), bc2 = 1 - std::pow(beta2_, t);
      torch::Tensor denom = (s.exp_avg_sq.sqrt() / std::sqrt(bc2)).add_(eps_);
      p.addcdiv_(s.exp_avg, denom, -lr / bc1);
    }
    first += g.params.size();
  }
}

void AdamW::undo_step_count() {
  std::vector<torch::Tensor> steps;
  for (const size_t i : stepped_) steps.push_back(slots_[i].step);
  torch::NoGradGuard no_grad;
  if (!steps.empty()) torch::_foreach_add_(steps, -1.0);
  stepped_.clear();
}

TensorMap AdamW::state(const std::vector<std::string>& names) const {
  TORCH_CHECK(names.size() == all_.size(), "AdamW::state: ", names.size(), " names for ", all_.size(), " parameters");
  TensorMap out;
  for (size_t i = 0; i < all_.size(); ++i) {
    const Slot& s = slots_[i];
    if (!s.step.defined()) continue;  // never stepped (e.g. no gradient yet)
    out[names[i] + ".exp_avg"] = s.exp_avg.detach().to(torch::kCPU).clone();
    out[names[i] + ".exp_avg_sq"] = s.exp_avg_sq.detach().to(torch::kCPU).clone();
    out[names[i] + ".step"] = torch::tensor(static_cast<int64_t>(std::llround(s.step.item<double>())), torch::kInt64);
  }
  return out;
}

void AdamW::load_state(const std::vector<std::string>& names, const TensorMap& m, const std::string& origin) {
  TORCH_CHECK(names.size() == all_.size(), "AdamW::load_state: ", names.size(), " names for ", all_.size(),
              " parameters");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < all_.size(); ++i) {
    const auto& p = all_[i];
    auto a = m.find(names[i] + ".exp_avg"), b = m.find(names[i] + ".exp_avg_sq"), s = m.find(names[i] + ".step");
    if (a == m.end() && b == m.end() && s == m.end()) continue;
    if (a == m.end() || b == m.end() || s == m.end() || a->second.sizes() != p.sizes() ||
        b->second.sizes() != p.sizes() || s->second.numel() != 1)
      throw CheckpointError("optimizer state in '" + origin + "' is incomplete or mis-shaped for '" + names[i] + "'",
                            "the checkpoint was written by a different model configuration");
    slots_[i].exp_avg = a->second.to(p.device(), p.scalar_type()).clone();
    slots_[i].exp_avg_sq = b->second.to(p.device(), p.scalar_type()).clone();
    slots_[i].step = torch::full({}, double(s->second.item<int64_t>()), p.options().dtype(torch::kFloat32));
  }
}

}  // namespace aobench
