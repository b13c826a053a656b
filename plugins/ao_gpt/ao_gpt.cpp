// Implements: the AO-GPT plugin, spec-ao-gpt §1.1 (model_AOGPT_AdaLN6_NoRep_cond_128_trunc_qknorm): RMSNorm,
// per-head QK RMSNorm, per-token adaLN from a 128-d target-position embedding, untied lm_head with bias,
// truncated-normal init; loss = mean CE over all B·T chain predictions (§1.1 "Loss"); KV-cache any-order
// sampler (§4.2, plugins/common). `injection` selects the paper's target-position ablation (a)–(d).
#include <algorithm>
#include <cmath>

#include <ATen/autocast_mode.h>

#include "harness/errors.h"
#include "harness/plugin_api.h"
#include "plugins/common/any_order.h"
#include "plugins/common/fused_ops.h"

extern "C" const char* aobench_plugin_default_json();

namespace aobench {
namespace {

using common::KVCache;
using common::Slots;
using common::linear2d;

enum class Injection { kAdaLN, kInput, kEveryBlock, kPerBlock };

struct AoConfig {
  int64_t n_layer = 2, n_head = 2, n_embd = 64, block_size = 128, vocab_size = 257, cond_dim = 128;
  bool bias = true;
  double dropout = 0.0;
  Injection injection = Injection::kAdaLN;
  int64_t padded_vocab() const { return common::padded_vocab(vocab_size); }
};

// RMSNorm with a weight only, eps 1e-5 (spec §1.1).
struct RMSNormImpl : torch::nn::Module {
  torch::Tensor weight;
  explicit RMSNormImpl(int64_t n) { weight = register_parameter("weight", torch::ones({n})); }
  // Under autocast the input and weight take the activation dtype: the fused kernel needs equal dtypes (a
  // bf16 input with an fp32 weight falls back to a slow composite) and keeps its statistics in fp32; the
  // bf16 output saves the fp32 passes of the adaLN modulation that the next Linear would cast down anyway.
  // A no-op in fp32 (CPU).
  torch::Tensor forward(const torch::Tensor& x) {
    auto dt = x.scalar_type();
    if (at::autocast::is_autocast_enabled(x.device().type()))
      dt = at::autocast::get_autocast_dtype(x.device().type());
    return torch::rms_norm(x.to(dt), {weight.size(0)}, weight.to(dt), 1e-5);
  }
};
TORCH_MODULE(RMSNorm);

struct AttentionImpl : torch::nn::Module {
  torch::nn::Linear c_attn{nullptr}, c_proj{nullptr};
  RMSNorm q_norm{nullptr}, k_norm{nullptr};  // one head-dim weight shared by all heads
  int64_t n_head, n_embd;
  explicit AttentionImpl(const AoConfig& c) : n_head(c.n_head), n_embd(c.n_embd) {
    c_attn = register_module("c_attn",
                             torch::nn::Linear(torch::nn::LinearOptions(n_embd, 3 * n_embd).bias(c.bias)));
    c_proj =
        register_module("c_proj", torch::nn::Linear(torch::nn::LinearOptions(n_embd, n_embd).bias(c.bias)));
    q_norm = register_module("q_norm", RMSNorm(n_embd / n_head));
    k_norm = register_module("k_norm", RMSNorm(n_embd / n_head));
  }
  torch::Tensor forward(const torch::Tensor& x, KVCache* cache, int64_t layer,
                        const std::optional<torch::Tensor>& mask) {
    const int64_t B = x.size(0), S = x.size(1), h = n_embd / n_head;
    // One fused projection, then ONE copy to (3, B, S, H, h): q and k become contiguous, so their
    // RMSNorms take the fused kernel (a strided slice was profiled falling back to a slow composite).
    auto qkv = linear2d(c_attn, x).view({B, S, 3, n_head, h}).permute({2, 0, 1, 3, 4}).contiguous();
    auto q = q_norm(qkv[0]).transpose(1, 2);  // (B, H, S, h)
    auto k = k_norm(qkv[1]).transpose(1, 2);
    auto v = qkv[2].transpose(1, 2);
    auto y = common::attend(q, k, v, cache, layer, mask);  // (B, H, S, h)
    return linear2d(c_proj, y.transpose(1, 2).reshape({B, S, n_embd}));
  }
};
TORCH_MODULE(Attention);

struct MLPImpl : torch::nn::Module {
  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};
  explicit MLPImpl(const AoConfig& c) {
    c_fc = register_module("c_fc",
                           torch::nn::Linear(torch::nn::LinearOptions(c.n_embd, 4 * c.n_embd).bias(c.bias)));
    c_proj = register_module(
        "c_proj", torch::nn::Linear(torch::nn::LinearOptions(4 * c.n_embd, c.n_embd).bias(c.bias)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return linear2d(c_proj, torch::gelu(linear2d(c_fc, x)));  // exact erf GELU
  }
};
TORCH_MODULE(MLP);

struct BlockImpl : torch::nn::Module {
  RMSNorm ln_1{nullptr}, ln_2{nullptr};
  Attention attn{nullptr};
  MLP mlp{nullptr};
  torch::nn::Linear adaLN{nullptr};  // SiLU → Linear(cond_dim → 6d): per-token shift/scale/gate ×2
  torch::Tensor scale_ones;          // adaln_bias's constant, not a parameter
  double dropout;
  explicit BlockImpl(const AoConfig& c) : dropout(c.dropout) {
    ln_1 = register_module("ln_1", RMSNorm(c.n_embd));
    attn = register_module("attn", Attention(c));
    ln_2 = register_module("ln_2", RMSNorm(c.n_embd));
    mlp = register_module("mlp", MLP(c));
    if (c.injection == Injection::kAdaLN)
      adaLN = register_module(
          "adaLN", torch::nn::Linear(torch::nn::LinearOptions(c.cond_dim, 6 * c.n_embd).bias(c.bias)));
  }
  // x (B, S, d); silu_c (B, S, cond_dim) = SiLU(wtpe[target]) when adaLN is on.
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& silu_c, KVCache* cache, int64_t layer,
                        const std::optional<torch::Tensor>& mask) {
    auto drop = [&](const torch::Tensor& t) {
      return dropout > 0 ? torch::dropout(t, dropout, is_training()) : t;
    };
    if (!adaLN) {
      x = x + drop(attn(ln_1(x), cache, layer, mask));
      return x + drop(mlp(ln_2(x)));
    }
    // 6 × (B, S, d): β₁, 1+γ₁, α₁, β₂, 1+γ₂, α₂ (the +1 rides in the GEMM's bias: no extra pass)
    // One copy to (6, B, S, d) makes every chunk contiguous: the elementwise passes below (and their
    // backward) then run vectorized instead of on strided views of (B, S, 6d). unbind, not m[i]: its
    // backward is one stack, where six selects each build and add a zero-filled (6, B, S, d) gradient.
    const int64_t B = x.size(0), S = x.size(1), d = x.size(2);
    auto m = linear2d(adaLN, silu_c, common::adaln_bias(adaLN, 6, scale_ones))
                 .view({B, S, 6, d})
                 .permute({2, 0, 1, 3})
                 .contiguous()
                 .unbind(0);
    x = torch::addcmul(x, m[2], drop(attn(torch::addcmul(m[0], ln_1(x), m[1]), cache, layer, mask)));
    return torch::addcmul(x, m[5], drop(mlp(torch::addcmul(m[3], ln_2(x), m[4]))));
  }
};
TORCH_MODULE(Block);

struct AoGptImpl : torch::nn::Module {
  AoConfig cfg;
  torch::nn::Embedding wte{nullptr}, wpe{nullptr}, wtpe{nullptr};
  torch::Tensor wnonee;                          // (1, d) the [None] start token
  std::vector<torch::nn::Embedding> wtpe_block;  // per_block injection: one (T, d) table per block
  std::vector<Block> blocks;
  RMSNorm ln_f{nullptr};
  torch::nn::Linear adaLN_final{nullptr}, lm_head{nullptr};
  torch::Tensor scale_ones_final;  // adaln_bias's constant, not a parameter

