// Implements: harness/import/mappings.h. The tables follow the authors' files read at scxue/AO-GPT-MDM 3a02e3b,
// louaaron/Score-Entropy-Discrete-Diffusion 0605786 and ML-GSAI/RADD 60b772d (docs/spec-ao-gpt.md §1.1–1.2,
// docs/spec-sedd-radd.md §1.1–1.2); aobench's names are those its plugins register (plugins/*/).
#include "harness/import/mappings.h"

#include <map>
#include <sstream>

#include "core/config.h"
#include "core/errors.h"

namespace aobench {
using json = nlohmann::json;
using Kind = MappingRule::Kind;

namespace {

std::string shape_text(const torch::Tensor& t) {
  std::ostringstream s;
  s << "(";
  for (int64_t i = 0; i < t.dim(); ++i) s << (i ? ", " : "") << t.size(i);
  s << ")";
  return s.str();
}

// Config members, each error naming `where`.key and what it must be.
const json& need(const json& obj, const std::string& key, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key))
    throw ConfigError(where + " has no '" + key + "'", "is this the config of the model named by --model?");
  return obj[key];
}
int64_t need_int(const json& obj, const std::string& key, const std::string& where) {
  const json& v = need(obj, key, where);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0)
    throw ConfigError(where + "." + key + " = " + brief(v) + ": must be a positive integer");
  return v.get<int64_t>();
}
bool need_bool(const json& obj, const std::string& key, const std::string& where) {
  const json& v = need(obj, key, where);
  if (!v.is_boolean()) throw ConfigError(where + "." + key + " = " + brief(v) + ": must be true or false");
  return v.get<bool>();
}
double number_or(const json& obj, const std::string& key, double fallback, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key)) return fallback;
  if (!obj[key].is_number()) throw ConfigError(where + "." + key + " = " + brief(obj[key]) + ": must be a number");
  return obj[key].get<double>();
}
std::string need_string(const json& obj, const std::string& key, const std::string& where) {
  const json& v = need(obj, key, where);
  if (!v.is_string()) throw ConfigError(where + "." + key + " = " + brief(v) + ": must be a string");
  return v.get<std::string>();
}

// Rules with "{i}" expanded for every layer.
struct Rules {
  std::vector<MappingRule>& out;
  void add(const std::string& src, const std::string& dst) { out.push_back({src, dst, Kind::kWeight, {}}); }
  void layers(int64_t n, const std::vector<std::pair<std::string, std::string>>& pairs) {
    for (int64_t i = 0; i < n; ++i)
      for (const auto& [s, d] : pairs) add(expand(s, i), expand(d, i));
  }
  static std::string expand(std::string s, int64_t i) {
    const auto at = s.find("{i}");
    return at == std::string::npos ? s : s.replace(at, 3, std::to_string(i));
  }
};

// nanoGPT's causal-mask buffer `attn.bias` (1, 1, T+1, T+1) of ones below the diagonal: saved only by a torch
// without scaled_dot_product_attention (their file registers it then). A constant, never a weight.
void causal_mask_buffers(std::vector<MappingRule>& rules, int64_t L, int64_t T) {
  const auto mask = torch::ones({T + 1, T + 1}).tril().view({1, 1, T + 1, T + 1});
  for (int64_t i = 0; i < L; ++i)
    rules.push_back({"transformer.h." + std::to_string(i) + ".attn.bias", "", Kind::kConstant, mask});
}

// SEDD's / RADD's rotary.Rotary buffer: inv_freq = 1 / 10000^(arange(0, d, 2) / d) in fp32, d the head dim.
MappingRule rotary_constant(int64_t head_dim) {
  auto inv = 1.0 / torch::pow(10000.0, torch::arange(0, head_dim, 2, torch::kFloat32) / double(head_dim));
  return {"rotary_emb.inv_freq", "", Kind::kConstant, inv.to(torch::kFloat32)};
}

}  // namespace

