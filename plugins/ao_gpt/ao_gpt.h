// The AO-GPT network (spec-ao-gpt §1.1; docs/spec-ao-gpt.md): RMSNorm blocks with per-head QK RMSNorm and
// per-token adaLN from a target-position embedding, and the three other target-position injections of the
// paper's ablation. Each block has its readable forward (BlockImpl::forward, AoGptImpl::hidden_reference)
// beside the fused path the plugin runs (AoGptImpl::hidden); declared here so the tests reach both.
#pragma once
#include <torch/torch.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include "plugins/common/attention.h"
#include "plugins/common/embedding.h"
#include "plugins/common/init.h"
#include "plugins/common/kv_cache.h"
#include "plugins/common/linear.h"
#include "plugins/common/rms_norm.h"
#include "plugins/common/slots.h"

namespace aobench::ao_gpt {

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

// RMSNorm weight (no bias); the norms themselves run in rms_norm.h (one pass with the residual add and
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
    auto heads = [&](const torch::Tensor& t) { return t.view({B, S, n_head, h}).transpose(1, 2); };
    torch::Tensor y;                            // (B, H, S, h)
    if (common::fused_decode_step(cache, S)) {  // the QK norm runs inside the decode-attention kernel
      const common::QkNorm norm{q_norm->weight, k_norm->weight, kNormEps};
      y = common::attend(heads(qkv.select(1, 0)), heads(qkv.select(1, 1)), heads(qkv.select(1, 2)), cache, layer, mask,
                         0.0, std::nullopt, &norm);
    } else {
      auto [q, k, v] = common::qk_rms_norm(qkv, q_norm->weight, k_norm->weight, kNormEps);  // (B·S, H, h)
      y = common::attend(heads(q), heads(k), heads(v), cache, layer, mask);
    }
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
    return linear2d(c_proj, common::linear2d_gelu(c_fc, x, "none"));  // exact erf GELU
  }
};
TORCH_MODULE(MLP);

// x · rsqrt(mean(x²) + eps) · weight over the last dimension: the reference forwards' RMSNorm.
inline torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight) {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + kNormEps) * weight;
}

