// Implements: the DDiT backbone (spec-sedd-radd §1.1): rotary (NeoX rotate-half, base 10000),
// adaLN-modulated or plain pre-LN blocks, fp32 LayerNorm statistics, zero-init modulation and head.
// Everything is batched tensor code: fused qkv, one SDPA call per block, rotary cached per length.
#include "plugins/common/ddit_backbone.h"
#include "plugins/common/kernel_util.h"
#include "plugins/common/layer_norm.h"
#include "plugins/common/linear.h"
#include "plugins/common/rotary.h"

#include <cmath>

#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace aobench::common {
namespace F = torch::nn::functional;

std::pair<torch::Tensor, torch::Tensor> RotaryCache::get(int64_t T, int64_t d, torch::ScalarType dtype,
                                                         torch::Device device) {
  std::string key = std::to_string(T) + "/" + std::to_string(d) + "/" + c10::toString(dtype) + "/" + device.str();
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  auto opt = torch::TensorOptions().dtype(torch::kFloat64);
  auto inv_freq = torch::pow(10000.0, -torch::arange(0, d, 2, opt) / double(d));  // (d/2)
  auto angles = torch::outer(torch::arange(T, opt), inv_freq);                    // (T, d/2)
  auto cos = torch::cat({angles, angles}, -1).cos();                              // (T, d)
  auto sin_signed = torch::cat({-angles, angles}, -1).sin();                      // (−sin, sin) (T, d)
  auto entry = std::make_pair(cos.to(device, dtype), sin_signed.to(device, dtype));
  cache_[key] = entry;
  return entry;
}

DDiTLayerNormImpl::DDiTLayerNormImpl(int64_t dim_, bool with_bias, bool bias_init_ones) : dim(dim_) {
  weight = register_parameter("weight", torch::ones({dim}));
  if (with_bias) bias = register_parameter("bias", bias_init_ones ? torch::ones({dim}) : torch::zeros({dim}));
}

torch::Tensor DDiTLayerNormImpl::forward(const torch::Tensor& x) {
  const auto dev = x.device().type();
  if (at::autocast::is_autocast_enabled(dev)) {
    // Under autocast one fused kernel keeps the statistics in fp32 and writes the activation dtype that the
    // next Linear reads anyway (instead of an fp32 output, separate weight/bias/modulation passes in fp32
    // and a cast). Autocast is bypassed here because it would force layer_norm to fp32 output.
    const auto dt = at::autocast::get_autocast_dtype(dev);
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    auto b = bias.defined() ? bias.to(dt) : torch::Tensor();
    return torch::layer_norm(x.to(dt), {dim}, weight.to(dt), b);
  }
  // Statistics in fp32 whatever the activation dtype (the reference disables autocast here).
  auto y = torch::layer_norm(x.to(torch::kFloat32), {dim});
  y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

// NeoX rotate-half x·cos + (−x2, x1)·sin on the two halves of the head dim, as three passes: the halves
// swapped by one cat, the sign carried by sin± = (−sin, sin). x (.., T, d); cos, sin± (T, d).
static torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin_signed) {
  const int64_t h = x.size(-1) / 2;
  auto swapped = torch::cat({x.narrow(-1, h, h), x.narrow(-1, 0, h)}, -1);  // (x2, x1)
  return torch::addcmul(x * cos, swapped, sin_signed);
}

static torch::nn::Linear zero_linear(int64_t in, int64_t out, bool bias = true) {
  torch::nn::Linear l(torch::nn::LinearOptions(in, out).bias(bias));
  torch::NoGradGuard ng;
  l->weight.zero_();
  if (bias) l->bias.zero_();
  return l;
}

DDiTBlockImpl::DDiTBlockImpl(const DDiTConfig& c) : cfg(c) {
  const int64_t H = c.n_embd;
  norm1 = register_module("norm1", DDiTLayerNorm(H, c.ln_bias, c.ln_bias_init_ones));
  norm2 = register_module("norm2", DDiTLayerNorm(H, c.ln_bias, c.ln_bias_init_ones));
  attn_qkv = register_module("attn_qkv", torch::nn::Linear(torch::nn::LinearOptions(H, 3 * H).bias(false)));
  attn_out = register_module("attn_out", torch::nn::Linear(torch::nn::LinearOptions(H, H).bias(false)));
  mlp_fc = register_module("mlp_fc", torch::nn::Linear(H, 4 * H));
  mlp_proj = register_module("mlp_proj", torch::nn::Linear(4 * H, H));
  if (c.time_cond) adaLN_modulation = register_module("adaLN_modulation", zero_linear(c.cond_dim, 6 * H));
}

