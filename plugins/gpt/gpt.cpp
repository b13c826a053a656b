// Implements: the GPT plugin (plugins/gpt/gpt.h; spec-ao-gpt §1.4 and §8): nanoGPT GPT-2 with a switch
// between classic scoring (T−1 predictions) and a learned [None] start slot (all T scored, like AO-GPT),
// static-KV-cache ancestral sampling (decode steps replayed from CUDA graphs) with float64 Gumbel-max and
// HF-convention top-p, and exact loading of Hugging Face GPT-2 weights (Conv1D weights transposed, lm_head
// tied to wte).
#include "gpt.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/errors.h"
#include "core/safetensors.h"
#include "plugins/common/attention.h"
#include "plugins/common/cross_entropy.h"
#include "plugins/common/cuda_graph.h"
#include "plugins/common/decode_scope.h"
#include "plugins/common/embedding.h"
#include "plugins/common/layer_norm.h"
#include "plugins/common/linear.h"
#include "plugins/common/sampling.h"

namespace aobench::gpt {
namespace F = torch::nn::functional;

// ---------------------------------------------------------------------------------------------- network

LayerNormImpl::LayerNormImpl(int64_t d, bool with_bias, double eps_) : eps(eps_) {
  weight = register_parameter("weight", torch::ones({d}));
  if (with_bias) bias = register_parameter("bias", torch::zeros({d}));
}

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x) {
  return torch::layer_norm(x, {weight.size(0)}, weight, bias, eps);
}

double GptConfig::attn_scale(int64_t layer) const {
  double s = scale_attn_weights ? 1.0 / std::sqrt(double(n_embd / n_head)) : 1.0;
  return scale_attn_by_inverse_layer_idx ? s / double(layer + 1) : s;
}

BlockImpl::BlockImpl(const GptConfig& c, int64_t layer) : cfg(c), attn_scale(c.attn_scale(layer)) {
  const int64_t d = c.n_embd, inner = c.mlp_width();
  ln_1 = register_module("ln_1", LayerNorm(d, c.bias, c.ln_eps));
  ln_2 = register_module("ln_2", LayerNorm(d, c.bias, c.ln_eps));
  auto attn = register_module("attn", std::make_shared<torch::nn::Module>());
  auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
  c_attn = attn->register_module("c_attn", torch::nn::Linear(torch::nn::LinearOptions(d, 3 * d).bias(c.bias)));
  attn_proj = attn->register_module("c_proj", torch::nn::Linear(torch::nn::LinearOptions(d, d).bias(c.bias)));
  c_fc = mlp->register_module("c_fc", torch::nn::Linear(torch::nn::LinearOptions(d, inner).bias(c.bias)));
  mlp_proj = mlp->register_module("c_proj", torch::nn::Linear(torch::nn::LinearOptions(inner, d).bias(c.bias)));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, common::KVCache* cache, int64_t layer) {
  torch::Tensor h = x + self_attention(ln_1(x), cache, layer);
  return h + feed_forward(ln_2(h));
}

std::pair<torch::Tensor, torch::Tensor> BlockImpl::forward_fused(const torch::Tensor& x, const torch::Tensor& a,
                                                                 const LayerNorm& next_ln, common::KVCache* cache,
                                                                 int64_t layer) {
  // out = x + attn, a2 = ln_2(out); then out + mlp and next_ln of it.
  auto [out, a2] = common::add_layer_norm(x, self_attention(a, cache, layer), ln_2->weight, ln_2->bias, ln_2->eps);
  return common::add_layer_norm(out, feed_forward(a2), next_ln->weight, next_ln->bias, next_ln->eps);
}

torch::Tensor BlockImpl::self_attention(const torch::Tensor& a, common::KVCache* cache, int64_t layer) {
  const int64_t B = a.size(0), S = a.size(1), H = cfg.n_head, hd = cfg.n_embd / cfg.n_head;
  const double p = is_training() ? cfg.dropout : 0.0;
  auto qkv = common::linear2d(c_attn, a).split(cfg.n_embd, 2);  // 3 × (B, S, d)
  auto heads = [&](const torch::Tensor& t) { return t.view({B, S, H, hd}).transpose(1, 2); };
  auto y = common::attend(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), cache, layer, std::nullopt, p,
                          attn_scale);                          // (B, H, S, hd)
  y = y.transpose(1, 2).contiguous().view({B, S, cfg.n_embd});  // (B, S, d)
  return F::dropout(common::linear2d(attn_proj, y), F::DropoutFuncOptions().p(p).training(is_training()));
}

