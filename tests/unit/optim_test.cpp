// Tests of harness/train/optim.h: the fused multi-tensor AdamW (at::_fused_adamw_) and its per-parameter reference
// against torch::optim::AdamW + torch::nn::utils::clip_grad_norm_ over several steps with two parameter groups
// (weight decay on / off), clipping that bites and clipping that does not, a skipped step, and the
// checkpoint state round trip. The CUDA variant skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>

#include "core/errors.h"
#include "harness/train/optim.h"

namespace aobench {
namespace {

struct Problem {
  std::vector<torch::Tensor> params;  // two in the decay group, one without
  std::vector<torch::Tensor> grads;   // per step, concatenated per parameter
};

std::vector<torch::Tensor> make_params(torch::Device dev) {
  torch::manual_seed(5);
  return {torch::randn({7, 5}).to(dev).requires_grad_(true), torch::randn({33}).to(dev).requires_grad_(true),
          torch::randn({3, 4, 2}).to(dev).requires_grad_(true)};
}

// Gradients of step s: large ones on even steps (the clip bites), small ones on odd steps.
void set_grads(const std::vector<torch::Tensor>& ps, int s) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(100 + s);
  for (const auto& p : ps) p.mutable_grad() = (torch::randn(p.sizes(), gen) * (s % 2 == 0 ? 3.0 : 0.01)).to(p.device());
}

constexpr double kLr = 1e-2, kB1 = 0.9, kB2 = 0.95, kEps = 1e-8, kWd = 0.1, kClip = 1.0;

// Five steps of torch::optim::AdamW with clip_grad_norm_ (the update the trainer made before).
std::vector<torch::Tensor> torch_reference(torch::Device dev, int steps) {
  auto ps = make_params(dev);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  auto decay = std::make_unique<torch::optim::AdamWOptions>(kLr);
  decay->betas({kB1, kB2}).eps(kEps).weight_decay(kWd);
  auto no_decay = std::make_unique<torch::optim::AdamWOptions>(kLr);
  no_decay->betas({kB1, kB2}).eps(kEps).weight_decay(0.0);
  groups.emplace_back(std::vector<torch::Tensor>{ps[0], ps[1]}, std::move(decay));
  groups.emplace_back(std::vector<torch::Tensor>{ps[2]}, std::move(no_decay));
  torch::optim::AdamW opt(groups, torch::optim::AdamWOptions(kLr));
  for (int s = 0; s < steps; ++s) {
    set_grads(ps, s);
    torch::nn::utils::clip_grad_norm_(ps, kClip, 2.0);
    opt.step();
  }
  return ps;
}

// lr_tensor: the learning rate as a float32 0-dim tensor on `dev` (the form a captured training step uses).
std::vector<torch::Tensor> ours(torch::Device dev, bool fused, int steps, int skipped_step = -1,
                                bool lr_tensor = false) {
  auto ps = make_params(dev);
  const auto lr = torch::full({}, kLr, torch::TensorOptions().dtype(torch::kFloat32).device(dev));
  AdamW opt({{{ps[0], ps[1]}, kWd}, {{ps[2]}, 0.0}}, kB1, kB2, kEps, fused);
  EXPECT_EQ(opt.fused(), fused);
  for (int s = 0; s < steps; ++s) {
    if (s == skipped_step) {  // a non-finite gradient: the step is skipped on the device, the count undone
      set_grads(ps, 99);
      ps[1].mutable_grad()[0] = std::nan("");
      auto norm = opt.grad_norm();
      EXPECT_FALSE(std::isfinite(norm.item<double>()));
      opt.step(kLr, kClip, norm, norm.isfinite().logical_not().to(torch::kFloat32));
      opt.undo_step_count();
    }
    set_grads(ps, s);
    auto norm = opt.grad_norm();
    double expect = 0;
    for (const auto& p : ps) expect += p.grad().to(torch::kFloat64).pow(2).sum().item<double>();
    EXPECT_NEAR(norm.item<double>(), std::sqrt(expect), 1e-5 * std::sqrt(expect));
    if (lr_tensor)
      opt.step(lr, kClip, norm, torch::zeros({}, norm.options()));
    else
      opt.step(kLr, kClip, norm, torch::zeros({}, norm.options()));
    opt.zero_grad();
    EXPECT_FALSE(ps[0].grad().defined());
  }
  return ps;
}

void expect_close(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    auto x = a[i].detach().cpu(), y = b[i].detach().cpu();
    EXPECT_TRUE(torch::allclose(x, y, tol, tol)) << "parameter " << i << ": " << (x - y).abs().max().item<double>();
  }
}