  explicit AoGptImpl(const AoConfig& c) : cfg(c) {
    const int64_t d = c.n_embd, T = c.block_size;
    wte = register_module("wte", torch::nn::Embedding(c.padded_vocab(), d));
    wpe = register_module("wpe", torch::nn::Embedding(T + 1, d));  // row 0 = [None], row p+1 = position p
    if (c.injection != Injection::kPerBlock)
      wtpe =
          register_module("wtpe", torch::nn::Embedding(T, c.injection == Injection::kAdaLN ? c.cond_dim : d));
    wnonee = register_parameter("wnonee", torch::zeros({1, d}));
    for (int64_t l = 0; l < c.n_layer; ++l) {
      if (c.injection == Injection::kPerBlock)
        wtpe_block.push_back(register_module("wtpe_" + std::to_string(l), torch::nn::Embedding(T, d)));
      blocks.push_back(register_module("h_" + std::to_string(l), Block(c)));
    }
    ln_f = register_module("ln_f", RMSNorm(d));
    if (c.injection == Injection::kAdaLN)
      adaLN_final = register_module(
          "adaLN_final", torch::nn::Linear(torch::nn::LinearOptions(c.cond_dim, 2 * d).bias(c.bias)));
    lm_head = register_module("lm_head",
                              torch::nn::Linear(torch::nn::LinearOptions(d, c.padded_vocab()).bias(c.bias)));
    init_weights();
  }