ModelMapping ao_gpt_mapping(const json& args, const std::string& where, const StateDict& sd) {
  ModelMapping m;
  m.plugin = "ao_gpt";
  m.authors_file = "model_AOGPT_AdaLN6_NoRep_cond_128_trunc_qknorm.py (scxue/AO-GPT-MDM)";
  const int64_t L = need_int(args, "n_layer", where), H = need_int(args, "n_head", where);
  const int64_t d = need_int(args, "n_embd", where), T = need_int(args, "block_size", where);
  m.padded_rows = need_int(args, "vocab_size", where);
  if (!need_bool(args, "bias", where))
    throw ConfigError(where +
                          ".bias = false: the authors' AO-GPT then drops the biases of attn.c_attn, attn.c_proj, "
                          "mlp.c_fc and mlp.c_proj but keeps those of every adaLN Linear and of lm_head "
                          "(bias=True hard-coded in their file); aobench's ao_gpt switches all of them with one "
                          "model.bias, so this checkpoint has no exact aobench counterpart",
                      "the released AO-GPT checkpoints use bias = true; nothing was written");
  // Their file fixes the conditioning width at 128 (wtpe, adaLN); read it from wtpe so a checkpoint says it itself.
  auto wtpe = sd.tensors.find("transformer.wtpe.weight");
  const int64_t cond = wtpe != sd.tensors.end() && wtpe->second.dim() == 2 ? wtpe->second.size(1) : 128;
  m.model = {{"n_layer", L},
             {"n_head", H},
             {"n_embd", d},
             {"block_size", T},
             {"cond_dim", cond},
             {"bias", true},
             {"dropout", number_or(args, "dropout", 0.0, where)},
             {"injection", "adaln"}};
  m.fixed_keys = {"n_layer", "n_head", "n_embd", "block_size", "cond_dim", "bias", "injection"};
  Rules r{m.rules};
  r.add("transformer.wte.weight", "wte.weight");
  r.add("transformer.wpe.weight", "wpe.weight");
  r.add("transformer.wtpe.weight", "wtpe.weight");
  r.add("transformer.wnonee.weight", "wnonee");  // nn.Embedding(1, d) there, a (1, d) parameter here
  r.layers(L, {{"transformer.h.{i}.ln_1.weight", "h_{i}.ln_1.weight"},
               {"transformer.h.{i}.attn.c_attn.weight", "h_{i}.attn.c_attn.weight"},
               {"transformer.h.{i}.attn.c_attn.bias", "h_{i}.attn.c_attn.bias"},
               {"transformer.h.{i}.attn.c_proj.weight", "h_{i}.attn.c_proj.weight"},
               {"transformer.h.{i}.attn.c_proj.bias", "h_{i}.attn.c_proj.bias"},
               {"transformer.h.{i}.attn.q_norm.weight", "h_{i}.attn.q_norm.weight"},
               {"transformer.h.{i}.attn.k_norm.weight", "h_{i}.attn.k_norm.weight"},
               {"transformer.h.{i}.ln_2.weight", "h_{i}.ln_2.weight"},
               {"transformer.h.{i}.mlp.c_fc.weight", "h_{i}.mlp.c_fc.weight"},
               {"transformer.h.{i}.mlp.c_fc.bias", "h_{i}.mlp.c_fc.bias"},
               {"transformer.h.{i}.mlp.c_proj.weight", "h_{i}.mlp.c_proj.weight"},
               {"transformer.h.{i}.mlp.c_proj.bias", "h_{i}.mlp.c_proj.bias"},
               {"transformer.h.{i}.adaLN.1.weight", "h_{i}.adaLN.weight"},  // adaLN = Sequential(SiLU, Linear)
               {"transformer.h.{i}.adaLN.1.bias", "h_{i}.adaLN.bias"}});
  r.add("transformer.final_layer.ln_f.weight", "ln_f.weight");
  r.add("transformer.final_layer.adaLN_final.1.weight", "adaLN_final.weight");
  r.add("transformer.final_layer.adaLN_final.1.bias", "adaLN_final.bias");
  r.add("lm_head.weight", "lm_head.weight");
  r.add("lm_head.bias", "lm_head.bias");
  causal_mask_buffers(m.rules, L, T);
  return m;
}

