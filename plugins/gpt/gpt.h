// Implements: the GPT plugin — nanoGPT-shaped GPT-2 trained and scored left to right
// (spec-ao-gpt §1.4, §8):
// padded tied wte, learned wpe, pre-norm LayerNorm blocks, fused c_attn + causal SDPA, GELU MLP, ln_f.
// Optional [None] start slot (AO-GPT's wnonee) so all T tokens are scored; exact HF GPT-2 weight loading.
// Declared here so plugins/gpt/gpt_test.cpp can reach the network and the reference (cache-free) sampler.
#pragma once
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/plugin_api.h"
#include "plugins/common/init.h"
#include "plugins/common/kv_cache.h"

namespace aobench::gpt {

struct GptConfig {
  int64_t n_layer = 2, n_head = 2, n_embd = 64;
  int64_t n_inner = 0;       // MLP width; 0 = 4·n_embd (HF config.json "n_inner": null)
  int64_t block_size = 128;  // max tokens per sequence
  int64_t vocab_size = 257;  // real vocabulary; wte has padded_vocab() rows
  double dropout = 0.0;
  bool bias = true;
  std::string activation = "gelu";  // "gelu" (erf) | "gelu_tanh" (HF gelu_new)
  bool start_token = false;
  std::string init_from_hf;  // HF GPT-2 folder or ""
  double ln_eps = 1e-5;      // from HF config.json layer_norm_epsilon; nanoGPT uses 1e-5 too
  // Attention score scale of HF GPT-2 (config.json only): 1/sqrt(head_dim) unless scale_attn_weights is
  // false, further divided by (layer index + 1) with scale_attn_by_inverse_layer_idx.
  bool scale_attn_weights = true, scale_attn_by_inverse_layer_idx = false;
  int64_t padded_vocab() const { return common::padded_vocab(vocab_size); }
  int64_t mlp_width() const { return n_inner > 0 ? n_inner : 4 * n_embd; }
  double attn_scale(int64_t layer) const;
};

// LayerNorm with an optional bias (nanoGPT: GPT-2 has biases, bias=false is slightly better and faster).
struct LayerNormImpl : torch::nn::Module {
  LayerNormImpl(int64_t d, bool bias, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;
  double eps;
};
TORCH_MODULE(LayerNorm);

struct BlockImpl : torch::nn::Module {
  BlockImpl(const GptConfig& c, int64_t layer);
  // The block as nanoGPT writes it, the reference: x (B, S, d) → x + attn(ln_1(x)), then + mlp(ln_2(·)).
  // With a cache, the S new slots attend to the cached ones and are appended to it (layer `layer`).
  torch::Tensor forward(const torch::Tensor& x, common::KVCache* cache = nullptr, int64_t layer = 0);
  // The same block as GptImpl::hidden runs it: each residual add fused with the LayerNorm that reads its
  // result (common::add_layer_norm: a CUDA kernel with a backward in training, AOBENCH_FUSED_LN), so
  // a = ln_1(x) comes in from the previous block and (x', next_ln(x')) goes out, next_ln being the next
  // block's ln_1 or ln_f. Numerically forward() on CPU (tested); one memory pass less per add on the GPU.
  std::pair<torch::Tensor, torch::Tensor> forward_fused(const torch::Tensor& x, const torch::Tensor& a,
                                                        const LayerNorm& next_ln, common::KVCache* cache,
                                                        int64_t layer);
  // The sub-layers on normalised input a (B, S, d), dropout included: → (B, S, d).
  torch::Tensor self_attention(const torch::Tensor& a, common::KVCache* cache, int64_t layer);
  torch::Tensor feed_forward(const torch::Tensor& a);
  GptConfig cfg;
  double attn_scale;  // softmax(q·kᵀ · attn_scale): cfg.attn_scale(layer)
  LayerNorm ln_1{nullptr}, ln_2{nullptr};
  torch::nn::Linear c_attn{nullptr}, attn_proj{nullptr}, c_fc{nullptr}, mlp_proj{nullptr};
};
TORCH_MODULE(Block);

// Parameter names follow HF/nanoGPT minus the "transformer." prefix: wte.weight, wpe.weight,
// h.N.ln_1.weight, h.N.attn.c_attn.weight, h.N.mlp.c_proj.weight, ln_f.weight, (wnonee).
struct GptImpl : torch::nn::Module {
  explicit GptImpl(const GptConfig& c);
  // Hidden states of the slots for input ids (B, S). Slots are numbered from `pos0` (the cache length).
  // With start_token and pos0 == 0 a [None] slot is prepended, so S+1 slots come out.  // (B, S', d)
  torch::Tensor hidden(const torch::Tensor& ids, common::KVCache* cache = nullptr);
  // Logits over the REAL vocabulary (padded columns dropped).  // (B, S', V)
  torch::Tensor logits(const torch::Tensor& ids, common::KVCache* cache = nullptr);
  GptConfig cfg;
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::Tensor wnonee;  // (1, d), only with start_token
  // logits()' head weight when defined: wte's weight cast once for a sampler's scope (common::autocast_copy),
  // instead of by autocast at every decode step. Not a parameter.
  torch::Tensor head_cast;
  torch::nn::ModuleList h;
  LayerNorm ln_f{nullptr};
  torch::nn::Dropout drop{nullptr};
};
TORCH_MODULE(Gpt);

class GptPlugin : public ModelPlugin, public Scoring, public Sampling {
 public:
  Scoring* scoring() override { return this; }
  Sampling* sampling() override { return this; }
  PluginInfo info() const override;
  void configure_model(const nlohmann::json& model_config) override;
  nlohmann::json resolved_model_config(const nlohmann::json& model_config) const override;
  void build(torch::Device device) override;
  torch::nn::Module& module() override;
  double flops_per_token(int64_t T) const override;
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  int64_t block_size() const override { return cfg_.block_size; }
  LossOutput loss(const TrainBatch& batch, at::Generator& gen) override;
  NllOutput log_prob(const torch::Tensor& tokens, const torch::Tensor& order, at::Generator& gen) override;

  // use_cache = false recomputes the whole prefix every step: the reference the KV-cache path must match.
  // use_cache = true: static KV cache, decode steps replayed from CUDA graphs on the GPU (cuda_graph.h).
  SampleOutput sample_impl(const SampleRequest& request, bool use_cache);
  const GptConfig& config() const { return cfg_; }
  Gpt& net() { return net_; }

 protected:
  SampleOutput generate(const SampleRequest& request) override;  // checked by ModelPlugin::sample

 private:
  void load_hf_weights(const std::string& dir);
  GptConfig cfg_;
  bool configured_ = false;
  Gpt net_{nullptr};
  torch::Device device_ = torch::kCPU;
};

}  // namespace aobench::gpt