// One transformer block. `forward` is the block as the spec writes it; AoGptImpl::hidden runs the same
// modules in fused steps (the residual add that ends one sub-layer and the norm that starts the next are one
// kernel, the adaLN modulations are looked up per target position), and a test holds the two equal.
struct BlockImpl : torch::nn::Module {
  RMSNorm ln_1{nullptr}, ln_2{nullptr};
  Attention attn{nullptr};
  MLP mlp{nullptr};
  torch::nn::Linear adaLN{nullptr};  // SiLU → Linear(cond_dim → 6d): shift/scale/gate ×2 per target position
  double dropout = 0.0;              // on each sub-layer's output
  explicit BlockImpl(const AoConfig& c) : dropout(c.dropout) {
    ln_1 = register_module("ln_1", RMSNorm(c.n_embd));
    attn = register_module("attn", Attention(c));
    ln_2 = register_module("ln_2", RMSNorm(c.n_embd));
    mlp = register_module("mlp", MLP(c));
    if (c.injection == Injection::kAdaLN)
      adaLN =
          register_module("adaLN", torch::nn::Linear(torch::nn::LinearOptions(c.cond_dim, 6 * c.n_embd).bias(c.bias)));
  }
  // x (B, S, d) float32; silu_c (B, S, cond_dim) = SiLU(target-position embedding), undefined without adaLN.
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& silu_c, KVCache* cache, int64_t layer,
                        const std::optional<torch::Tensor>& mask) {
    const int64_t B = x.size(0), S = x.size(1), d = x.size(2);
    auto drop = [&](const torch::Tensor& t) { return dropout > 0 ? torch::dropout(t, dropout, is_training()) : t; };
    auto attend = [&](const torch::Tensor& h) { return drop(attn(h, cache, layer, mask)).view({B, S, d}); };
    auto feed = [&](const torch::Tensor& h) { return drop(mlp(h.reshape({B * S, d}))).view({B, S, d}); };
    if (!adaLN) {
      x = x + attend(rms_norm(x, ln_1->weight));
      return x + feed(rms_norm(x, ln_2->weight));
    }
    const auto m = adaLN(silu_c).chunk(6, -1);  // shift₁, scale₁, gate₁, shift₂, scale₂, gate₂: (B, S, d) each
    x = x + m[2] * attend(rms_norm(x, ln_1->weight) * (1 + m[1]) + m[0]);
    return x + m[5] * feed(rms_norm(x, ln_2->weight) * (1 + m[4]) + m[3]);
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
  torch::Tensor adaln_ones;  // (Σ out) the +1 of every scale chunk of the adaLN Linears, concatenated; a constant

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
    torch::Tensor silu_rows;  // undefined when the tables are cached (adaln_tables)
    common::RowIndex rows;
  };
  Conditioning conditioning(const torch::Tensor& targets) {
    const int64_t N = targets.numel(), T = cfg.block_size;
    const bool grouped = torch::GradMode::is_enabled() && targets.is_cuda();  // only the CUDA backward groups
    auto t = targets.reshape({N});
    if (!adaln_tables.empty()) return {{}, common::RowIndex::of(torch::where(t.ge(0), t, T), T + 1, grouped)};
    if (N > T + 1) return {silu_position_rows(), common::RowIndex::of(torch::where(t.ge(0), t, T), T + 1, grouped)};
    return {torch::silu(target_embedding(wtpe, t)), common::RowIndex::of(torch::arange(N, t.options()), N, grouped)};
  }
  // SiLU of every target position's embedding and of the zero "no target" row T: (T + 1, cond_dim).
  torch::Tensor silu_position_rows() {
    auto none = torch::zeros({1, cfg.cond_dim}, wtpe->weight.options());
    return torch::silu(torch::cat({wtpe->weight, none}));
  }

  // Every adaLN modulation of a forward from the conditioning rows silu_rows (R, cond_dim): per block
  // [β₁ | 1+γ₁] (R, 2d), α₁ (R, d), [β₂ | 1+γ₂] (R, 2d), α₂ (R, d), then the final [β | 1+γ] (R, 2d), as
  // column blocks of ONE GEMM over the adaLN Linears concatenated (one launch forward and one backward, not
  // n_layer + 1 small ones). Outside autocast, fp32 out: bf16 would resolve 1 + γ near 1 only in steps of
  // 2⁻⁷. Under bf16 autocast on CUDA the GEMM takes bf16 operands with fp32 accumulation
  // (linear_bf16_operands), as fast as the other bf16 GEMMs; elsewhere it is fp32. The scale chunks carry
  // their +1 in the bias.
  std::vector<torch::Tensor> adaln_pieces(const torch::Tensor& silu_rows) {
    const int64_t d = cfg.n_embd;
    const bool bf16_operands = silu_rows.is_cuda() && at::autocast::is_autocast_enabled(at::kCUDA) &&
                               at::autocast::get_autocast_dtype(at::kCUDA) == torch::kBFloat16 &&
                               silu_rows.scalar_type() == torch::kFloat32 &&
                               adaLN_final->weight.scalar_type() == torch::kFloat32;
    const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    std::vector<torch::Tensor> weights, biases;
    std::vector<int64_t> widths;
    for (auto& blk : blocks) {
      weights.push_back(blk->adaLN->weight);
      if (cfg.bias) biases.push_back(blk->adaLN->bias);
      widths.insert(widths.end(), {2 * d, d, 2 * d, d});
    }
    weights.push_back(adaLN_final->weight);
    if (cfg.bias) biases.push_back(adaLN_final->bias);
    widths.push_back(2 * d);
    const auto w = torch::cat(weights);  // (Σ out, cond_dim)
    if (!adaln_ones.defined() || adaln_ones.device() != w.device() || adaln_ones.dtype() != w.dtype()) {
      std::vector<torch::Tensor> ones(blocks.size(), common::adaln_scale_ones(6, d, w.options()));
      ones.push_back(common::adaln_scale_ones(2, d, w.options()));
      adaln_ones = torch::cat(ones);
    }
    const auto b = cfg.bias ? torch::cat(biases) + adaln_ones : adaln_ones;  // (Σ out)
    const auto table = bf16_operands ? common::linear_bf16_operands(silu_rows, w, b)
                                     : torch::nn::functional::linear(silu_rows, w, b);  // (R, Σ out)
    return table.split_with_sizes(widths, 1);
  }

  // For a sampler's scope (AdaLNTableScope): adaln_pieces over all target positions and the "no target" row,
  // computed once, so a decode step looks its rows up instead of running the adaLN GEMM. Empty otherwise
  // (training always recomputes).
  std::vector<torch::Tensor> adaln_tables;
  void cache_adaln_tables() {
    adaln_tables.clear();
    if (cfg.injection != Injection::kAdaLN) return;
    torch::NoGradGuard no_grad;
    adaln_tables = adaln_pieces(silu_position_rows());
  }

  // logits (B, n_last, padded V) of the last n_last slots.
  torch::Tensor forward(const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask, int64_t n_last) {
    return linear2d(lm_head, hidden(s, cache, mask, n_last));
  }

  // hidden() written plainly, block by block (BlockImpl::forward): the reference the fused path is tested
  // against. (B, n_last, d).
  torch::Tensor hidden_reference(const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask,
                                 int64_t n_last) {
    const int64_t S = s.tokens.size(1);
    auto drop = [&](const torch::Tensor& t) {
      return cfg.dropout > 0 ? torch::dropout(t, cfg.dropout, is_training()) : t;
    };
    auto tok = torch::where(s.tokens.lt(0).unsqueeze(-1), wnonee, wte(s.tokens.clamp_min(0)));  // (B, S, d)
    auto x = tok + wpe(s.positions + 1);
    torch::Tensor silu_c, c;  // (B, S, cond_dim) for adaLN; (B, S, d) for the input / every_block variants
    if (cfg.injection == Injection::kAdaLN) silu_c = torch::silu(target_embedding(wtpe, s.targets));
    if (cfg.injection == Injection::kInput || cfg.injection == Injection::kEveryBlock)
      c = target_embedding(wtpe, s.targets);
    if (cfg.injection == Injection::kInput) x = x + c;
    x = drop(x);
    for (size_t l = 0; l < blocks.size(); ++l) {
      if (cfg.injection == Injection::kEveryBlock) x = x + c;
      if (cfg.injection == Injection::kPerBlock) x = x + target_embedding(wtpe_block[l], s.targets);
      x = blocks[l]->forward(x, silu_c, cache, static_cast<int64_t>(l), mask);
    }
    x = rms_norm(x, ln_f->weight);
    if (cfg.injection == Injection::kAdaLN) {
      const auto m = adaLN_final(silu_c).chunk(2, -1);  // shift, scale
      x = x * (1 + m[1]) + m[0];
    }
    return x.narrow(1, S - n_last, n_last);
  }

  // Final (modulated) hidden states (B, n_last, d) of the last n_last slots: the head's input.
  // The residual stream x (N, d) float32 runs through fused steps (rms_norm.h): each sub-layer's output
  // waits as `pending` (with its adaLN gate) and is added inside the next step, which also computes that
  // step's RMSNorm and modulation.
  torch::Tensor hidden(const Slots& s, KVCache* cache, const std::optional<torch::Tensor>& mask, int64_t n_last) {
    const int64_t B = s.tokens.size(0), S = s.tokens.size(1), d = cfg.n_embd, N = B * S;
    auto drop = [&](const torch::Tensor& t) {
      return cfg.dropout > 0 ? torch::dropout(t, cfg.dropout, is_training()) : t;
    };
    const bool adaln = cfg.injection == Injection::kAdaLN;
    Conditioning cond;
    std::vector<torch::Tensor> mods;  // adaln_pieces: four per block, then the final one
    torch::Tensor c;                  // (B, S, d) full-width target embedding of the input / every_block variants
    if (adaln) {
      cond = conditioning(s.targets);
      mods = adaln_tables.empty() ? adaln_pieces(cond.silu_rows) : adaln_tables;
    } else if (cfg.injection != Injection::kPerBlock)
      c = target_embedding(wtpe, s.targets);
    // [None] or the token's row, plus the position's (row 0 is [None]'s): one kernel on a GPU without gradient.
    // After the row index, so that a kernel launched in stream order lies between the index's writer and the
    // first rms_step, which reads it before its wait (decode_scope.h).
    auto x = common::embed_sum(wte->weight, s.tokens, wnonee, wpe->weight, s.positions, 1);  // (B, S, d)
    if (cfg.injection == Injection::kInput) x = x + c;
    x = drop(x).reshape({N, d});
    torch::Tensor pending, pending_gate;  // the last sub-layer's output (N, d), not yet added; its gate (R, d)
    for (size_t l = 0; l < blocks.size(); ++l) {
      auto& blk = blocks[l];
      common::StepTables pre_attn, pre_mlp;
      torch::Tensor gate_mlp;
      if (adaln) {
        const auto* m = &mods[4 * l];  // [β₁ | 1+γ₁], α₁, [β₂ | 1+γ₂], α₂
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
      final_tables = {pending_gate, mods.back()};  // [β | 1+γ]
      if (n_last != S)
        rows =
            common::RowIndex::of(last(rows.idx.view({N, 1})).view({B * n_last}), rows.table_rows, rows.order.defined());
    }
    auto z = common::rms_step(last(x), last(pending), ln_f->weight, final_tables, rows, kNormEps).second;
    return z.view({B, n_last, d});
  }
};
TORCH_MODULE(AoGpt);

}  // namespace aobench::ao_gpt