ModelMapping sigma_gpt_mapping(const json& args, const std::string& where) {
  ModelMapping m;
  m.plugin = "sigma_gpt";
  m.authors_file = "model_sigmaGPT.py (scxue/AO-GPT-MDM)";
  const int64_t L = need_int(args, "n_layer", where), H = need_int(args, "n_head", where);
  const int64_t d = need_int(args, "n_embd", where), T = need_int(args, "block_size", where);
  const bool bias = need_bool(args, "bias", where);
  m.padded_rows = need_int(args, "vocab_size", where);
  m.model = {{"n_layer", L},           {"n_head", H},  {"n_embd", d},
             {"block_size", T},        {"bias", bias}, {"dropout", number_or(args, "dropout", 0.0, where)},
             {"variant", "aogpt_repo"}};
  m.fixed_keys = {"n_layer", "n_head", "n_embd", "block_size", "bias", "variant"};
  Rules r{m.rules};
  r.add("transformer.wte.weight", "wte.weight");
  m.rules.push_back({"lm_head.weight", "transformer.wte.weight", Kind::kTied, {}});  // weight tying
  r.add("transformer.wpe.weight", "wpe.weight");
  r.add("transformer.wtpe.weight", "wtpe.weight");
  r.add("transformer.wnonee.weight", "wnonee");
  std::vector<std::pair<std::string, std::string>> block = {
      {"transformer.h.{i}.ln_1.weight", "h_{i}.ln_1.weight"},
      {"transformer.h.{i}.attn.c_attn.weight", "h_{i}.attn_c_attn.weight"},
      {"transformer.h.{i}.attn.c_proj.weight", "h_{i}.attn_c_proj.weight"},
      {"transformer.h.{i}.ln_2.weight", "h_{i}.ln_2.weight"},
      {"transformer.h.{i}.mlp.c_fc.weight", "h_{i}.mlp_c_fc.weight"},
      {"transformer.h.{i}.mlp.c_proj.weight", "h_{i}.mlp_c_proj.weight"}};
  if (bias)  // LayerNorm and Linear biases exist only with bias = true, in both files
    for (const char* part : {"ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"}) {
      std::string ours = part;
      if (ours.find('.') != std::string::npos) ours[ours.find('.')] = '_';
      block.push_back({std::string("transformer.h.{i}.") + part + ".bias", "h_{i}." + ours + ".bias"});
    }
  r.layers(L, block);
  r.add("transformer.ln_f.weight", "ln_f.weight");
  if (bias) r.add("transformer.ln_f.bias", "ln_f.bias");
  causal_mask_buffers(m.rules, L, T);
  return m;
}

namespace {

// The Hydra config keys both encoders share: model section, vocabulary, and the shape keys of aobench's DDiT.
json ddit_model(const json& cfg, const std::string& where, int64_t& head_dim) {
  const std::string mw = where + ".model";
  const json& model = need(cfg, "model", where);
  const int64_t d = need_int(model, "hidden_size", mw), H = need_int(model, "n_heads", mw);
  if (d % H != 0 || (d / H) % 2 != 0)
    throw ConfigError(mw + ": hidden_size " + std::to_string(d) + " / n_heads " + std::to_string(H) +
                      " is no even head dim (rotary rotates halves)");
  head_dim = d / H;
  return {{"n_layer", need_int(model, "n_blocks", mw)},
          {"n_head", H},
          {"n_embd", d},
          {"block_size", need_int(model, "length", mw)},
          {"vocab_size", need_int(cfg, "tokens", where)},
          {"dropout", number_or(model, "dropout", 0.0, mw)}};
}

std::vector<std::pair<std::string, std::string>> ddit_block(bool ln_bias) {
  std::vector<std::pair<std::string, std::string>> b = {{"blocks.{i}.norm1.weight", "blocks.{i}.norm1.weight"},
                                                        {"blocks.{i}.attn_qkv.weight", "blocks.{i}.attn_qkv.weight"},
                                                        {"blocks.{i}.attn_out.weight", "blocks.{i}.attn_out.weight"},
                                                        {"blocks.{i}.norm2.weight", "blocks.{i}.norm2.weight"},
                                                        {"blocks.{i}.mlp.0.weight", "blocks.{i}.mlp_fc.weight"},
                                                        {"blocks.{i}.mlp.0.bias", "blocks.{i}.mlp_fc.bias"},
                                                        {"blocks.{i}.mlp.2.weight", "blocks.{i}.mlp_proj.weight"},
                                                        {"blocks.{i}.mlp.2.bias", "blocks.{i}.mlp_proj.bias"}};
  if (ln_bias) {
    b.push_back({"blocks.{i}.norm1.bias", "blocks.{i}.norm1.bias"});
    b.push_back({"blocks.{i}.norm2.bias", "blocks.{i}.norm2.bias"});
  }
  return b;
}

}  // namespace

