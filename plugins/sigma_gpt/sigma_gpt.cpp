// Implements: the σ-GPT plugin. Variant "aogpt_repo" (default) is the paper's baseline, spec-ao-gpt §1.2:
// nanoGPT GPT-2 (LayerNorm, GELU, tied head, normal 0.02 init) with a [None] start slot, wpe of T+1 rows
// and a full-width target-position table wtpe ADDED at the input; T predictions. Variant "idiap" is the
// original σ-GPT, §1.3: one half-width wpe shared by current and target position (concatenated), no start
// slot, the first token of each order is given (T−1 predictions). Sampling: KV-cache sampler, §4.2.
#include <cmath>

#include "core/errors.h"
#include "core/plugin_api.h"
#include "plugins/common/any_order_sampler.h"
#include "plugins/common/attention.h"
#include "plugins/common/config_checks.h"
#include "plugins/common/cross_entropy.h"
#include "plugins/common/flops.h"
#include "plugins/common/init.h"
#include "plugins/common/kv_cache.h"
#include "plugins/common/slots.h"

namespace aobench {
namespace {

using common::KVCache;
using common::Slots;

struct SigmaConfig {
  int64_t n_layer = 2, n_head = 2, n_embd = 64, block_size = 128, vocab_size = 257;
  bool bias = false;
  double dropout = 0.0;
  bool idiap = false;
  int64_t padded_vocab() const { return common::padded_vocab(vocab_size); }
};

// nanoGPT LayerNorm: weight, and a bias only when config.bias (eps 1e-5).
struct LayerNormImpl : torch::nn::Module {
  torch::Tensor weight, bias;
  LayerNormImpl(int64_t n, bool with_bias) {
    weight = register_parameter("weight", torch::ones({n}));
    if (with_bias) bias = register_parameter("bias", torch::zeros({n}));
  }
  torch::Tensor forward(const torch::Tensor& x) { return torch::layer_norm(x, {weight.size(0)}, weight, bias, 1e-5); }
};
TORCH_MODULE(LayerNorm);

struct BlockImpl : torch::nn::Module {
  LayerNorm ln_1{nullptr}, ln_2{nullptr};
  torch::nn::Linear c_attn{nullptr}, attn_proj{nullptr}, c_fc{nullptr}, mlp_proj{nullptr};
  int64_t n_head, n_embd;
  double dropout;
  explicit BlockImpl(const SigmaConfig& c) : n_head(c.n_head), n_embd(c.n_embd), dropout(c.dropout) {
    const int64_t d = c.n_embd;
    auto lin = [&](int64_t i, int64_t o) { return torch::nn::Linear(torch::nn::LinearOptions(i, o).bias(c.bias)); };
    ln_1 = register_module("ln_1", LayerNorm(d, c.bias));
    c_attn = register_module("attn_c_attn", lin(d, 3 * d));
    attn_proj = register_module("attn_c_proj", lin(d, d));
    ln_2 = register_module("ln_2", LayerNorm(d, c.bias));
    c_fc = register_module("mlp_c_fc", lin(d, 4 * d));
    mlp_proj = register_module("mlp_c_proj", lin(4 * d, d));
  }
  torch::Tensor forward(torch::Tensor x, KVCache* cache, int64_t layer, const std::optional<torch::Tensor>& mask) {
    auto drop = [&](const torch::Tensor& t) { return dropout > 0 ? torch::dropout(t, dropout, is_training()) : t; };
    const int64_t B = x.size(0), S = x.size(1), h = n_embd / n_head;
    auto qkv = c_attn(ln_1(x)).view({B, S, 3, n_head, h}).permute({2, 0, 3, 1, 4});  // (3, B, H, S, h)
    auto y = common::attend(qkv[0], qkv[1], qkv[2], cache, layer, mask);             // (B, H, S, h)
    x = x + drop(attn_proj(y.transpose(1, 2).reshape({B, S, n_embd})));
    return x + drop(mlp_proj(torch::gelu(c_fc(ln_2(x)))));
  }
};
TORCH_MODULE(Block);

struct SigmaGptImpl : torch::nn::Module {
  SigmaConfig cfg;
  torch::nn::Embedding wte{nullptr}, wpe{nullptr}, wtpe{nullptr};
  torch::Tensor wnonee;  // (1, d) [None] start token (aogpt_repo only)
  std::vector<Block> blocks;
  LayerNorm ln_f{nullptr};