torch::Tensor DDiTBlockImpl::forward(torch::Tensor x, const torch::Tensor& c, const torch::Tensor& cos,
                                     const torch::Tensor& sin) {
  const int64_t B = x.size(0), T = x.size(1), H = cfg.n_embd, nh = cfg.n_head, d = H / nh;
  const bool drop = is_training() && cfg.dropout > 0;
  std::vector<torch::Tensor> mod;  // shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp
  if (cfg.time_cond) mod = adaLN_modulation->forward(c).unsqueeze(1).chunk(6, -1);  // 6 × (B, 1, H)

  // Attention branch.
  auto a = norm1->forward(x);  // (B, T, H) fp32; the autocast dtype under autocast
  if (cfg.time_cond) a = torch::addcmul(mod[0], a, 1 + mod[1]);
  auto qkv = linear2d(attn_qkv, a).view({B, T, 3, nh, d}).permute({2, 0, 3, 1, 4});  // (3, B, h, T, d)
  auto qk = apply_rotary(qkv.narrow(0, 0, 2), cos, sin);  // q and k in one set of passes (2, B, h, T, d)
  auto q = qk[0], k = qk[1], v = qkv[2];
  auto o = at::scaled_dot_product_attention(q, k, v);            // (B, h, T, d)
  o = linear2d(attn_out, o.transpose(1, 2).reshape({B, T, H}));  // (B, T, H)
  if (drop) o = F::dropout(o, F::DropoutFuncOptions().p(cfg.dropout).training(true));
  x = cfg.time_cond ? torch::addcmul(x, mod[2], o) : x + o;

  // MLP branch.
  auto m = norm2->forward(x);
  if (cfg.time_cond) m = torch::addcmul(mod[3], m, 1 + mod[4]);
  m = linear2d(mlp_proj, linear2d_gelu(mlp_fc, m, "tanh"));
  if (drop) m = F::dropout(m, F::DropoutFuncOptions().p(cfg.dropout).training(true));
  return cfg.time_cond ? torch::addcmul(x, mod[5], m) : x + m;
}

torch::Tensor DDiTImpl::forward_fused(torch::Tensor x, const torch::Tensor& c, const torch::Tensor& cos,
                                      const torch::Tensor& sin) {
  const int64_t B = x.size(0), T = x.size(1), H = cfg.n_embd, nh = cfg.n_head, d = H / nh;
  const int64_t L = static_cast<int64_t>(blocks->size());
  // adaLN vectors (B, H) each, column slices of one Linear output per block: shift/scale/gate of attention
  // then MLP, then the final shift/scale. The scales' 1 + rides in the Linear's bias, so a block costs one
  // small GEMM and no elementwise pass. All undefined without time conditioning (RADD).
  auto split = [&](torch::nn::Linear l, int64_t parts) {
    std::vector<torch::Tensor> v(parts);
    if (!cfg.time_cond) return v;
    auto m = F::linear(c, l->weight, adaln_bias(l, parts, scale_ones_[parts == 6 ? 0 : 1]));  // (B, parts·H)
    for (int64_t k = 0; k < parts; ++k) v[k] = m.narrow(1, k * H, H);
    return v;
  };
  std::vector<std::vector<torch::Tensor>> mods;
  for (auto& b : *blocks) mods.push_back(split(b->as<DDiTBlockImpl>()->adaLN_modulation, 6));
  const auto fin = split(final_adaLN, 2);
  auto block = [&](int64_t i) { return blocks[i]->as<DDiTBlockImpl>(); };
  torch::Tensor h;  // the next Linear's input: modulated LayerNorm of the stream x
  std::tie(x, h) =
      add_layer_norm(x, {}, block(0)->norm1->weight, block(0)->norm1->bias, 1e-5, {{}, mods[0][1], mods[0][0]});
  for (int64_t i = 0; i < L; ++i) {
    auto* b = block(i);
    const auto& m = mods[i];  // shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp
    auto qkv = linear2d(b->attn_qkv, h).view({B, T, 3, nh, d});  // contiguous (B, T, 3, nh, d)
    auto qk = rotary_qk(qkv, cos, sin);                          // (2, B, T, nh, d)
    auto o = at::scaled_dot_product_attention(qk[0].transpose(1, 2), qk[1].transpose(1, 2),
                                              qkv.select(2, 2).transpose(1, 2));  // (B, nh, T, d)
    o = linear2d(b->attn_out, o.transpose(1, 2).reshape({B, T, H}));
    std::tie(x, h) = add_layer_norm(x, o, b->norm2->weight, b->norm2->bias, 1e-5, {m[2], m[4], m[3]});
    auto f = linear2d(b->mlp_proj, F::gelu(linear2d(b->mlp_fc, h), F::GELUFuncOptions().approximate("tanh")));
    const bool last = i + 1 == L;
    const auto& nn = last ? norm_final : block(i + 1)->norm1;
    std::tie(x, h) = add_layer_norm(x, f, nn->weight, nn->bias, 1e-5,
                                    {m[5], last ? fin[1] : mods[i + 1][1], last ? fin[0] : mods[i + 1][0]});
  }
  return h;  // (B, T, H): modulated norm_final(x)
}