ModelMapping sedd_mapping(const json& cfg, const std::string& where) {
  ModelMapping m;
  m.plugin = "sedd";
  m.authors_file = "model/transformer.py SEDD (louaaron/Score-Entropy-Discrete-Diffusion)";
  // The parts of SEDD outside the network that aobench's sedd fixes: absorbing graph (mask id = tokens), the
  // log-linear schedule (eps 1e-3) and the score scaled by σ. Another choice would be evaluated wrongly: refused.
  const std::string graph = need_string(need(cfg, "graph", where), "type", where + ".graph");
  if (graph != "absorb")
    throw ConfigError(where + ".graph.type = '" + graph + "': aobench's sedd is SEDD-absorb (mask id = tokens)",
                      "a uniform-graph SEDD has no mask token and no aobench counterpart; nothing was written");
  const std::string noise = need_string(need(cfg, "noise", where), "type", where + ".noise");
  if (noise != "loglinear")
    throw ConfigError(where + ".noise.type = '" + noise + "': aobench's sedd uses the log-linear schedule only",
                      "its σ(t) = −log(1 − (1 − 1e-3)t) conditions the network; another schedule would be "
                      "evaluated at the wrong noise levels; nothing was written");
  if (!need_bool(need(cfg, "model", where), "scale_by_sigma", where + ".model"))
    throw ConfigError(where +
                          ".model.scale_by_sigma = false: aobench's sedd always subtracts log(e^σ − 1) + log V "
                          "from the network's output (the SEDD-absorb score of spec-sedd-radd §1.2)",
                      "a model trained without that scaling has no exact aobench counterpart; nothing was written");
  int64_t head_dim = 0;
  m.model = ddit_model(cfg, where, head_dim);
  m.model["cond_dim"] = need_int(need(cfg, "model", where), "cond_dim", where + ".model");
  m.fixed_keys = {"n_layer", "n_head", "n_embd", "block_size", "vocab_size", "cond_dim"};
  Rules r{m.rules};
  r.add("vocab_embed.embedding", "vocab_embed");
  r.add("sigma_map.mlp.0.weight", "sigma_fc1.weight");  // TimestepEmbedder.mlp = Linear(256, C), SiLU, Linear(C, C)
  r.add("sigma_map.mlp.0.bias", "sigma_fc1.bias");
  r.add("sigma_map.mlp.2.weight", "sigma_fc2.weight");
  r.add("sigma_map.mlp.2.bias", "sigma_fc2.bias");
  m.rules.push_back(rotary_constant(head_dim));
  auto block = ddit_block(false);
  block.push_back({"blocks.{i}.adaLN_modulation.weight", "blocks.{i}.adaLN_modulation.weight"});
  block.push_back({"blocks.{i}.adaLN_modulation.bias", "blocks.{i}.adaLN_modulation.bias"});
  r.layers(m.model["n_layer"].get<int64_t>(), block);
  r.add("output_layer.norm_final.weight", "norm_final.weight");
  r.add("output_layer.adaLN_modulation.weight", "final_adaLN.weight");
  r.add("output_layer.adaLN_modulation.bias", "final_adaLN.bias");
  r.add("output_layer.linear.weight", "head.weight");
  r.add("output_layer.linear.bias", "head.bias");
  return m;
}