  explicit SigmaGptImpl(const SigmaConfig& c) : cfg(c) {
    const int64_t d = c.n_embd, T = c.block_size;
    wte = register_module("wte", torch::nn::Embedding(c.padded_vocab(), d));  // tied with the head
    if (c.idiap) {
      wpe = register_module("wpe", torch::nn::Embedding(T, d / 2));  // shared by current and target
    } else {
      wpe = register_module("wpe", torch::nn::Embedding(T + 1, d));  // row 0 = [None], row p+1 = position p
      wtpe = register_module("wtpe", torch::nn::Embedding(T, d));
      wnonee = register_parameter("wnonee", torch::zeros({1, d}));
    }
    for (int64_t l = 0; l < c.n_layer; ++l) blocks.push_back(register_module("h_" + std::to_string(l), Block(c)));
    ln_f = register_module("ln_f", LayerNorm(d, c.bias));
    // nanoGPT init: normal(0, 0.02) everywhere, c_proj 0.02/√(2L), biases 0, LayerNorm weights 1.
    torch::NoGradGuard no_grad;
    for (auto& p : named_parameters()) {
      if (p.value().dim() >= 2) {
        const bool proj = p.key().find("c_proj.weight") != std::string::npos;
        p.value().normal_(0.0, proj ? 0.02 / std::sqrt(2.0 * c.n_layer) : 0.02);
      } else if (p.key().find("bias") != std::string::npos) {
        p.value().zero_();
      }
    }
  }

  static torch::Tensor masked_lookup(torch::nn::Embedding table, const torch::Tensor& idx) {
    auto e = table(idx.clamp_min(0));
    return e * idx.ge(0).unsqueeze(-1).to(e.dtype());  // zero where idx = −1 (no target)
  }

  // logits (B, n_last, padded V) of the last n_last slots.
  torch::Tensor forward(const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask, int64_t n_last) {
    return torch::nn::functional::linear(hidden(s, cache, mask, n_last), wte->weight);  // tied head, no bias
  }

  // Final hidden states (B, n_last, d) of the last n_last slots: the head's input.
  torch::Tensor hidden(const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask, int64_t n_last) {
    torch::Tensor x;
    if (cfg.idiap) {
      // pos_i = concat(wpe[o_i], wpe[o_{i+1}]): current and target position, half width each.
      x = wte(s.tokens) + torch::cat({wpe(s.positions), masked_lookup(wpe, s.targets)}, -1);  // (B, S, d)
    } else {
      auto tok = torch::where(s.tokens.lt(0).unsqueeze(-1), wnonee, wte(s.tokens.clamp_min(0)));  // (B, S, d)
      x = tok + wpe(s.positions + 1) + masked_lookup(wtpe, s.targets);
    }
    if (cfg.dropout > 0) x = torch::dropout(x, cfg.dropout, is_training());
    for (size_t l = 0; l < blocks.size(); ++l) x = blocks[l]->forward(x, cache, static_cast<int64_t>(l), mask);
    return ln_f(x.narrow(1, x.size(1) - n_last, n_last));
  }
};
TORCH_MODULE(SigmaGpt);

class SigmaGptPlugin : public ModelPlugin, public Scoring, public Sampling {
 public:
  Scoring* scoring() override { return this; }
  Sampling* sampling() override { return this; }
  PluginInfo info() const override {
    Capabilities caps;
    caps.any_order = caps.chain_log_probs = caps.prefix_prompt = caps.infill = true;
    PluginInfo info{"sigma_gpt", "0.1.0", Paradigm::kAnyOrder,
                    "σ-GPT: random-order GPT with additive target-position embedding (AO-GPT repo baseline; idiap "
                    "variant)",
                    caps};
    info.speed.capturable_loss = true;  // loss(): device ops on tokens and order only
    return info;
  }

