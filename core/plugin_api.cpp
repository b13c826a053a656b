// Implements: the default methods of ModelPlugin (see plugin_api.h); compiled into core so that plugins,
// which link only core, get them.
#include "core/plugin_api.h"

#include <algorithm>
#include <cmath>

#include "core/config.h"
#include "core/errors.h"

namespace aobench {

std::vector<ParamGroup> ModelPlugin::param_groups() {
  ParamGroup decay, no_decay;
  no_decay.decay = false;
  for (auto& p : module().parameters()) {
    if (!p.requires_grad()) continue;
    (p.dim() >= 2 ? decay : no_decay).params.push_back(p);
  }
  return {decay, no_decay};
}

void ModelPlugin::configure(const nlohmann::json& model_config) {
  model_config_ = model_config;
  configure_model(model_config);
}

double ModelPlugin::flops_per_token(int64_t T) const {
  auto& net = const_cast<ModelPlugin*>(this)->module();  // module() is not const; nothing is changed
  double n = 0;
  for (const auto& p : net.parameters()) n += double(p.numel());
  for (const auto& m : net.modules(/*include_self=*/true))
    if (const auto* e = m->as<torch::nn::Embedding>()) n -= double(e->weight.numel());
  const auto size = [&](const char* key) { return model_config_.value(key, int64_t(0)); };
  return 6.0 * n + 12.0 * double(size("n_layer")) * double(size("n_embd")) * double(T);
}

namespace {
// model.<key> of a configured plugin, for the defaults of vocab_size() / block_size().
int64_t model_size(const nlohmann::json& model, const char* key, const std::string& plugin) {
  const bool whole = model.contains(key) && model[key].is_number() &&
                     std::trunc(model[key].get<double>()) == model[key].get<double>();  // 2.0 from a --set is 2
  if (!whole)
    throw PluginError("plugin '" + plugin + "': model." + key + " is not set (or configure() was not called)",
                      std::string("a plugin without that key overrides ") + key + "() itself");
  return static_cast<int64_t>(model[key].get<double>());
}
}  // namespace

int64_t ModelPlugin::vocab_size() const { return model_size(model_config_, "vocab_size", info().name); }

int64_t ModelPlugin::block_size() const { return model_size(model_config_, "block_size", info().name); }

Scoring& ModelPlugin::require_scoring(const char* call) {
  Scoring* s = scoring();
  if (!s)
    throw PluginError("plugin '" + info().name + "' scores nothing (" + call + ")",
                      "it implements training only; evaluate a plugin that implements Scoring");
  return *s;
}

NllOutput ModelPlugin::log_prob(const torch::Tensor& tokens, const torch::Tensor& order, at::Generator& gen) {
  Scoring& s = require_scoring("log_prob");
  TORCH_CHECK(tokens.dim() == 2, info().name, ": log_prob tokens must be (B, T), got ", tokens.sizes());
  if (order.defined()) {
    TORCH_CHECK(order.sizes() == tokens.sizes(), info().name, ": order ", order.sizes(), " vs tokens ", tokens.sizes());
    if (!info().capabilities.any_order &&
        !torch::equal(order, torch::arange(tokens.size(1), order.options()).expand_as(order)))
      throw PluginError(info().name + " is left-to-right only: the order must be the identity (l2r) in every row",
                        "use eval.mode=l2r / train.order.kind=l2r for it, or an any-order plugin (sigma_gpt, ao_gpt)");
  }
  return s.log_prob(tokens, order, gen);
}

NllOutput ModelPlugin::elbo(const torch::Tensor& tokens, int64_t mc_steps, at::Generator& gen,
                            const torch::Tensor& keep) {
  Scoring& s = require_scoring("elbo");
  if (!info().capabilities.elbo)
    throw PluginError("plugin '" + info().name + "' has no diffusion ELBO",
                      "eval.mode=elbo applies to masked-diffusion encoders; use eval.mode=l2r or random");
  TORCH_CHECK(!keep.defined() || (keep.sizes() == tokens.sizes() && keep.scalar_type() == torch::kBool &&
                                  keep.device() == tokens.device()),
              "elbo: keep must be (B, T) bool on the tokens' device, got ", keep.sizes());
  return s.elbo(tokens, mc_steps, gen, keep);
}

namespace {
[[noreturn]] void no_chain(const std::string& name) {
  throw PluginError("plugin '" + name + "' cannot condition on arbitrary target positions",
                    "context-order ensembles need an any-order decoder (sigma_gpt, ao_gpt)");
}
}  // namespace

torch::Tensor ModelPlugin::chain_log_probs(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                                           const torch::Tensor& targets) {
  Scoring& s = require_scoring("chain_log_probs");
  if (!info().capabilities.chain_log_probs) no_chain(info().name);
  return s.chain_log_probs(ctx_tokens, ctx_positions, targets);
}

torch::Tensor ModelPlugin::chain_log_probs_last(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                                                const torch::Tensor& targets) {
  Scoring& s = require_scoring("chain_log_probs_last");
  if (!info().capabilities.chain_log_probs) no_chain(info().name);
  return s.chain_log_probs_last(ctx_tokens, ctx_positions, targets);
}

SampleOutput ModelPlugin::sample(const SampleRequest& request) {
  Sampling* s = sampling();
  if (!s)
    throw PluginError("plugin '" + info().name + "' does not sample",
                      "it implements no Sampling; generate with a plugin that does");
  check_sample_request(info(), block_size(), request);
  return s->generate(request);
}

// The defaults of Scoring's optional calls: reached only when a plugin declares a capability it does not
// implement (the entry points above refuse undeclared ones).
NllOutput Scoring::elbo(const torch::Tensor&, int64_t, at::Generator&, const torch::Tensor&) {
  throw PluginError("a plugin declares capabilities.elbo but implements no elbo()", "implement Scoring::elbo");
}

torch::Tensor Scoring::chain_log_probs(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&) {
  throw PluginError("a plugin declares capabilities.chain_log_probs but implements no chain_log_probs()",
                    "implement Scoring::chain_log_probs");
}

torch::Tensor Scoring::chain_log_probs_last(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                                            const torch::Tensor& targets) {
  return chain_log_probs(ctx_tokens, ctx_positions, targets).select(1, ctx_tokens.size(1) - 1);
}

void check_sample_request(const PluginInfo& info, int64_t block_size, const SampleRequest& request) {
  if (request.length > block_size || request.length < 1)
    throw ConfigError("sample length " + std::to_string(request.length) +
                          " must lie in [1, block_size=" + std::to_string(block_size) + "]",
                      "set sample.length");
  if (request.batch_size < 1)
    throw ConfigError("sample batch size " + std::to_string(request.batch_size) + " must be at least 1",
                      "set sample.batch_size");
  if (!request.prompt.defined()) return;
  TORCH_CHECK(request.prompt.dim() == 2, "sample: prompt must be (batch_size, length), got ", request.prompt.sizes());
  const auto given = request.prompt.to(torch::kCPU).ge(0);  // (B, L)
  if (!given.any().item<bool>()) return;
  // A prefix in every row: no given id after the first free position, i.e. given is non-increasing along L.
  const int64_t L = given.size(1);
  const bool prefix =
      L < 2 || !given.narrow(1, 1, L - 1).logical_and(given.narrow(1, 0, L - 1).logical_not()).any().item<bool>();
  const Capabilities& c = info.capabilities;
  const bool anywhere = c.infill || c.forced_tokens;
  if (anywhere || (prefix && c.prefix_prompt)) return;
  if (prefix)
    throw PluginError("plugin '" + info.name + "' cannot continue a prompt",
                      "sample it without a prompt file, or use a plugin that declares prefix prompts");
  throw PluginError("plugin '" + info.name + "' cannot infill: a prompt gives ids after a free (-1) position",
                    "a left-to-right model takes prefix prompts only (given ids first, then -1s); infilling needs "
                    "an any-order or diffusion model");
}

ModelConfig::ModelConfig(const nlohmann::json& model, const nlohmann::json& defaults, std::string plugin)
    : model_(model), plugin_(std::move(plugin)) {
  if (!model_.is_object()) throw ConfigError("'model' must be a JSON object", "e.g. {\"flavour\": \"debug\"}");
  std::vector<std::string> known;
  for (const auto& [name, flavour] : defaults.at("flavours").items())
    for (const auto& [k, v] : flavour.items())
      if (std::find(known.begin(), known.end(), k) == known.end()) known.push_back(k);
  for (const auto& [k, v] : model_.items()) {
    if (k == "plugin" || k == "flavour" || std::find(known.begin(), known.end(), k) != known.end()) continue;
    const std::string near = closest_name(k, known);
    throw ConfigError("unknown key 'model." + k + "' for plugin " + plugin_,
                      (near.empty() ? std::string() : "did you mean 'model." + near + "'? ") +
                          "known keys: " + join_names(known) + " (plugins/" + plugin_ + "/default.json)");
  }
}

const nlohmann::json& ModelConfig::at(const std::string& key, const char* type_name) const {
  if (!model_.contains(key))
    throw ConfigError("missing 'model." + key + "' (" + type_name + ")",
                      "every flavour of plugins/" + plugin_ + "/default.json defines it");
  return model_.at(key);
}

void ModelConfig::wrong_type(const std::string& key, const char* type_name) const {
  throw ConfigError("'model." + key + "' = " + brief(model_.at(key)) + " must be " + type_name,
                    "see the flavours and `doc` in plugins/" + plugin_ + "/default.json");
}

int64_t ModelConfig::get_int(const std::string& key, int64_t min) const {
  const int64_t v = get<int64_t>(key);
  if (v < min)
    throw ConfigError("'model." + key + "' = " + std::to_string(v) + " must be ≥ " + std::to_string(min),
                      "fix the value in the experiment file or --set");
  return v;
}

std::string ModelConfig::get_choice(const std::string& key, const std::vector<std::string>& allowed) const {
  const std::string v = get<std::string>(key);
  if (std::find(allowed.begin(), allowed.end(), v) == allowed.end())
    throw ConfigError("'model." + key + "' = \"" + v + "\" is not one of: " + join_names(allowed),
                      "see the `doc` of plugins/" + plugin_ + "/default.json");
  return v;
}

}  // namespace aobench