torch::Tensor sigma_features(const torch::Tensor& sigma) {
  const int64_t half = 128;
  auto opt = torch::TensorOptions().dtype(torch::kFloat32).device(sigma.device());
  auto freqs = torch::exp(-std::log(10000.0) * torch::arange(half, opt) / double(half));  // (128)
  auto args = sigma.to(torch::kFloat32).unsqueeze(1) * freqs.unsqueeze(0);                // (B, 128)
  return torch::cat({args.cos(), args.sin()}, -1);                                        // (B, 256)
}

DDiTImpl::DDiTImpl(const DDiTConfig& c) : cfg(c) {
  const int64_t H = c.n_embd;
  TORCH_CHECK(H % c.n_head == 0 && (H / c.n_head) % 2 == 0, "n_embd / n_head must be an even integer");
  // Kaiming-uniform(a=√5) on a (V+1, H) matrix is U(±1/√H).
  vocab_embed = register_parameter("vocab_embed", torch::empty({c.vocab_size + 1, H}));
  {
    torch::NoGradGuard ng;
    vocab_embed.uniform_(-1.0 / std::sqrt(double(H)), 1.0 / std::sqrt(double(H)));
  }
  if (c.time_cond) {
    sigma_fc1 = register_module("sigma_fc1", torch::nn::Linear(256, c.cond_dim));
    sigma_fc2 = register_module("sigma_fc2", torch::nn::Linear(c.cond_dim, c.cond_dim));
  }
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) blocks->push_back(DDiTBlock(c));
  norm_final = register_module("norm_final", DDiTLayerNorm(H, c.ln_bias, c.ln_bias_init_ones));
  if (c.time_cond) final_adaLN = register_module("final_adaLN", zero_linear(c.cond_dim, 2 * H));
  head = register_module("head", zero_linear(H, c.vocab_size + 1));
}

double DDiTImpl::flops_per_token(int64_t T) const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  n -= vocab_embed.numel() + per_sequence_params();
  return 6.0 * double(n) + 12.0 * double(cfg.n_layer * cfg.n_embd * T);
}

int64_t DDiTImpl::per_sequence_params() const {
  if (!cfg.time_cond) return 0;
  int64_t n = 0;
  for (auto* l : {&sigma_fc1, &sigma_fc2, &final_adaLN})
    for (auto& p : (*l)->parameters()) n += p.numel();
  for (auto& b : *blocks)
    for (auto& p : b->as<DDiTBlockImpl>()->adaLN_modulation->parameters()) n += p.numel();
  return n;
}

torch::Tensor DDiTImpl::forward(const torch::Tensor& idx, const torch::Tensor& sigma) {
  const int64_t T = idx.size(1), d = cfg.n_embd / cfg.n_head;
  auto x = torch::embedding(vocab_embed, idx);  // (B, T, H) fp32
  torch::Tensor c;
  if (cfg.time_cond) {
    TORCH_CHECK(sigma.defined() && sigma.numel() == idx.size(0), "DDiT: sigma must be (B)");
    c = F::silu(sigma_fc2->forward(F::silu(sigma_fc1->forward(sigma_features(sigma)))));  // (B, C)
  }
  // Rotary runs in the activation dtype: what the qkv Linear produces (bf16 under autocast).
  auto act_dtype = at::autocast::is_autocast_enabled(idx.device().type())
                       ? at::autocast::get_autocast_dtype(idx.device().type())
                       : torch::kFloat32;
  auto [cos, sin] = rotary.get(T, d, act_dtype, idx.device());
  torch::Tensor y;
  if (fused_inference(x)) {
    y = forward_fused(x, c, cos, sin);
  } else {
    for (auto& b : *blocks) x = b->as<DDiTBlockImpl>()->forward(x, c, cos, sin);
    y = norm_final->forward(x);
    if (cfg.time_cond) {
      auto mod = final_adaLN->forward(c).unsqueeze(1).chunk(2, -1);  // shift, scale (B, 1, H)
      y = torch::addcmul(mod[0], y, 1 + mod[1]);
    }
  }
  if (y.is_cuda()) {
    // V+1 output columns make the bf16 logits' row stride not a multiple of 16 bytes, which keeps cuBLAS
    // off its fast (TMA) kernels: run the head with rows padded to a multiple of 64 and drop the padding.
    // (B, T, V+1) view with row stride V_pad.
    const int64_t V1 = head->weight.size(0), pad = (V1 + 63) / 64 * 64 - V1;
    auto w = torch::constant_pad_nd(head->weight, {0, 0, 0, pad});  // (V_pad, H)
    auto b = torch::constant_pad_nd(head->bias, {0, pad});          // (V_pad)
    return linear2d(y, w, b).narrow(-1, 0, V1);
  }
  return head->forward(y);  // (B, T, V+1)
}

}  // namespace aobench::common