torch::Tensor BlockImpl::feed_forward(const torch::Tensor& a) {
  const double p = is_training() ? cfg.dropout : 0.0;
  const torch::Tensor h =
      common::linear2d_gelu(c_fc, a, cfg.activation == "gelu_tanh" ? "tanh" : "none");  // (B, S, n_inner)
  return F::dropout(common::linear2d(mlp_proj, h), F::DropoutFuncOptions().p(p).training(is_training()));
}

GptImpl::GptImpl(const GptConfig& c) : cfg(c) {
  wte = register_module("wte", torch::nn::Embedding(c.padded_vocab(), c.n_embd));
  // With the start slot, row 0 is [None]'s position and row p+1 the slot reading token p (AO-GPT layout).
  wpe = register_module("wpe", torch::nn::Embedding(c.block_size + (c.start_token ? 1 : 0), c.n_embd));
  if (c.start_token) wnonee = register_parameter("wnonee", torch::zeros({1, c.n_embd}));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) h->push_back(Block(c, i));
  ln_f = register_module("ln_f", LayerNorm(c.n_embd, c.bias, c.ln_eps));
  drop = register_module("drop", torch::nn::Dropout(c.dropout));

  // nanoGPT init: N(0, 0.02) everywhere, residual projections N(0, 0.02/sqrt(2L)), biases 0.
  torch::NoGradGuard ng;
  for (auto& kv : named_parameters()) {
    const std::string& n = kv.key();
    torch::Tensor t = kv.value();
    if (n.size() >= 5 && n.compare(n.size() - 5, 5, ".bias") == 0) {
      t.zero_();
    } else if (n.rfind("ln_", 0) == 0 || n.find(".ln_") != std::string::npos) {
      t.fill_(1.0);
    } else if (n.find("c_proj.weight") != std::string::npos) {
      t.normal_(0.0, 0.02 / std::sqrt(2.0 * c.n_layer));
    } else {
      t.normal_(0.0, 0.02);
    }
  }
}

torch::Tensor GptImpl::hidden(const torch::Tensor& ids, common::KVCache* cache) {
  const int64_t B = ids.size(0);
  const int64_t pos0 = cache ? cache->length() : 0;
  const bool start = cfg.start_token && pos0 == 0;  // the [None] slot before the ids
  const int64_t S = ids.size(1) + (start ? 1 : 0);
  TORCH_CHECK(pos0 + S <= wpe->weight.size(0), "gpt: ", pos0 + S, " slots exceed the ", wpe->weight.size(0),
              " positions of wpe (block_size ", cfg.block_size, ")");
  const auto lopt = torch::TensorOptions().dtype(torch::kLong).device(ids.device());
  torch::Tensor pos;
  if (cache && cache->is_static()) {
    // Device-side slots, so a captured step reads the counter at replay time. (S), (S, span).
    TORCH_CHECK(cache->len + S <= cache->capacity, "gpt: ", cache->len + S, " slots exceed the static cache of ",
                cache->capacity);
    pos = cache->begin_step(S, /*seen=*/S);  // causal; the counter advances after the blocks
  } else {
    pos = torch::arange(pos0, pos0 + S, lopt);
  }
  torch::Tensor x;  // (B, S, d)
  if (start)
    x = torch::cat({wnonee.unsqueeze(0).expand({B, 1, cfg.n_embd}), wte(ids)}, 1) + wpe(pos);
  else
    x = common::embed_sum(wte->weight, ids, {}, wpe->weight, pos, 0);  // one kernel on a GPU without gradient
  x = drop(x);
  // The blocks' fused form (BlockImpl::forward_fused): each norm comes out of the add before it.
  // The first block's ln_1(x), in the autocast dtype like every later norm (so a decode step's first c_attn
  // takes decode_linear too).
  const LayerNorm& first = h->size() > 0 ? h[0]->as<BlockImpl>()->ln_1 : ln_f;
  torch::Tensor a = common::add_layer_norm(x, {}, first->weight, first->bias, first->eps).second;
  for (size_t i = 0; i < h->size(); ++i) {
    const LayerNorm& next = i + 1 < h->size() ? h[i + 1]->as<BlockImpl>()->ln_1 : ln_f;
    std::tie(x, a) = h[i]->as<BlockImpl>()->forward_fused(x, a, next, cache, static_cast<int64_t>(i));
  }
  if (cache && cache->is_static()) cache->pos.add_(S);  // in place: graph replays advance it too
  return a;                                             // ln_f of the last residual stream
}

