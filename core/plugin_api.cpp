// Implements: the default methods of ModelPlugin (see plugin_api.h); compiled into core so that plugins,
// which link only core, get them.
#include "core/plugin_api.h"

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

NllOutput ModelPlugin::elbo(const torch::Tensor&, int64_t, at::Generator&) {
  throw PluginError("plugin '" + info().name + "' has no diffusion ELBO",
                    "eval.mode=elbo applies to masked-diffusion encoders; use eval.mode=l2r or random");
}

torch::Tensor ModelPlugin::chain_log_probs(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&) {
  throw PluginError("plugin '" + info().name + "' cannot condition on arbitrary target positions",
                    "context-order ensembles need an any-order decoder (sigma_gpt, ao_gpt)");
}

torch::Tensor ModelPlugin::chain_log_probs_last(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                                                const torch::Tensor& targets) {
  return chain_log_probs(ctx_tokens, ctx_positions, targets).select(1, ctx_tokens.size(1) - 1);
}

}  // namespace aobench
