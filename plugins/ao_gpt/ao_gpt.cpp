// Implements: the AO-GPT plugin, spec-ao-gpt §1.1 (model_AOGPT_AdaLN6_NoRep_cond_128_trunc_qknorm): RMSNorm,
// per-head QK RMSNorm, per-token adaLN from a 128-d target-position embedding, untied lm_head with bias,
// truncated-normal init; loss = mean CE over all B·T chain predictions (§1.1 "Loss"); KV-cache any-order
// sampler (§4.2, plugins/common). `injection` selects the paper's target-position ablation (a)–(d).
// The norms run as fused steps with CUDA forward and backward kernels (fused_norms.h), and the adaLN
// modulations are computed once per target position and looked up per slot.
#include <cmath>

#include <c10/core/impl/LocalDispatchKeySet.h>

#include "core/errors.h"
#include "core/plugin_api.h"
#include "plugins/common/any_order_sampler.h"
#include "plugins/common/attention.h"
#include "plugins/common/config_checks.h"
#include "plugins/common/flops.h"
#include "plugins/common/fused_norms.h"
#include "plugins/common/fused_ops.h"
#include "plugins/common/init.h"
#include "plugins/common/kv_cache.h"
#include "plugins/common/slots.h"

namespace aobench {
namespace {

using common::KVCache;
using common::linear2d;
using common::Slots;

enum class Injection { kAdaLN, kInput, kEveryBlock, kPerBlock };

struct AoConfig {
  int64_t n_layer = 2, n_head = 2, n_embd = 64, block_size = 128, vocab_size = 257, cond_dim = 128;
  bool bias = true;
  double dropout = 0.0;
  Injection injection = Injection::kAdaLN;
  int64_t padded_vocab() const { return common::padded_vocab(vocab_size); }
};

constexpr double kNormEps = 1e-5;  // every RMSNorm (spec §1.1)

// RMSNorm weight (no bias); the norms themselves run in fused_norms (one pass with the residual add and
// the adaLN modulation, or per head for q and k).
struct RMSNormImpl : torch::nn::Module {
  torch::Tensor weight;
  explicit RMSNormImpl(int64_t n) { weight = register_parameter("weight", torch::ones({n})); }
};
TORCH_MODULE(RMSNorm);

struct AttentionImpl : torch::nn::Module {
  torch::nn::Linear c_attn{nullptr}, c_proj{nullptr};
  RMSNorm q_norm{nullptr}, k_norm{nullptr};  // one head-dim weight shared by all heads
  int64_t n_head, n_embd;
  explicit AttentionImpl(const AoConfig& c) : n_head(c.n_head), n_embd(c.n_embd) {
    c_attn = register_module("c_attn", torch::nn::Linear(torch::nn::LinearOptions(n_embd, 3 * n_embd).bias(c.bias)));
    c_proj = register_module("c_proj", torch::nn::Linear(torch::nn::LinearOptions(n_embd, n_embd).bias(c.bias)));
    q_norm = register_module("q_norm", RMSNorm(n_embd / n_head));
    k_norm = register_module("k_norm", RMSNorm(n_embd / n_head));
  }
  // x (B, S, d) → (B, S, d)
  torch::Tensor forward(const torch::Tensor& x, KVCache* cache, int64_t layer,
                        const std::optional<torch::Tensor>& mask) {
    const int64_t B = x.size(0), S = x.size(1), h = n_embd / n_head;
    auto qkv = linear2d(c_attn, x).view({B * S, 3, n_head, h});
    auto [q, k, v] = common::qk_rms_norm(qkv, q_norm->weight, k_norm->weight, kNormEps);  // (B·S, H, h)
    auto heads = [&](const torch::Tensor& t) { return t.view({B, S, n_head, h}).transpose(1, 2); };
    auto y = common::attend(heads(q), heads(k), heads(v), cache, layer, mask);  // (B, H, S, h)
    return linear2d(c_proj, y.transpose(1, 2).reshape({B, S, n_embd}));
  }
};
TORCH_MODULE(Attention);

struct MLPImpl : torch::nn::Module {
  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};
  explicit MLPImpl(const AoConfig& c) {
    c_fc = register_module("c_fc", torch::nn::Linear(torch::nn::LinearOptions(c.n_embd, 4 * c.n_embd).bias(c.bias)));
    c_proj =
        register_module("c_proj", torch::nn::Linear(torch::nn::LinearOptions(4 * c.n_embd, c.n_embd).bias(c.bias)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return linear2d(c_proj, torch::gelu(linear2d(c_fc, x)));  // exact erf GELU
  }
};
TORCH_MODULE(MLP);

// One transformer block's modules; AoGptImpl::hidden runs them, so the residual add that ends one sub-layer
// and the norm that starts the next are one fused step.
struct BlockImpl : torch::nn::Module {
  RMSNorm ln_1{nullptr}, ln_2{nullptr};
  Attention attn{nullptr};
  MLP mlp{nullptr};
  torch::nn::Linear adaLN{nullptr};  // SiLU → Linear(cond_dim → 6d): shift/scale/gate ×2 per target position
  torch::Tensor scale_ones;          // adaln_bias's constant, not a parameter
  explicit BlockImpl(const AoConfig& c) {
    ln_1 = register_module("ln_1", RMSNorm(c.n_embd));
    attn = register_module("attn", Attention(c));
    ln_2 = register_module("ln_2", RMSNorm(c.n_embd));
    mlp = register_module("mlp", MLP(c));
    if (c.injection == Injection::kAdaLN)
      adaLN =
          register_module("adaLN", torch::nn::Linear(torch::nn::LinearOptions(c.cond_dim, 6 * c.n_embd).bias(c.bias)));
  }
};
TORCH_MODULE(Block);

// adaLN modulation table (R, parts·d) float32 of a Linear on the conditioning rows silu_rows (R, cond_dim),
// outside autocast: R ≤ T + 1 rows cost little, and bf16 would resolve 1 + γ near 1 only in steps of 2⁻⁷.
// The scale chunks carry their +1 in the bias (adaln_bias).
torch::Tensor adaln_table(const torch::nn::Linear& l, const torch::Tensor& silu_rows, int64_t parts,
                          torch::Tensor& ones) {
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  return torch::nn::functional::linear(silu_rows, l->weight, common::adaln_bias(l, parts, ones));
}

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
      wtpe = register_module("wtpe", torch::nn::Embedding(T, c.injection == Injection::kAdaLN ? c.cond_dim : d));
    wnonee = register_parameter("wnonee", torch::zeros({1, d}));
    for (int64_t l = 0; l < c.n_layer; ++l) {
      if (c.injection == Injection::kPerBlock)
        wtpe_block.push_back(register_module("wtpe_" + std::to_string(l), torch::nn::Embedding(T, d)));
      blocks.push_back(register_module("h_" + std::to_string(l), Block(c)));
    }
    ln_f = register_module("ln_f", RMSNorm(d));
    if (c.injection == Injection::kAdaLN)
      adaLN_final =
          register_module("adaLN_final", torch::nn::Linear(torch::nn::LinearOptions(c.cond_dim, 2 * d).bias(c.bias)));
    lm_head = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(d, c.padded_vocab()).bias(c.bias)));
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