  void configure_model(const nlohmann::json& model) override {
    const ModelConfig m(model, plugin_default_config(), "sigma_gpt");
    SigmaConfig c;
    c.n_layer = m.get<int64_t>("n_layer");
    c.n_head = m.get<int64_t>("n_head");
    c.n_embd = m.get<int64_t>("n_embd");
    c.block_size = m.get<int64_t>("block_size");
    c.vocab_size = m.get<int64_t>("vocab_size");
    c.bias = m.get<bool>("bias");
    c.dropout = m.get<double>("dropout");
    const auto variant = m.get<std::string>("variant");
    if (variant != "aogpt_repo" && variant != "idiap")
      throw ConfigError("'model.variant' = '" + variant + "' is unknown", "use aogpt_repo (default) or idiap");
    c.idiap = variant == "idiap";
    common::check_model_sizes({{"n_layer", c.n_layer},
                               {"n_head", c.n_head},
                               {"n_embd", c.n_embd},
                               {"block_size", c.block_size},
                               {"vocab_size", c.vocab_size}},
                              c.n_embd, c.n_head, c.dropout);
    if (c.idiap && c.n_embd % 2 != 0)
      throw ConfigError("'model.n_embd' must be even for variant idiap", "pos = concat of two n_embd/2 halves");
    cfg_ = c;
  }

  void build(torch::Device device) override {
    net_ = SigmaGpt(cfg_);
    net_->to(device);
  }
  torch::nn::Module& module() override { return *net_; }

  double flops_per_token(int64_t T) const override {  // the tied wte counts once
    return common::any_order_flops_per_token(*net_, cfg_.n_layer, cfg_.n_embd, T);
  }

  torch::Tensor logits(const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask, int64_t n_last) {
    return net_->forward(s, cache, mask, n_last).narrow(-1, 0, cfg_.vocab_size);  // real vocab only
  }

  // Slots of the idiap layout for the chain x_σ: slot i reads x_σ(i) at σ(i) and targets σ(i+1). (B, T−1)
  static Slots idiap_slots(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                           const torch::Tensor& targets) {
    const int64_t S = ctx_tokens.size(1);
    return {ctx_tokens.narrow(1, 0, S - 1), ctx_positions.narrow(1, 0, S - 1), targets.narrow(1, 1, S - 1)};
  }

  LossOutput loss(const TrainBatch& batch, at::Generator&) override {
    check_tokens(batch.tokens, "loss");
    TORCH_CHECK(batch.order.defined(), "sigma_gpt needs batch.order (a decoder-only any-order plugin)");
    auto x_sigma = batch.tokens.gather(1, batch.order);  // (B, T)
    Slots s;
    torch::Tensor target;
    if (cfg_.idiap) {
      s = idiap_slots(x_sigma, batch.order, batch.order);
      target = x_sigma.narrow(1, 1, x_sigma.size(1) - 1);  // first token given: T−1 predictions
    } else {
      s = common::slots_for_order(batch.tokens, batch.order);
      target = x_sigma;
    }
    auto lg = net_->forward(s, nullptr, std::nullopt, s.tokens.size(1));  // (B, S, V_pad)
    LossOutput out;
    out.loss = common::lm_cross_entropy(lg.reshape({-1, lg.size(-1)}), target.reshape(-1), cfg_.vocab_size);
    return out;
  }