torch::Tensor GptImpl::logits(const torch::Tensor& ids, common::KVCache* cache) {
  // Tied head; the padded columns are dropped so every distribution is over the real vocabulary.
  const auto& head = head_cast.defined() ? head_cast : wte->weight;
  return F::linear(hidden(ids, cache), head).narrow(-1, 0, cfg.vocab_size);  // (B, S, V)
}

// ---------------------------------------------------------------------------------------------- config

PluginInfo GptPlugin::info() const {
  Capabilities c;
  c.prefix_prompt = true;  // left to right: a prefix is a prompt, given ids after free ones are forced
  c.forced_tokens = true;
  PluginInfo info{"gpt", "1.0.0", Paradigm::kAutoregressive, "GPT-2 (nanoGPT-shaped), left to right; loads HF GPT-2",
                  c};
  info.speed.capturable_loss = true;  // loss(): device ops only once an undefined order skips the identity check
  return info;
}

namespace {

[[noreturn]] void bad(const std::string& key, const std::string& msg, const std::string& hint) {
  throw ConfigError("model." + key + ": " + msg, hint);
}

// The HF config.json decides the shape (GPT-2 Large judge: 36/20/1280, 1024 positions, 50257 ids) and
// every option of GPT2Model that changes the numbers is implemented or refused by name: a loaded model
// computes what transformers computes, or does not load.
void apply_hf_config(GptConfig& c) {
  const std::string path = c.init_from_hf + "/config.json";
  std::ifstream in(path);
  if (!in)
    bad("init_from_hf", "cannot open '" + path + "'", "point it at a folder with config.json + model.safetensors");
  nlohmann::json hf;
  try {
    hf = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    bad("init_from_hf", "'" + path + "' is not valid JSON: " + e.what(), "re-download the model folder");
  }
  if (!hf.is_object()) bad("init_from_hf", "'" + path + "' is not a JSON object", "is this a GPT-2 config?");
  auto where = [&](const std::string& k) { return "'" + path + "': \"" + k + "\""; };
  auto integer = [&](const std::string& k) -> int64_t {
    if (!hf.contains(k)) bad("init_from_hf", where(k) + " is missing", "is this a GPT-2 config?");
    if (!hf[k].is_number_integer())
      bad("init_from_hf", where(k) + " must be an integer, got " + hf[k].dump(), "is this a GPT-2 config?");
    return hf[k].get<int64_t>();
  };
  auto flag = [&](const std::string& k, bool fallback) -> bool {
    if (!hf.contains(k) || hf[k].is_null()) return fallback;
    if (!hf[k].is_boolean()) bad("init_from_hf", where(k) + " must be true or false, got " + hf[k].dump(), "");
    return hf[k].get<bool>();
  };
  if (hf.contains("model_type") && hf["model_type"] != "gpt2")
    bad("init_from_hf", where("model_type") + " is " + hf["model_type"].dump() + ", not \"gpt2\"",
        "the gpt plugin loads GPT2LMHeadModel / GPT2Model folders only");
  c.n_embd = integer("n_embd");
  c.n_layer = integer("n_layer");
  c.n_head = integer("n_head");
  c.vocab_size = integer("vocab_size");
  c.block_size = integer(hf.contains("n_positions") ? "n_positions" : "n_ctx");
  c.n_inner = hf.contains("n_inner") && !hf["n_inner"].is_null() ? integer("n_inner") : 0;
  if (hf.contains("n_inner") && !hf["n_inner"].is_null() && c.n_inner < 1)
    bad("init_from_hf", where("n_inner") + " = " + std::to_string(c.n_inner) + " is not a width", "");
  if (hf.contains("layer_norm_epsilon")) {
    if (!hf["layer_norm_epsilon"].is_number())
      bad("init_from_hf", where("layer_norm_epsilon") + " must be a number", "");
    c.ln_eps = hf["layer_norm_epsilon"].get<double>();
  }
  // transformers ACT2FN: gelu_new, gelu_pytorch_tanh and gelu_fast are the same tanh approximation
  // (written three ways, equal up to float rounding); gelu and gelu_python are the exact erf GELU.
  const nlohmann::json act_json =
      hf.contains("activation_function") ? hf["activation_function"] : nlohmann::json("gelu_new");
  const std::string act = act_json.is_string() ? act_json.get<std::string>() : act_json.dump();
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast")
    c.activation = "gelu_tanh";
  else if (act == "gelu" || act == "gelu_python")
    c.activation = "gelu";
  else
    bad("init_from_hf", where("activation_function") + " is \"" + act + "\", which the gpt plugin does not implement",
        "supported: gelu_new, gelu_pytorch_tanh, gelu_fast (tanh GELU), gelu, gelu_python (erf GELU)");
  c.scale_attn_weights = flag("scale_attn_weights", true);
  c.scale_attn_by_inverse_layer_idx = flag("scale_attn_by_inverse_layer_idx", false);
  // reorder_and_upcast_attn only moves the scale into an fp32 baddbmm: the same scores in fp32, accepted.
  (void)flag("reorder_and_upcast_attn", false);
  if (flag("add_cross_attention", false))
    bad("init_from_hf", where("add_cross_attention") + " is true: cross-attention blocks are not implemented",
        "load a decoder-only GPT-2 (add_cross_attention=false)");
  if (!flag("tie_word_embeddings", true))
    bad("init_from_hf", where("tie_word_embeddings") + " is false: the gpt plugin ties lm_head to wte",
        "load a GPT-2 whose lm_head is its wte (every released GPT-2 is)");
  if (c.start_token)
    bad("start_token", "must be false with init_from_hf", "HF GPT-2 has no [None] slot; set model.start_token=false");
  if (!c.bias) bad("bias", "must be true with init_from_hf", "GPT-2 checkpoints have biases; set model.bias=true");
}

}  // namespace

