// Implements: the RADD plugin (spec-sedd-radd §1.2 time-independent parameterisation, §2.4 λ-DCE / t-DCE
// losses, §3 likelihood, §5.4 cached sampler). log p is a softmax over the V real tokens (mask excluded);
// losses accumulate in float64; ELBO rows are the per-token terms of the training estimator.
// model.time_cond = true is the SEDD–RADD ablation: the same losses with SEDD's σ-conditioned adaLN DDiT,
// σ = −log(1 − mask rate) of each input (common::sigma_at_mask_rate).
#include <cmath>

#include "core/errors.h"
#include "core/plugin_api.h"
#include "plugins/common/ddit_backbone.h"
#include "plugins/common/diffusion_common.h"

namespace aobench {
namespace {
using common::kNoiseEps;

// Model-mode guard: likelihoods and samples always run without dropout, the caller's mode is restored.
class RaddPlugin : public ModelPlugin, public Scoring, public Sampling {
 public:
  Scoring* scoring() override { return this; }
  Sampling* sampling() override { return this; }
  PluginInfo info() const override {
    Capabilities caps;
    caps.any_order = caps.elbo = caps.prefix_prompt = caps.infill = true;
    return {"radd", "1.0.0", Paradigm::kMaskedDiffusionEncoder,
            "RADD: time-independent DDiT encoder, lambda-DCE / t-DCE loss, cached sampler (Ou et al. 2024)", caps};
  }

  void configure_model(const nlohmann::json& model) override {
    const ModelConfig m(model, plugin_default_config(), "radd");
    common::read_ddit_config(m, "typical: 0.02 (RADD), 0.0 (debug)", cfg_, block_size_, chain_chunk_);
    lambda_dce_ = m.get_choice("loss", {"lambda_dce", "t_dce"}) == "lambda_dce";
    stratified_ = m.get_choice("t_sampling", {"iid", "stratified"}) == "stratified";
    final_argmax_ = m.get_choice("final_step", {"sample", "argmax"}) == "argmax";
    cfg_.ln_bias_init_ones = m.get<bool>("ln_bias_init_ones");
    tdce_extra_term_ = m.get<bool>("tdce_extra_term");
    cfg_.time_cond = m.get<bool>("time_cond");  // cond_dim stays 128, SEDD's value in every flavour
    cfg_.ln_bias = true;
  }

  void build(torch::Device device) override {
    net_ = common::DDiT(cfg_);
    net_->to(device);
  }

  torch::nn::Module& module() override { return *net_; }

  double flops_per_token(int64_t T) const override { return net_->flops_per_token(T); }

  LossOutput loss(const TrainBatch& batch, at::Generator& gen) override {
    const int64_t B = batch.tokens.size(0), T = batch.tokens.size(1);
    auto [contrib, mask_rate] = dce(batch.tokens, common::draw_uniform(B, stratified_, gen), gen);
    LossOutput out;
    out.loss = (contrib.sum() / double(B * T)).to(torch::kFloat32);  // float64 sum, mean per token
    out.metrics["mask_rate"] = mask_rate;
    return out;
  }

  NllOutput log_prob(const torch::Tensor& tokens, const torch::Tensor& order, at::Generator&) override {
    common::EvalMode em(*net_);
    torch::NoGradGuard ng;
    const int64_t T = tokens.size(1);
    // time_cond: n of T tokens masked is conditioned on the σ that masks a token w.p. n/T, as in SEDD.
    return common::masked_chain_nll(tokens, order, cfg_.vocab_size, chain_chunk_,
                                    [&](const torch::Tensor& x, const torch::Tensor& n_masked) {
                                      return forward(x, n_masked.to(torch::kFloat64) / double(T));
                                    });
  }

  NllOutput elbo(const torch::Tensor& tokens, int64_t mc_steps, at::Generator& gen,
                 const torch::Tensor& keep) override {
    TORCH_CHECK(mc_steps >= 1, "elbo: mc_steps must be ≥ 1, got ", mc_steps);
    common::EvalMode em(*net_);
    torch::NoGradGuard ng;
    const int64_t B = tokens.size(0);
    auto acc = torch::zeros(tokens.sizes(), tokens.options().dtype(torch::kFloat64));
    for (int64_t i = 0; i < mc_steps; ++i)
      acc += dce(tokens, common::draw_uniform(B, stratified_, gen), gen, keep).first;
    NllOutput out;
    out.nll = acc / double(mc_steps);
    out.scored = torch::ones(tokens.sizes(), tokens.options().dtype(torch::kBool));
    out.is_bound = true;
    return out;
  }