ModelMapping radd_mapping(const json& cfg, const std::string& where) {
  ModelMapping m;
  m.plugin = "radd";
  m.authors_file = "model/transformer.py RADD (ML-GSAI/RADD)";
  int64_t head_dim = 0;
  m.model = ddit_model(cfg, where, head_dim);
  m.model["time_cond"] = false;  // RADD's network has no σ input
  m.fixed_keys = {"n_layer", "n_head", "n_embd", "block_size", "vocab_size", "time_cond"};
  // training.loss_type picks the estimator `aobench eval --set eval.mode=elbo` uses; the network is the same for all.
  std::string loss = "lambda_dce";
  const json* training = cfg.contains("training") ? &cfg["training"] : nullptr;
  const std::string their = training && training->contains("loss_type") && (*training)["loss_type"].is_string()
                                ? (*training)["loss_type"].get<std::string>()
                                : "";
  if (their == "t_DCE") loss = "t_dce";
  m.model["loss"] = loss;
  m.notes.push_back("training.loss_type " + (their.empty() ? std::string("absent") : "'" + their + "'") +
                    " → model.loss " + loss +
                    (their == "t_DCE" || their == "lambda_DCE" ? "" : " (no aobench counterpart: λ-DCE, the paper's)"));
  if (loss == "t_dce") {
    const std::string noise = cfg.contains("noise") && cfg["noise"].is_object() && cfg["noise"].contains("type")
                                  ? brief(cfg["noise"]["type"])
                                  : "";
    if (noise != "\"loglinear\"")
      throw ConfigError(where + ".noise.type = " + (noise.empty() ? "(absent)" : noise) +
                            ": RADD's t-DCE weights follow the log-linear schedule, aobench's radd has no other",
                        "a checkpoint trained with another schedule has no exact aobench counterpart");
  }
  Rules r{m.rules};
  r.add("vocab_embed.embedding", "vocab_embed");
  m.rules.push_back(rotary_constant(head_dim));
  r.layers(m.model["n_layer"].get<int64_t>(), ddit_block(true));  // LayerNormWot: weight and bias
  r.add("output_layer.norm_final.weight", "norm_final.weight");
  r.add("output_layer.norm_final.bias", "norm_final.bias");
  r.add("output_layer.linear.weight", "head.weight");
  r.add("output_layer.linear.bias", "head.bias");
  return m;
}