  // The adaLN conditioning depends on the target position only, so the modulations are computed per
  // table row, not per slot: silu_rows (R, cond_dim) = SiLU(wtpe[row]), and `rows` maps each of the N = B·S
  // slots to its row. With more slots than positions (training, evaluation) the rows are the T positions
  // plus a zero "no target" row T; with fewer (a sampling step) they are the slots' own.
  struct Conditioning {
    torch::Tensor silu_rows;
    common::RowIndex rows;
  };
  Conditioning conditioning(const torch::Tensor& targets) {
    const int64_t N = targets.numel(), T = cfg.block_size;
    const bool grouped = torch::GradMode::is_enabled() && targets.is_cuda();  // only the CUDA backward groups
    auto t = targets.reshape({N});
    if (N > T + 1) {
      auto none = torch::zeros({1, cfg.cond_dim}, wtpe->weight.options());
      return {torch::silu(torch::cat({wtpe->weight, none})),
              common::RowIndex::of(torch::where(t.ge(0), t, T), T + 1, grouped)};
    }
    return {torch::silu(target_embedding(wtpe, t)), common::RowIndex::of(torch::arange(N, t.options()), N, grouped)};
  }

  // logits (B, n_last, padded V) of the last n_last slots.
  torch::Tensor forward(const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask, int64_t n_last) {
    return linear2d(lm_head, hidden(s, cache, mask, n_last));
  }