  // Truncated normal std 0.02 at ±0.06 for every Linear and embedding (adaLN included, NOT zero);
  // c_proj weights std 0.02/√(2L) at ±3σ; biases 0; RMSNorm weights 1 (spec §1.1 "Init").
  void init_weights() {
    torch::NoGradGuard no_grad;
    for (auto& p : named_parameters()) {
      const std::string& n = p.key();
      if (p.value().dim() >= 2) {
        const bool proj = n.find("c_proj.weight") != std::string::npos;
        common::trunc_normal_(p.value(), proj ? 0.02 / std::sqrt(2.0 * cfg.n_layer) : 0.02);
      } else if (n.find("bias") != std::string::npos) {
        p.value().zero_();
      }
    }
  }

  // Target-position embedding of each slot, zero where the slot has no target (−1). (B, S, w)
  static torch::Tensor target_embedding(torch::nn::Embedding table, const torch::Tensor& targets) {
    auto e = table(targets.clamp_min(0));
    return e * targets.ge(0).unsqueeze(-1).to(e.dtype());
  }

  // logits (B, n_last, padded V) of the last n_last slots.
  torch::Tensor forward(const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask,
                        int64_t n_last) {
    return linear2d(lm_head, hidden(s, cache, mask, n_last));
  }

  // Final (modulated) hidden states (B, n_last, d) of the last n_last slots: the head's input.
  torch::Tensor hidden(const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask,
                       int64_t n_last) {
    auto is_none = s.tokens.lt(0).unsqueeze(-1);                           // (B, S, 1)
    auto tok = torch::where(is_none, wnonee, wte(s.tokens.clamp_min(0)));  // (B, S, d)
    auto x = tok + wpe(s.positions + 1);                                   // (B, S, d)
    torch::Tensor silu_c, c;
    if (cfg.injection == Injection::kAdaLN)
      silu_c = torch::silu(target_embedding(wtpe, s.targets));  // (B, S, 128)
    else if (cfg.injection != Injection::kPerBlock)
      c = target_embedding(wtpe, s.targets);  // (B, S, d)
    if (cfg.injection == Injection::kInput) x = x + c;
    if (cfg.dropout > 0) x = torch::dropout(x, cfg.dropout, is_training());
    for (size_t l = 0; l < blocks.size(); ++l) {
      if (cfg.injection == Injection::kEveryBlock) x = x + c;
      if (cfg.injection == Injection::kPerBlock) x = x + target_embedding(wtpe_block[l], s.targets);
      x = blocks[l]->forward(x, silu_c, cache, static_cast<int64_t>(l), mask);
    }
    const int64_t S = x.size(1);
    x = x.narrow(1, S - n_last, n_last);  // only the slots whose logits are needed
    auto z = ln_f(x);
    if (adaLN_final) {
      auto m = linear2d(adaLN_final, silu_c.narrow(1, S - n_last, n_last),
                        common::adaln_bias(adaLN_final, 2, scale_ones_final))
                   .chunk(2, -1);  // β, 1+γ (B, n, d)
      z = torch::addcmul(m[0], z, m[1]);
    }
    return z;
  }
};
TORCH_MODULE(AoGpt);

Injection parse_injection(const std::string& s) {
  if (s == "adaln") return Injection::kAdaLN;
  if (s == "input") return Injection::kInput;
  if (s == "every_block") return Injection::kEveryBlock;
  if (s == "per_block") return Injection::kPerBlock;
  throw ConfigError("'model.injection' = '" + s + "' is unknown",
                    "use adaln | input | every_block | per_block");
}

class AoGptPlugin : public ModelPlugin {
 public:
  PluginInfo info() const override {
    return {"ao_gpt", "0.1.0", Paradigm::kAnyOrder,
            "AO-GPT: any-order GPT, adaLN target-position conditioning, KV-cache any-order sampler"};
  }
  nlohmann::json default_config() const override {
    return nlohmann::json::parse(aobench_plugin_default_json());
  }