TEST(AdamW, FusedAndReferenceMatchTorchAdamWWithClipping) {
  const auto want = torch_reference(torch::kCPU, 5);
  expect_close(ours(torch::kCPU, false, 5), want, 1e-6);
  expect_close(ours(torch::kCPU, true, 5), want, 1e-5);
  // A skipped step in the middle changes nothing: same parameters as without it.
  expect_close(ours(torch::kCPU, true, 5, 2), want, 1e-5);
  expect_close(ours(torch::kCPU, false, 5, 2), want, 1e-6);
  // The learning rate as a device tensor: the same trajectory on both paths.
  expect_close(ours(torch::kCPU, true, 5, 2, /*lr_tensor=*/true), want, 1e-5);
  expect_close(ours(torch::kCPU, false, 5, -1, /*lr_tensor=*/true), want, 1e-6);
}

TEST(AdamW, StateRoundTripContinuesTheSameTrajectory) {
  const auto want = torch_reference(torch::kCPU, 6);
  auto ps = make_params(torch::kCPU);
  const std::vector<std::string> names{"a", "b", "c"};
  TensorMap saved;
  {
    AdamW opt({{{ps[0], ps[1]}, kWd}, {{ps[2]}, 0.0}}, kB1, kB2, kEps, true);
    EXPECT_TRUE(opt.state(names).empty());  // never stepped
    for (int s = 0; s < 3; ++s) {
      set_grads(ps, s);
      opt.step(kLr, kClip, opt.grad_norm());
    }
    saved = opt.state(names);
    ASSERT_EQ(saved.size(), 9u);
    EXPECT_EQ(saved.at("b.step").item<int64_t>(), 3);
    EXPECT_EQ(saved.at("c.exp_avg_sq").sizes(), ps[2].sizes());
  }
  AdamW opt({{{ps[0], ps[1]}, kWd}, {{ps[2]}, 0.0}}, kB1, kB2, kEps, false);  // resumes on the other path
  opt.load_state(names, saved, "test");
  for (int s = 3; s < 6; ++s) {
    set_grads(ps, s);
    opt.step(kLr, kClip, opt.grad_norm());
  }
  expect_close(ps, want, 1e-5);
  TensorMap bad = saved;
  bad["a.exp_avg"] = torch::zeros({2});
  EXPECT_THROW(opt.load_state(names, bad, "test"), CheckpointError);
}

TEST(AdamW, NoClipWhenMaxNormIsZero) {
  auto ps = make_params(torch::kCPU);
  auto ref = make_params(torch::kCPU);
  AdamW a({{ps, 0.0}}, kB1, kB2, kEps, true), b({{ref, 0.0}}, kB1, kB2, kEps, false);
  set_grads(ps, 0);
  set_grads(ref, 0);
  a.step(kLr, 0.0, a.grad_norm());
  b.step(kLr, 0.0, b.grad_norm());
  expect_close(ps, ref, 1e-6);
  // First Adam step moves every entry by ≈ lr·sign(g), whatever the gradient's size: no clip applied.
  auto moved = (ps[0].detach() - make_params(torch::kCPU)[0].detach()).abs();
  EXPECT_NEAR(moved.mean().item<double>(), kLr, 1e-4);
}

TEST(AdamW, CudaFusedMatchesTorchAdamW) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto want = torch_reference(torch::kCUDA, 5);
  expect_close(ours(torch::kCUDA, true, 5), want, 1e-5);
  expect_close(ours(torch::kCUDA, true, 5, 2), want, 1e-5);
  expect_close(ours(torch::kCUDA, false, 5), want, 1e-6);
  expect_close(ours(torch::kCUDA, true, 5, 2, /*lr_tensor=*/true), want, 1e-5);
}

}  // namespace
}  // namespace aobench