void GptPlugin::configure_model(const nlohmann::json& model) {
  const ModelConfig m(model, plugin_default_config(), "gpt");
  GptConfig c;
  c.n_layer = m.get<int64_t>("n_layer");
  c.n_head = m.get<int64_t>("n_head");
  c.n_embd = m.get<int64_t>("n_embd");
  c.block_size = m.get<int64_t>("block_size");
  c.vocab_size = m.get<int64_t>("vocab_size");
  c.dropout = m.get<double>("dropout");
  c.bias = m.get<bool>("bias");
  c.activation = m.get<std::string>("activation");
  c.start_token = m.get<bool>("start_token");
  c.init_from_hf = m.get<std::string>("init_from_hf");
  // Checkpoints written before n_inner existed lack it: their MLPs are 4·n_embd wide, i.e. n_inner 0.
  c.n_inner = m.has("n_inner") ? m.get<int64_t>("n_inner") : 0;
  if (!c.init_from_hf.empty()) apply_hf_config(c);
  auto positive = [](const std::string& k, int64_t v) {
    if (v < 1) bad(k, "must be ≥ 1, got " + std::to_string(v), "use a positive integer");
  };
  positive("n_layer", c.n_layer);
  positive("n_head", c.n_head);
  positive("n_embd", c.n_embd);
  if (c.n_inner < 0)
    bad("n_inner", "must be ≥ 0, got " + std::to_string(c.n_inner), "0 means 4·n_embd (GPT-2), else the MLP width");
  positive("block_size", c.block_size);
  if (c.vocab_size < 2)
    bad("vocab_size", "must be ≥ 2, got " + std::to_string(c.vocab_size), "use the tokenizer's size");
  if (c.n_embd % c.n_head != 0)
    bad("n_embd", "n_embd % n_head != 0 (" + std::to_string(c.n_embd) + " % " + std::to_string(c.n_head) + ")",
        "pick n_embd as a multiple of model.n_head");
  if (c.dropout < 0.0 || c.dropout >= 1.0) bad("dropout", "must be in [0, 1), got " + std::to_string(c.dropout), "");
  if (c.activation != "gelu" && c.activation != "gelu_tanh")
    bad("activation", "unknown activation \"" + c.activation + "\"", "use \"gelu\" or \"gelu_tanh\"");
  cfg_ = c;
  configured_ = true;
}

