// Implements: the name tables of `aobench import`, one per authors' model, and the strict mapper that applies them
// (README, "Importing the authors' checkpoints", lists the tables). A rule maps one tensor of the authors' state dict
// to one aobench parameter, declares it the same tensor as another source tensor (a tied head), or declares it a
// constant buffer aobench computes itself (the rotary inv_freq) whose value is checked. Nothing is mapped by
// position or by guess: every source tensor needs a rule, every aobench parameter a source, and the shapes agree.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "harness/import/authors_checkpoint.h"

namespace aobench {

struct MappingRule {
  enum class Kind { kWeight, kTied, kConstant };
  std::string source;  // the authors' state dict name, "transformer.h.0.attn.c_attn.weight"
  std::string target;  // kWeight: aobench's parameter; kTied: the source tensor it must be the same as
  Kind kind = Kind::kWeight;
  torch::Tensor expected;  // kConstant: the value it must hold (fp32, compared to 1e-6 relative)
};

// Everything one authors' model file needs: the aobench model section it maps to (from the checkpoint's own
// config: model_args or the Hydra config), the keys of it that the checkpoint fixes, and the name rules.
struct ModelMapping {
  std::string plugin;                   // ao_gpt | sigma_gpt | sedd | radd
  std::string authors_file;             // the authors' model file the rules follow
  nlohmann::json model;                 // aobench model.* keys read from the checkpoint
  std::vector<std::string> fixed_keys;  // model.* keys a --set may not change
  int64_t padded_rows = 0;              // AO-GPT / σ-GPT: wte rows (model.vocab_size must pad to them)
  std::vector<MappingRule> rules;
  std::vector<std::string> notes;  // one line each, printed: what was read and how
};

// The mapping of each model from its config, with the checks that refuse what cannot be mapped exactly (ConfigError
// naming the key, the exact difference and a hint). `args` is AO-GPT's / σ-GPT's model_args, `cfg` SEDD's / RADD's
// Hydra config; `where` names their origin. `sd` is the state dict (AO-GPT reads its conditioning width from wtpe).
ModelMapping ao_gpt_mapping(const nlohmann::json& args, const std::string& where, const StateDict& sd);
ModelMapping sigma_gpt_mapping(const nlohmann::json& args, const std::string& where);
ModelMapping sedd_mapping(const nlohmann::json& cfg, const std::string& where);
ModelMapping radd_mapping(const nlohmann::json& cfg, const std::string& where);

// Applies the rules to `sd`, filling `targets` (aobench's parameters and buffers by name, shapes as built): returns
// the mapped tensors by aobench name. One CheckpointError lists every source tensor without a rule, every aobench
// parameter left empty, every shape that differs, every tie or constant that does not hold; nothing is written then.
TensorMap map_state_dict(const StateDict& sd, const ModelMapping& m, const TensorMap& targets);

// The authors' EMA (ExponentialMovingAverage.shadow_params: one tensor per model.parameters() entry, in order) named:
// the state dict's names without its constants and tied aliases are the parameters, in registration order. The
// count and every shape must agree; the names then map through the same rules. `origin` names the list.
TensorMap map_ema(const std::vector<torch::Tensor>& shadows, const std::string& origin, const StateDict& sd,
                  const ModelMapping& m, const TensorMap& targets);

}  // namespace aobench
