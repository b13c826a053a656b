// Implements: the judge of generated text (`aobench genppl --judge`, eval.infill.judge): a left-to-right model
// loaded from an aobench gpt run or a Hugging Face GPT-2 folder (loaded by the gpt plugin's model.init_from_hf).
#pragma once
#include <memory>
#include <string>

#include <torch/torch.h>

#include "core/plugin_api.h"

namespace aobench {

struct Judge {
  std::unique_ptr<ModelPlugin> model;  // in eval mode on the device
  std::string description;             // "Hugging Face gpt2-large (/x/gpt2-large)"
  std::string tokenizer;               // the tokens it reads: "gpt2" for a Hugging Face GPT-2, a run's data.tokenizer
};

// An aobench run (config.resolved.json, checkpoints/ or state.json) of the gpt plugin, or a Hugging Face GPT-2
// folder (config.json + model.safetensors). ConfigError naming `key` ("--judge", "eval.infill.judge") and the path
// for anything else.
Judge load_judge(const std::string& path, torch::Device device, const std::string& key);

}  // namespace aobench