nlohmann::json GptPlugin::resolved_model_config(const nlohmann::json& model_config) const {
  // With init_from_hf the shape comes from the folder's config.json: record that, not the flavour's.
  nlohmann::json m = model_config;
  m["n_layer"] = cfg_.n_layer;
  m["n_head"] = cfg_.n_head;
  m["n_embd"] = cfg_.n_embd;
  m["n_inner"] = cfg_.n_inner;
  m["block_size"] = cfg_.block_size;
  m["vocab_size"] = cfg_.vocab_size;
  m["activation"] = cfg_.activation;
  return m;
}

void GptPlugin::build(torch::Device device) {
  if (!configured_) throw PluginError("gpt: build() before configure()", "call configure(model_config) first");
  net_ = Gpt(cfg_);
  if (!cfg_.init_from_hf.empty()) load_hf_weights(cfg_.init_from_hf);
  net_->to(device);
  device_ = device;
}

torch::nn::Module& GptPlugin::module() {
  if (!net_) throw PluginError("gpt: module() before build()", "call build(device) first");
  return *net_;
}

void GptPlugin::load_hf_weights(const std::string& dir) {
  const std::string path = dir + "/model.safetensors";
  SafetensorsFile f = read_safetensors(path);
  auto params = net_->named_parameters();
  std::set<std::string> loaded;
  torch::NoGradGuard ng;
  for (auto& [raw, t] : f.tensors) {
    std::string name = raw.rfind("transformer.", 0) == 0 ? raw.substr(12) : raw;
    // Causal-mask buffers of old exports carry no weights.
    if (name.find(".attn.bias") != std::string::npos || name.find(".attn.masked_bias") != std::string::npos) continue;
    if (name == "lm_head.weight") continue;  // tied: checked against wte below
    if (!params.contains(name))
      throw CheckpointError("'" + path + "': tensor '" + raw + "' has no counterpart in the gpt model",
                            "only GPT2LMHeadModel / GPT2Model weights can be loaded");
    torch::Tensor src = t.to(torch::kFloat32);
    // HF Conv1D stores (in, out); our Linear wants (out, in).
    const bool conv1d = name.find("c_attn.weight") != std::string::npos ||
                        name.find("c_proj.weight") != std::string::npos ||
                        name.find("c_fc.weight") != std::string::npos;
    if (conv1d) src = src.t();
    torch::Tensor dst = params[name];
    if (name == "wte.weight") dst = dst.narrow(0, 0, cfg_.vocab_size);  // padded rows stay N(0, 0.02): never used
    if (src.sizes() != dst.sizes())
      throw CheckpointError("'" + path + "': tensor '" + raw + "' has shape " + c10::str(t.sizes()) +
                                ", the model expects " + c10::str(dst.sizes()) + (conv1d ? " (transposed)" : ""),
                            "config.json and model.safetensors disagree");
    dst.copy_(src);
    loaded.insert(name);
  }
  for (auto& kv : params)
    if (!loaded.count(kv.key()))
      throw CheckpointError("'" + path + "' lacks tensor '" + kv.key() + "' (or 'transformer." + kv.key() + "')",
                            "the file is not a complete GPT-2 checkpoint");
  if (f.tensors.count("lm_head.weight") && !torch::equal(f.tensors.at("lm_head.weight").to(torch::kFloat32),
                                                         params["wte.weight"].narrow(0, 0, cfg_.vocab_size)))
    throw CheckpointError("'" + path + "': lm_head.weight differs from wte", "gpt ties lm_head to wte");
}

double GptPlugin::flops_per_token(int64_t T) const {
  if (!net_) throw PluginError("gpt: flops_per_token() before build()", "call build(device) first");
  int64_t n = 0;
  for (const auto& p : net_->parameters()) n += p.numel();
  n -= net_->wpe->weight.numel();
  return 6.0 * static_cast<double>(n) + 12.0 * cfg_.n_layer * cfg_.n_embd * static_cast<double>(T);
}