  void configure(const nlohmann::json& m) override {
    common::check_model_keys(m, default_config());
    AoConfig c;
    c.n_layer = common::get<int64_t>(m, "n_layer");
    c.n_head = common::get<int64_t>(m, "n_head");
    c.n_embd = common::get<int64_t>(m, "n_embd");
    c.block_size = common::get<int64_t>(m, "block_size");
    c.vocab_size = common::get<int64_t>(m, "vocab_size");
    c.cond_dim = common::get<int64_t>(m, "cond_dim");
    c.bias = common::get<bool>(m, "bias");
    c.dropout = common::get<double>(m, "dropout");
    c.injection = parse_injection(common::get<std::string>(m, "injection"));
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
    return common::any_order_flops_per_token(*net_, cfg_.n_layer, cfg_.n_embd, T);
  }
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  int64_t block_size() const override { return cfg_.block_size; }

  // Logits over the REAL vocabulary (padded ids cut, so they are never scored or sampled).
  torch::Tensor logits(const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask,
                       int64_t n_last) {
    return net_->forward(s, cache, mask, n_last).narrow(-1, 0, cfg_.vocab_size);
  }

  LossOutput loss(const TrainBatch& batch, at::Generator&) override {
    check_tokens(batch.tokens, "loss");
    TORCH_CHECK(batch.order.defined(), "ao_gpt needs batch.order (a decoder-only any-order plugin)");
    auto s = common::slots_for_order(batch.tokens, batch.order);
    auto lg = logits(s, nullptr, std::nullopt, s.tokens.size(1));  // (B, T, V)
    auto target = batch.tokens.gather(1, batch.order);             // (B, T) x_σ(k)
    LossOutput out;
    out.loss = torch::nn::functional::cross_entropy(lg.reshape({-1, lg.size(-1)}).to(torch::kFloat32),
                                                    target.reshape(-1));
    return out;
  }

  NllOutput log_prob(const torch::Tensor& tokens, const torch::Tensor& order, at::Generator&) override {
    torch::NoGradGuard no_grad;
    check_tokens(tokens, "log_prob");
    auto s = common::slots_for_order(tokens, order);
    auto z = net_->hidden(s, nullptr, std::nullopt, s.tokens.size(1));  // (B, T, d)
    const int64_t N = z.size(0) * z.size(1);
    z = z.reshape({N, z.size(-1)});                       // (N, d)
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

  SampleOutput sample(const SampleRequest& r) override {
    auto fwd = [this](const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask, int64_t n) {
      return logits(s, cache, mask, n);
    };
    return common::sample_any_order(*net_, fwd, r, cfg_.vocab_size, cfg_.block_size, /*start_slot=*/true);
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
}  // namespace aobench

AOBENCH_PLUGIN(aobench::AoGptPlugin)