  // Final (modulated) hidden states (B, n_last, d) of the last n_last slots: the head's input.
  // The residual stream x (N, d) float32 runs through fused steps (fused_norms.h): each sub-layer's output
  // waits as `pending` (with its adaLN gate) and is added inside the next step, which also computes that
  // step's RMSNorm and modulation.
  torch::Tensor hidden(const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask, int64_t n_last) {
    const int64_t B = s.tokens.size(0), S = s.tokens.size(1), d = cfg.n_embd, N = B * S;
    auto drop = [&](const torch::Tensor& t) {
      return cfg.dropout > 0 ? torch::dropout(t, cfg.dropout, is_training()) : t;
    };
    auto is_none = s.tokens.lt(0).unsqueeze(-1);                           // (B, S, 1)
    auto tok = torch::where(is_none, wnonee, wte(s.tokens.clamp_min(0)));  // (B, S, d)
    auto x = tok + wpe(s.positions + 1);                                   // (B, S, d)
    const bool adaln = cfg.injection == Injection::kAdaLN;
    Conditioning cond;
    torch::Tensor c;  // (B, S, d) full-width target embedding of the input / every_block variants
    if (adaln)
      cond = conditioning(s.targets);
    else if (cfg.injection != Injection::kPerBlock)
      c = target_embedding(wtpe, s.targets);
    if (cfg.injection == Injection::kInput) x = x + c;
    x = drop(x).reshape({N, d});
    torch::Tensor pending, pending_gate;  // the last sub-layer's output (N, d), not yet added; its gate (R, d)
    for (size_t l = 0; l < blocks.size(); ++l) {
      auto& blk = blocks[l];
      common::StepTables pre_attn, pre_mlp;
      torch::Tensor gate_mlp;
      if (adaln) {
        // (R, 6d) = [β₁ | 1+γ₁ | α₁ | β₂ | 1+γ₂ | α₂]; one split node, so the backward is one cat.
        auto m = adaln_table(blk->adaLN, cond.silu_rows, 6, blk->scale_ones).split_with_sizes({2 * d, d, 2 * d, d}, 1);
        pre_attn = {pending_gate, m[0]};
        pre_mlp = {m[1], m[2]};
        gate_mlp = m[3];
      }
      torch::Tensor extra;  // every_block / per_block: a target embedding added before the block
      if (cfg.injection == Injection::kEveryBlock) extra = c;
      if (cfg.injection == Injection::kPerBlock) extra = target_embedding(wtpe_block[l], s.targets);
      if (extra.defined()) {
        if (pending.defined()) x = x + pending;
        pending = torch::Tensor();
        x = x + extra.reshape({N, d});
      }
      torch::Tensor h;
      std::tie(x, h) = common::rms_step(x, pending, blk->ln_1->weight, pre_attn, cond.rows, kNormEps);
      auto a = drop(blk->attn(h.view({B, S, d}), cache, static_cast<int64_t>(l), mask)).view({N, d});
      std::tie(x, h) = common::rms_step(x, a, blk->ln_2->weight, pre_mlp, cond.rows, kNormEps);
      pending = drop(blk->mlp(h));
      pending_gate = gate_mlp;
    }
    // The last residual add, ln_f and the final adaLN on the last n_last slots of each sequence only.
    auto last = [&](const torch::Tensor& t) {  // (B·S, ·) → (B·n_last, ·)
      if (!t.defined() || n_last == S) return t;
      return t.view({B, S, -1}).narrow(1, S - n_last, n_last).reshape({B * n_last, -1});
    };
    common::StepTables final_tables;
    common::RowIndex rows = cond.rows;
    if (adaln) {
      // [β | 1+γ]
      final_tables = {pending_gate, adaln_table(adaLN_final, cond.silu_rows, 2, scale_ones_final)};
      if (n_last != S)
        rows =
            common::RowIndex::of(last(rows.idx.view({N, 1})).view({B * n_last}), rows.table_rows, rows.order.defined());
    }
    auto z = common::rms_step(last(x), last(pending), ln_f->weight, final_tables, rows, kNormEps).second;
    return z.view({B, n_last, d});
  }
};
TORCH_MODULE(AoGpt);

Injection parse_injection(const std::string& s) {
  if (s == "adaln") return Injection::kAdaLN;
  if (s == "input") return Injection::kInput;
  if (s == "every_block") return Injection::kEveryBlock;
  if (s == "per_block") return Injection::kPerBlock;
  throw ConfigError("'model.injection' = '" + s + "' is unknown", "use adaln | input | every_block | per_block");
}

class AoGptPlugin : public ModelPlugin {
 public:
  PluginInfo info() const override {
    Capabilities caps;
    caps.any_order = caps.chain_log_probs = caps.prefix_prompt = caps.infill = true;
    return {"ao_gpt", "0.1.0", Paradigm::kAnyOrder,
            "AO-GPT: any-order GPT, adaLN target-position conditioning, KV-cache any-order sampler", caps};
  }

  void configure(const nlohmann::json& model) override {
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
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  int64_t block_size() const override { return cfg_.block_size; }

  // Logits over the REAL vocabulary (padded ids cut, so they are never scored or sampled).
  torch::Tensor logits(const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask, int64_t n_last) {
    return net_->forward(s, cache, mask, n_last).narrow(-1, 0, cfg_.vocab_size);
  }

  LossOutput loss(const TrainBatch& batch, at::Generator&) override {
    check_tokens(batch.tokens, "loss");
    TORCH_CHECK(batch.order.defined(), "ao_gpt needs batch.order (a decoder-only any-order plugin)");
    auto s = common::slots_for_order(batch.tokens, batch.order);
    auto lg = net_->forward(s, nullptr, std::nullopt, s.tokens.size(1));  // (B, T, V_pad)
    auto target = batch.tokens.gather(1, batch.order);                    // (B, T) x_σ(k)
    LossOutput out;
    out.loss = common::lm_cross_entropy(lg.reshape({-1, lg.size(-1)}), target.reshape(-1), cfg_.vocab_size);
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

  SampleOutput sample(const SampleRequest& r) override {
    check_sample_request(info(), r);
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
}  // namespace aobench

AOBENCH_PLUGIN(aobench::AoGptPlugin)
