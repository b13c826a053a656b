// Implements: the DDiT transformer backbone shared by SEDD and RADD (spec-sedd-radd §1.1, §1.2).
// Token embedding (V+1)×H with mask id V, no positional table, NeoX rotary q/k, bidirectional SDPA.
// time_cond = true: adaLN blocks conditioned on σ (SEDD); false: plain pre-LN blocks, LN with bias (RADD).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include <torch/torch.h>

namespace aobench::common {

struct DDiTConfig {
  int64_t vocab_size = 257;  // V real tokens; embedding and head have V+1 rows (mask id = V)
  int64_t n_layer = 2;
  int64_t n_head = 2;
  int64_t n_embd = 64;             // H; head dim H / n_head must be even (rotary halves)
  int64_t cond_dim = 128;          // C: width of the σ conditioning vector (time_cond only)
  double dropout = 0.0;            // residual branches only, before the gate multiply
  bool time_cond = true;           // adaLN on σ (SEDD) or none (RADD)
  bool ln_bias = false;            // LayerNorm with a learned bias (RADD) or weight only (SEDD)
  bool ln_bias_init_ones = false;  // RADD reference quirk: LN bias initialised to 1
};

// Rotary tables, cached per (length, dtype, device): angles f = p·10000^(−2j/d), duplicated [f, f].
class RotaryCache {
 public:
  // (cos[f, f], sin±[−f, f]) = (cos, (−sin, sin)), (T, d) each, in `dtype` on `device`.
  std::pair<torch::Tensor, torch::Tensor> get(int64_t T, int64_t d, torch::ScalarType dtype, torch::Device device);

 private:
  std::map<std::string, std::pair<torch::Tensor, torch::Tensor>> cache_;
};

// LayerNorm with fp32 statistics, learned weight and optional bias: (.., H) → (.., H) float32, or the
// autocast dtype under autocast (one fused kernel, statistics still fp32).
struct DDiTLayerNormImpl : torch::nn::Module {
  DDiTLayerNormImpl(int64_t dim, bool bias, bool bias_init_ones);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;
  int64_t dim;
};
TORCH_MODULE(DDiTLayerNorm);

struct DDiTBlockImpl : torch::nn::Module {
  explicit DDiTBlockImpl(const DDiTConfig& c);
  // x (B, T, H); c (B, C) or undefined; cos/sin± (T, d) from RotaryCache.
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& c, const torch::Tensor& cos, const torch::Tensor& sin);
  DDiTConfig cfg;
  DDiTLayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::Linear attn_qkv{nullptr}, attn_out{nullptr}, mlp_fc{nullptr}, mlp_proj{nullptr};
  torch::nn::Linear adaLN_modulation{nullptr};  // C → 6H, zero-init (time_cond only)
};
TORCH_MODULE(DDiTBlock);

struct DDiTImpl : torch::nn::Module {
  explicit DDiTImpl(const DDiTConfig& c);
  // idx (B, T) int64 in [0, V]; sigma (B) total noise σ(t) (ignored and may be undefined when
  // !time_cond). Returns raw logits (B, T, V+1) in the activation dtype (bf16 under autocast).
  torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& sigma = {});
  // Inference on the GPU (layer_norm.h, rotary.h): the same network with each residual add, LayerNorm and adaLN
  // modulation in one kernel and the rotary of q and k in another. x (B, T, H) fp32 embeddings → the
  // head's input (B, T, H) in the activation dtype.
  torch::Tensor forward_fused(torch::Tensor x, const torch::Tensor& c, const torch::Tensor& cos,
                              const torch::Tensor& sin);
  // Parameters touched once per sequence (σ MLP, adaLN), excluded from per-token FLOPs.
  int64_t per_sequence_params() const;
  // Forward+backward FLOPs per token at context T for MFU, 6N + 12·L·H·T with N the per-token parameters:
  // every one but the input embedding (a lookup) and the per-sequence ones. SEDD's and RADD's.
  double flops_per_token(int64_t T) const;

  DDiTConfig cfg;
  torch::Tensor vocab_embed;                                 // (V+1, H)
  torch::nn::Linear sigma_fc1{nullptr}, sigma_fc2{nullptr};  // 256 → C → C (time_cond only)
  torch::nn::ModuleList blocks;
  DDiTLayerNorm norm_final{nullptr};
  torch::nn::Linear final_adaLN{nullptr};  // C → 2H, zero-init (time_cond only)
  torch::nn::Linear head{nullptr};         // H → V+1, zero-init
  RotaryCache rotary;
  torch::Tensor scale_ones_[2];  // adaln_bias caches of forward_fused (6H, 2H)
};
TORCH_MODULE(DDiT);

// 256-d sinusoidal features of σ: [cos(σ f_k), sin(σ f_k)], f_k = exp(−ln(10000)·k/128). (B) → (B, 256).
torch::Tensor sigma_features(const torch::Tensor& sigma);

}  // namespace aobench::common