TensorMap map_state_dict(const StateDict& sd, const ModelMapping& m, const TensorMap& targets) {
  std::map<std::string, const MappingRule*> by_source;
  std::map<std::string, std::string> source_of;  // aobench name → the source name that should fill it
  for (const auto& rule : m.rules) {
    by_source[rule.source] = &rule;
    if (rule.kind == Kind::kWeight) source_of[rule.target] = rule.source;
  }
  std::vector<std::string> unmapped, missing, wrong, broken;
  TensorMap out;
  for (const auto& name : sd.names) {
    const torch::Tensor& t = sd.tensors.at(name);
    auto rule_it = by_source.find(name);
    if (rule_it == by_source.end()) {
      unmapped.push_back(name + " " + shape_text(t));
      continue;
    }
    const MappingRule& rule = *rule_it->second;
    if (rule.kind == Kind::kWeight) {
      auto target = targets.find(rule.target);
      if (target == targets.end())
        broken.push_back(name + " → " + rule.target + ": aobench's " + m.plugin + " has no such parameter");
      else if (t.sizes() != target->second.sizes())
        wrong.push_back(name + " " + shape_text(t) + " → " + rule.target + " " + shape_text(target->second));
      else if (!t.is_floating_point())
        broken.push_back(name + ": " + std::string(c10::toString(t.scalar_type())) + ", not floating point");
      else
        out[rule.target] = t;
    } else if (rule.kind == Kind::kTied) {
      auto alias = sd.same_as.find(name);
      auto partner = sd.tensors.find(rule.target);
      const bool tied =
          (alias != sd.same_as.end() && alias->second == rule.target) ||
          (partner != sd.tensors.end() && partner->second.sizes() == t.sizes() && torch::equal(partner->second, t));
      if (!tied)
        broken.push_back(name + " is not tied to " + rule.target + " (another tensor), as the authors' file ties it");
    } else {
      const bool same = t.sizes() == rule.expected.sizes() &&
                        torch::allclose(t.to(torch::kFloat32), rule.expected, /*rtol=*/1e-6, /*atol=*/0.0);
      if (!same)
        broken.push_back(name + " " + shape_text(t) +
                         " holds other values than the constant the authors' file "
                         "computes (aobench computes it, it is no weight)");
    }
  }
  for (const auto& [name, t] : targets)
    if (!out.count(name)) {
      auto src = source_of.find(name);
      missing.push_back(name + (src == source_of.end() ? " (no rule names a source)" : " ← " + src->second));
    }
  if (unmapped.empty() && missing.empty() && wrong.empty() && broken.empty()) return out;
  std::ostringstream msg;
  msg << sd.origin << " does not map exactly onto aobench's " << m.plugin << " (rules of " << m.authors_file << "):";
  if (!unmapped.empty()) msg << "\n  unmapped (no rule for these source tensors): " << join_names(unmapped);
  if (!missing.empty()) msg << "\n  missing (aobench parameters nothing fills): " << join_names(missing);
  if (!wrong.empty()) msg << "\n  wrong shape (source → aobench): " << join_names(wrong);
  if (!broken.empty()) msg << "\n  " << join_names(broken);
  throw CheckpointError(msg.str(), "the tensors must be those of the authors' " + m.authors_file +
                                       " under the config the checkpoint names; a renamed, extra or reshaped tensor "
                                       "means another model or version (README, \"Importing the authors' "
                                       "checkpoints\", lists the tables). Nothing was written");
}

TensorMap map_ema(const std::vector<torch::Tensor>& shadows, const std::string& origin, const StateDict& sd,
                  const ModelMapping& m, const TensorMap& targets) {
  std::map<std::string, Kind> kind;
  for (const auto& rule : m.rules) kind[rule.source] = rule.kind;
  StateDict params;  // model.parameters(): the state dict without buffers (constants) and without tied aliases
  params.origin = origin;
  for (const auto& name : sd.names) {
    auto k = kind.find(name);
    if ((k != kind.end() && k->second != Kind::kWeight) || sd.same_as.count(name)) continue;
    params.names.push_back(name);
  }
  if (params.names.size() != shadows.size())
    throw CheckpointError(origin + " holds " + std::to_string(shadows.size()) + " tensors but the state dict has " +
                              std::to_string(params.names.size()) + " parameters",
                          "an EMA shadow list follows model.parameters() one to one; this one belongs to another "
                          "model. Nothing was written");
  std::vector<std::string> wrong;
  for (size_t i = 0; i < shadows.size(); ++i) {
    const torch::Tensor& p = sd.tensors.at(params.names[i]);
    if (shadows[i].sizes() != p.sizes())
      wrong.push_back("[" + std::to_string(i) + "] " + shape_text(shadows[i]) + " vs " + params.names[i] + " " +
                      shape_text(p));
    params.tensors[params.names[i]] = shadows[i];
  }
  if (!wrong.empty())
    throw CheckpointError(origin + ": shadows whose shape differs from their parameter: " + join_names(wrong),
                          "the shadow list follows model.parameters() in registration order; this one does not. "
                          "Nothing was written");
  TensorMap param_targets;  // EMA covers parameters; aobench's buffers (none today) keep their model values
  for (const auto& [name, t] : targets) param_targets[name] = t;
  return map_state_dict(params, m, param_targets);
}

}  // namespace aobench