// ---------------------------------------------------------------------------------------------- scoring

LossOutput GptPlugin::loss(const TrainBatch& batch, at::Generator&) {
  const torch::Tensor& x = batch.tokens;  // (B, T)
  TORCH_CHECK(x.dim() == 2 && x.size(1) >= 2, "gpt: tokens must be (B, T≥2), got ", x.sizes());
  TORCH_CHECK(x.size(1) <= cfg_.block_size, "gpt: T=", x.size(1), " > block_size ", cfg_.block_size);
  if (batch.order.defined()) {
    auto id = torch::arange(x.size(1), batch.order.options()).expand_as(batch.order);
    TORCH_CHECK(torch::equal(batch.order, id), "gpt is left-to-right only: TrainBatch.order must be identity");
  }
  // Input is always x[:, :T−1]; with the [None] slot prepended all T tokens are targets.
  // Tied head on the padded vocabulary; lm_cross_entropy scores the real ids without an fp32 copy.
  torch::Tensor h = net_->hidden(x.narrow(1, 0, x.size(1) - 1));                      // (B, S, d)
  torch::Tensor logits = F::linear(h.reshape({-1, cfg_.n_embd}), net_->wte->weight);  // (N, V_pad)
  torch::Tensor targets = cfg_.start_token ? x : x.narrow(1, 1, x.size(1) - 1);       // (B, S)
  return {common::lm_cross_entropy(logits, targets.reshape({-1}), cfg_.vocab_size), {}};
}

NllOutput GptPlugin::log_prob(const torch::Tensor& tokens, const torch::Tensor& order, at::Generator&) {
  const int64_t B = tokens.size(0), T = tokens.size(1);  // the order is the identity (ModelPlugin::log_prob checks)
  TORCH_CHECK(T <= cfg_.block_size, "gpt: T=", T, " > block_size ", cfg_.block_size);
  auto opts = torch::TensorOptions().device(tokens.device());
  NllOutput out;
  out.nll = torch::zeros({B, T}, opts.dtype(torch::kFloat64));
  out.scored = torch::ones({B, T}, opts.dtype(torch::kBool));
  if (!cfg_.start_token) out.scored.select(1, 0).fill_(false);
  if (T < 2 && !cfg_.start_token) return out;
  torch::NoGradGuard no_grad;
  torch::Tensor h = net_->hidden(tokens.narrow(1, 0, T - 1));                      // (B, S, d)
  torch::Tensor targets = cfg_.start_token ? tokens : tokens.narrow(1, 1, T - 1);  // (B, S)
  const int64_t S = h.size(1), N = B * S;
  // Tied head, no bias; the logits of the padded vocabulary ids are never read (cross_entropy.h).
  torch::Tensor nll = common::head_nll(h.reshape({N, cfg_.n_embd}), net_->wte->weight, {}, targets.reshape({N}),
                                       cfg_.vocab_size);  // (N) float64
  out.nll.narrow(1, T - S, S).copy_(nll.view({B, S}));
  return out;
}

// ---------------------------------------------------------------------------------------------- sampling

SampleOutput GptPlugin::generate(const SampleRequest& r) { return sample_impl(r, true); }

