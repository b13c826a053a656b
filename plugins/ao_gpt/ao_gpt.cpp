// Implements: the AO-GPT plugin, spec-ao-gpt §1.1 (model_AOGPT_AdaLN6_NoRep_cond_128_trunc_qknorm): RMSNorm,
// per-head QK RMSNorm, per-token adaLN from a 128-d target-position embedding, untied lm_head with bias,
// truncated-normal init; loss = mean CE over all B·T chain predictions (§1.1 "Loss"); KV-cache any-order
// sampler (§4.2, plugins/common). `injection` selects the paper's target-position ablation (a)–(d).
// The norms run as fused steps with CUDA forward and backward kernels (rms_norm.h), and the adaLN
// modulations are computed once per target position and looked up per slot.
#include "plugins/ao_gpt/ao_gpt.h"

#include "core/errors.h"
#include "core/plugin_api.h"
#include "plugins/common/any_order_sampler.h"
#include "plugins/common/config_checks.h"
#include "plugins/common/cross_entropy.h"
#include "plugins/common/decode_scope.h"
#include "plugins/common/flops.h"
#include "plugins/common/linear.h"
#include "plugins/common/sampling.h"
#include "plugins/common/slots.h"

namespace aobench::ao_gpt {
namespace {

Injection parse_injection(const std::string& s) {
  if (s == "adaln") return Injection::kAdaLN;
  if (s == "input") return Injection::kInput;
  if (s == "every_block") return Injection::kEveryBlock;
  if (s == "per_block") return Injection::kPerBlock;
  throw ConfigError("'model.injection' = '" + s + "' is unknown", "use adaln | input | every_block | per_block");
}

class AoGptPlugin : public ModelPlugin, public Scoring, public Sampling {
 public:
  Scoring* scoring() override { return this; }
  Sampling* sampling() override { return this; }
  PluginInfo info() const override {
    Capabilities caps;
    caps.any_order = caps.chain_log_probs = caps.prefix_prompt = caps.infill = true;
    PluginInfo info{"ao_gpt", "0.1.0", Paradigm::kAnyOrder,
                    "AO-GPT: any-order GPT, adaLN target-position conditioning, KV-cache any-order sampler", caps};
    info.speed.capturable_loss = true;  // loss(): device ops on tokens and order only
    return info;
  }

  void configure_model(const nlohmann::json& model) override {
    const ModelConfig m(model, plugin_default_config(), "ao_gpt");
    AoConfig c;
    c.n_layer = m.get<int64_t>("n_layer");
    c.n_head = m.get<int64_t>("n_head");
    c.n_embd = m.get<int64_t>("n_embd");
    c.block_size = m.get<int64_t>("block_size");
    c.vocab_size = m.get<int64_t>("vocab_size");
    c.cond_dim = m.get<int64_t>("cond_dim");
    c.bias = m.get<bool>("bias");
    c.dropout = m.get<double>("dropout");
    c.injection = parse_injection(m.get<std::string>("injection"));
    common::check_model_sizes({{"n_layer", c.n_layer},
                               {"n_head", c.n_head},
                               {"n_embd", c.n_embd},
                               {"block_size", c.block_size},
                               {"vocab_size", c.vocab_size},
                               {"cond_dim", c.cond_dim}},
                              c.n_embd, c.n_head, c.dropout);
    cfg_ = c;
  }

  void build(torch::Device device) override {
    net_ = AoGpt(cfg_);
    net_->to(device);
    device_ = device;
  }
  torch::nn::Module& module() override { return *net_; }

  double flops_per_token(int64_t T) const override {
    // The untied wte is a lookup; the adaLN Linears run once per target position (AoGptImpl::conditioning),
    // not per token.
    return common::any_order_flops_per_token(*net_, cfg_.n_layer, cfg_.n_embd, T, {"wte.", "adaLN"});
  }

  // Logits over the REAL vocabulary (padded ids cut, so they are never scored or sampled).
  torch::Tensor logits(const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask, int64_t n_last) {
    return net_->forward(s, cache, mask, n_last).narrow(-1, 0, cfg_.vocab_size);
  }

  LossOutput loss(const TrainBatch& batch, at::Generator&) override {
    check_tokens(batch.tokens, "loss");
    TORCH_CHECK(batch.order.defined(), "ao_gpt needs batch.order (a decoder-only any-order plugin)");
    auto s = common::slots_for_order(batch.tokens, batch.order);
    auto z = net_->hidden(s, nullptr, std::nullopt, s.tokens.size(1));  // (B, T, d)
    // The head's bias goes into the loss, whose backward sums its gradient in the same pass: (B·T, V_pad).
    auto lg = common::linear2d(z.reshape({-1, z.size(-1)}), net_->lm_head->weight, torch::Tensor());
    auto target = batch.tokens.gather(1, batch.order);  // (B, T) x_σ(k)
    LossOutput out;
    out.loss = common::lm_cross_entropy(lg, target.reshape(-1), cfg_.vocab_size, net_->lm_head->bias);
    return out;
  }