  NllOutput log_prob(const torch::Tensor& tokens, const torch::Tensor& order, at::Generator&) override {
    torch::NoGradGuard no_grad;
    check_tokens(tokens, "log_prob");
    auto x_sigma = tokens.gather(1, order);
    NllOutput out;
    out.scored = torch::ones(tokens.sizes(), tokens.options().dtype(torch::kBool));
    out.nll = torch::zeros(tokens.sizes(), tokens.options().dtype(torch::kFloat64));
    const int64_t skip = cfg_.idiap ? 1 : 0;  // idiap: x_σ(0) is given, never predicted
    if (tokens.size(1) <= skip) {
      out.scored.fill_(false);
      return out;
    }
    Slots s = cfg_.idiap ? idiap_slots(x_sigma, order, order) : common::slots_for_order(tokens, order);
    auto z = net_->hidden(s, nullptr, std::nullopt, s.tokens.size(1));  // (B, S, d)
    auto target = x_sigma.narrow(1, skip, x_sigma.size(1) - skip);      // (B, S)
    auto nll =
        common::head_nll(z.reshape({-1, z.size(-1)}), net_->wte->weight, {}, target.reshape(-1), cfg_.vocab_size);
    out.nll.narrow(1, skip, target.size(1)).copy_(nll.view(target.sizes()));
    if (skip) out.scored.narrow(1, 0, 1).fill_(false);
    return out;
  }

  // Only the last slot goes through ln_f and the tied head (ensembles).
  torch::Tensor chain_log_probs_last(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                                     const torch::Tensor& targets) override {
    torch::NoGradGuard no_grad;
    check_tokens(ctx_tokens, "chain_log_probs_last");
    if (cfg_.idiap && ctx_tokens.size(1) < 2) return chain_log_probs(ctx_tokens, ctx_positions, targets).select(1, 0);
    auto s = cfg_.idiap ? idiap_slots(ctx_tokens, ctx_positions, targets)
                        : common::slots_for_chain(ctx_tokens, ctx_positions, targets);
    return torch::log_softmax(logits(s, nullptr, std::nullopt, 1).to(torch::kFloat32), -1).select(1, 0);  // (N, V)
  }

  // idiap has no [None] slot: row 0 of the result (the unconditional first prediction) is NaN.
  torch::Tensor chain_log_probs(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                                const torch::Tensor& targets) override {
    torch::NoGradGuard no_grad;
    check_tokens(ctx_tokens, "chain_log_probs");
    if (!cfg_.idiap) {
      auto s = common::slots_for_chain(ctx_tokens, ctx_positions, targets);
      return torch::log_softmax(logits(s, nullptr, std::nullopt, s.tokens.size(1)).to(torch::kFloat32), -1);
    }
    const int64_t N = ctx_tokens.size(0), S = ctx_tokens.size(1);
    auto out = torch::full({N, S, cfg_.vocab_size}, std::nan(""),
                           torch::TensorOptions().dtype(torch::kFloat32).device(ctx_tokens.device()));
    if (S > 1) {
      auto s = idiap_slots(ctx_tokens, ctx_positions, targets);
      out.narrow(1, 1, S - 1)
          .copy_(torch::log_softmax(logits(s, nullptr, std::nullopt, S - 1).to(torch::kFloat32), -1));
    }
    return out;
  }

 protected:
  SampleOutput generate(const SampleRequest& r) override {  // checked by ModelPlugin::sample
    auto fwd = [this](const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask, int64_t n) {
      return logits(s, cache, mask, n);
    };
    return common::sample_any_order(*net_, fwd, r, cfg_.vocab_size, cfg_.block_size,
                                    /*start_slot=*/!cfg_.idiap);
  }

 private:
  void check_tokens(const torch::Tensor& t, const char* what) const {
    TORCH_CHECK(t.dim() == 2 && t.size(1) <= cfg_.block_size, "sigma_gpt::", what,
                ": tokens must be (B, T) with T <= ", cfg_.block_size, ", got ", t.sizes());
  }
  SigmaConfig cfg_;
  SigmaGpt net_{nullptr};
};

}  // namespace
}  // namespace aobench

AOBENCH_PLUGIN(aobench::SigmaGptPlugin)