SampleOutput GptPlugin::sample_impl(const SampleRequest& r, bool use_cache) {
  const int64_t B = r.batch_size, L = r.length, V = cfg_.vocab_size;
  TORCH_CHECK(B >= 1 && L >= 1, "gpt: sample needs batch_size ≥ 1 and length ≥ 1");
  TORCH_CHECK(L <= cfg_.block_size, "gpt: length ", L, " > block_size ", cfg_.block_size);
  TORCH_CHECK(r.top_p > 0.0 && r.top_p <= 1.0, "gpt: top_p must be in (0, 1], got ", r.top_p);
  torch::NoGradGuard ng;
  common::EvalMode eval_mode(*net_);
  common::AutocastLinearWeights bf16_weights(*net_, device_);
  const common::DecodeWeightsScope constant_weights;  // no kernel writes them until the sample ends
  struct HeadCastScope {  // the tied head cast once; back to wte's own weight however the call ends
    GptImpl& net;
    ~HeadCastScope() { net.head_cast = torch::Tensor(); }
  } head_scope{*net_};
  net_->head_cast = common::autocast_copy(net_->wte->weight);
  const torch::Device dev = device_;
  torch::Tensor prompt =
      r.prompt.defined() ? r.prompt.to(torch::kCPU, torch::kLong).clone() : torch::full({B, L}, -1, torch::kLong);
  TORCH_CHECK(prompt.sizes() == torch::IntArrayRef({B, L}), "gpt: prompt must be (B, L) = (", B, ", ", L, ")");
  // Without a start slot the first token cannot be drawn: an unprompted row starts with EOS = V−1
  // (GPT-2's <|endoftext|>, the byte tokenizer's end id), which is part of the output.
  if (!cfg_.start_token) prompt.select(1, 0).masked_fill_(prompt.select(1, 0) < 0, V - 1);
  // Positions where some row draws, known on the host up front: the loop never waits for the device.
  const torch::Tensor free_any = (prompt < 0).any(0), free_all = (prompt < 0).all(0);  // (L) bool
  const auto free_at = free_any.accessor<bool, 1>();
  const auto free_everywhere = free_all.accessor<bool, 1>();  // no row forced: the draw is written as it is
  torch::Tensor out = prompt.to(dev);                         // (B, L) on the model's device; −1 = not drawn yet
  auto gen = common::make_generator(dev, r.seed);

  // Draws one id per row from logits (B, V): greedy, or temperature + HF top-p + Gumbel-max in float64 on
  // the logits' device (common::draw_tokens: one fused kernel on the GPU).
  const common::DrawOptions draw_opt{common::DrawRule::kGumbelMax, r.temperature, r.top_p, r.float64_sampling,
                                     /*argmax=*/r.temperature <= 0.0};
  auto draw = [&](const torch::Tensor& logits) {
    return common::draw_tokens(logits.unsqueeze(1), draw_opt, gen).squeeze(1);  // (B,)
  };

  common::KVCache cache;
  std::map<int64_t, common::StepGraph> graphs;  // decode-step graphs by attention span (one: kv_cache.h)
  int64_t calls = 0;
  // First slot: [None] (start_token) predicts token 0; otherwise token 0 is given.
  int64_t k = cfg_.start_token ? 0 : 1;
  // Teacher-force the prefix given in every row in one forward (prefill).
  int64_t given = 0;
  while (given < L && !free_at[given]) ++given;
  torch::Tensor last_logits;  // (B, V): prediction for token k
  torch::Tensor ids;          // (B, 1): the decode step's input, fixed memory for the graphs
  if (use_cache) {
    const int64_t pre = cfg_.start_token ? given : std::max<int64_t>(given, 1);  // tokens fed in the prefill
    k = pre;                                                                     // next position to decide
    if (k >= L) return {out.to(r.device), calls, {}};
    cache.capacity = L + 1;  // [None] + L − 1 fed tokens at most
    cache.make_static(dev);
    const int64_t slots = pre + (cfg_.start_token ? 1 : 0);
    torch::Tensor lg = net_->logits(out.narrow(1, 0, pre), &cache);  // (B, S, V)
    cache.len += slots;
    ++calls;
    last_logits = lg.select(1, lg.size(1) - 1);
    ids = torch::empty({B, 1}, out.options());
  }
  for (; k < L; ++k) {
    if (!use_cache) {
      torch::Tensor lg = net_->logits(out.narrow(1, 0, k));  // full recomputation
      ++calls;
      last_logits = lg.select(1, lg.size(1) - 1);
    }
    if (free_everywhere[k]) {
      out.select(1, k).copy_(draw(last_logits));
    } else if (free_at[k]) {
      torch::Tensor forced = out.select(1, k);
      forced.copy_(torch::where(forced >= 0, forced, draw(last_logits)));
    }
    if (use_cache && k + 1 < L) {
      ids.copy_(out.narrow(1, k, 1));
      auto step = [&] { return net_->logits(ids, &cache).select(1, 0); };  // (B, V)
      last_logits = graphs[cache.span_for(1)].run(dev, step);
      cache.len += 1;
      ++calls;
    }
  }
  return {out.to(r.device), calls, {}};
}

}  // namespace aobench::gpt

AOBENCH_PLUGIN(aobench::gpt::GptPlugin)