  NllOutput log_prob(const torch::Tensor& tokens, const torch::Tensor& order, at::Generator&) override {
    torch::NoGradGuard no_grad;
    check_tokens(tokens, "log_prob");
    auto s = common::slots_for_order(tokens, order);
    auto z = net_->hidden(s, nullptr, std::nullopt, s.tokens.size(1));  // (B, T, d)
    const int64_t N = z.size(0) * z.size(1);
    z = z.reshape({N, z.size(-1)});                      // (N, d)
    auto target = tokens.gather(1, order).reshape({N});  // (N) x_σ(k)
    auto nll = common::head_nll(z, net_->lm_head->weight, net_->lm_head->bias, target, cfg_.vocab_size);
    NllOutput out;
    out.nll = nll.view(tokens.sizes());
    out.scored = torch::ones(tokens.sizes(), tokens.options().dtype(torch::kBool));
    return out;
  }

  torch::Tensor chain_log_probs(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                                const torch::Tensor& targets) override {
    torch::NoGradGuard no_grad;
    check_tokens(ctx_tokens, "chain_log_probs");
    auto s = common::slots_for_chain(ctx_tokens, ctx_positions, targets);
    return torch::log_softmax(logits(s, nullptr, std::nullopt, s.tokens.size(1)).to(torch::kFloat32), -1);
  }

  // Only the last slot goes through the final adaLN and the head (ensembles): (N, V).
  torch::Tensor chain_log_probs_last(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                                     const torch::Tensor& targets) override {
    torch::NoGradGuard no_grad;
    check_tokens(ctx_tokens, "chain_log_probs_last");
    auto s = common::slots_for_chain(ctx_tokens, ctx_positions, targets);
    return torch::log_softmax(logits(s, nullptr, std::nullopt, 1).to(torch::kFloat32), -1).select(1, 0);
  }

  // Mean |α| of each block's two adaLN gates over the T + 1 rows a forward looks up (every target position and
  // the zero "no target" condition of slot T) and all d channels: how far the attention and MLP sub-layers
  // are open. They start nearly closed (≈ 0.002, spec §1.1 "Init"); an adaLN model leaves the unigram plateau
  // as they open. From the parameters alone, through the forward's own table (adaln_pieces); one host read.
  std::map<std::string, double> diagnostics() override {
    if (cfg_.injection != Injection::kAdaLN) return {};
    torch::NoGradGuard no_grad;
    const std::vector<torch::Tensor> pieces = net_->adaln_pieces(net_->silu_position_rows());
    std::vector<torch::Tensor> gates;  // per block: mean |α₁|, mean |α₂|
    for (int64_t l = 0; l < cfg_.n_layer; ++l)
      for (int64_t k : {1, 3}) gates.push_back(pieces[4 * l + k].abs().mean());       // α₁, α₂: (T + 1, d)
    const torch::Tensor host = torch::stack(gates).to(torch::kCPU, torch::kFloat64);  // (2L)
    std::map<std::string, double> out;
    for (int64_t l = 0; l < cfg_.n_layer; ++l) {
      out["gate_attn/l" + std::to_string(l)] = host[2 * l].item<double>();
      out["gate_mlp/l" + std::to_string(l)] = host[2 * l + 1].item<double>();
    }
    return out;
  }

 protected:
  SampleOutput generate(const SampleRequest& r) override {  // checked by ModelPlugin::sample
    // Linear weights in bf16 for the call, except the adaLN tables' Linears, which run in fp32 (adaln_pieces).
    common::AutocastLinearWeights bf16_weights(*net_, r.device, [](const std::string& name) {
      return (name.size() >= 5 && name.compare(name.size() - 5, 5, "adaLN") == 0) || name == "adaLN_final";
    });
    const common::DecodeWeightsScope constant_weights;  // no kernel writes them until the sample ends
    struct AdaLNTableScope {  // the adaLN tables computed once for the call, dropped however it ends
      AoGptImpl& net;
      explicit AdaLNTableScope(AoGptImpl& n) : net(n) { net.cache_adaln_tables(); }
      ~AdaLNTableScope() { net.adaln_tables.clear(); }
    } tables{*net_};
    auto fwd = [this](const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask, int64_t n) {
      return logits(s, cache, mask, n);
    };
    return common::sample_any_order(*net_, fwd, r, cfg_.vocab_size, cfg_.block_size, /*start_slot=*/true,
                                    /*capture_steps=*/true);
  }

 private:
  void check_tokens(const torch::Tensor& t, const char* what) const {
    TORCH_CHECK(t.dim() == 2 && t.size(1) <= cfg_.block_size, "ao_gpt::", what,
                ": tokens must be (B, T) with T <= ", cfg_.block_size, ", got ", t.sizes());
  }
  AoConfig cfg_;
  AoGpt net_{nullptr};
  torch::Device device_ = torch::kCPU;
};

}  // namespace
}  // namespace aobench::ao_gpt

AOBENCH_PLUGIN(aobench::ao_gpt::AoGptPlugin)