 protected:
  SampleOutput generate(const SampleRequest& req) override {  // checked by ModelPlugin::sample
    common::EvalMode em(*net_);
    common::MaskedSamplerOptions opt;
    opt.vocab_size = cfg_.vocab_size;
    opt.time_conditioned = cfg_.time_cond;  // a σ-conditioned network is re-run every step
    opt.extra_denoise_step = false;
    opt.final_argmax = final_argmax_;
    // Grid time t masks w.p. (1−ε)t, so its rate-σ is the schedule's σ(t).
    return common::sample_masked(
        req, opt, [&](const torch::Tensor& x, const torch::Tensor& t) { return forward(x, (1 - kNoiseEps) * t); });
  }

 private:
  // Logits (N, T, V+1) of x (N, T); `mask_rate` (N) float64 is the masking probability the input was drawn
  // with (or its masked fraction) and conditions the network only when time_cond.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask_rate) {
    if (!cfg_.time_cond) return net_->forward(x);
    return net_->forward(x, common::sigma_at_mask_rate(mask_rate).to(x.device(), torch::kFloat32));
  }

  // One draw of the training estimator (§2.4), per-token float64 terms (B, T):
  //   λ-DCE: mask w.p. λ = u, term −log p / λ;   t-DCE: t = (1−ε)u + ε, mask w.p. (1−ε)t, term −log p / t
  //   (σ'(t)/(e^σ−1) = 1/t), plus (1/t)·log(e^σ−1) when tdce_extra_term. Unmasked positions give 0.
  // keep (B, T) bool, when defined: positions never masked (the conditional ELBO of elbo()).
  std::pair<torch::Tensor, double> dce(const torch::Tensor& tokens, const torch::Tensor& u, at::Generator& gen,
                                       const torch::Tensor& keep = torch::Tensor()) {
    const int64_t B = tokens.size(0), T = tokens.size(1);
    auto dev = tokens.device();
    torch::Tensor p_mask, weight, extra;  // (B) float64, CPU
    if (lambda_dce_) {
      p_mask = u;
      weight = 1 / u;  // λ is not clipped (reference)
    } else {
      auto t = (1 - kNoiseEps) * u + kNoiseEps;
      auto sigma = common::loglinear_sigma(t);
      p_mask = 1 - torch::exp(-sigma);
      weight = 1 / t;
      if (tdce_extra_term_) extra = torch::log(torch::expm1(sigma)) / t;
    }
    auto masked = (torch::rand({B, T}, gen, torch::TensorOptions().dtype(torch::kFloat64)) < p_mask.unsqueeze(1))
                      .to(dev);  // (B, T)
    if (keep.defined()) masked = masked & ~keep;
    auto x = torch::where(masked, torch::full({1}, cfg_.vocab_size, tokens.options()), tokens);
    auto logits = forward(x, p_mask);  // (B, T, V+1)
    auto idx = masked.nonzero();
    auto b = idx.select(1, 0), l = idx.select(1, 1);
    auto rows = logits.index({b, l}).narrow(-1, 0, cfg_.vocab_size).to(torch::kFloat32);  // (n, V)
    auto nll = -torch::log_softmax(rows, -1).gather(1, tokens.index({b, l}).unsqueeze(1)).squeeze(1);
    auto term = nll.to(torch::kFloat64) * weight.to(dev).index({b});  // weights only where masked
    if (extra.defined()) term = term + extra.to(dev).index({b});
    auto contrib = torch::zeros({B, T}, term.options()).index_put({b, l}, term);
    return {contrib, masked.to(torch::kFloat64).mean().item<double>()};
  }

  common::DDiTConfig cfg_;
  common::DDiT net_{nullptr};
  int64_t block_size_ = 0, chain_chunk_ = 16;
  bool lambda_dce_ = true, stratified_ = false, final_argmax_ = false, tdce_extra_term_ = false;
};

}  // namespace
}  // namespace aobench

AOBENCH_PLUGIN(aobench::RaddPlugin)
