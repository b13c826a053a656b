// Implements: harness/tasks/judge.h.
#include "harness/tasks/judge.h"

#include <filesystem>

#include "core/config_types.h"
#include "core/errors.h"
#include "harness/registry.h"
#include "harness/resolve_config.h"
#include "harness/train/checkpoint.h"

namespace aobench {
namespace fs = std::filesystem;

Judge load_judge(const std::string& path, torch::Device device, const std::string& key) {
  const fs::path p(path);
  Judge j;
  if (fs::exists(p / "config.resolved.json") || fs::exists(p / "checkpoints") || fs::exists(p / "state.json")) {
    LoadedModel loaded = load_model_for_eval(path, device, /*prefer_ema=*/true);
    if (loaded.model->info().name != "gpt")
      throw ConfigError(key + " '" + path + "' is a " + loaded.model->info().name +
                            " run; the judge must be a "
                            "left-to-right gpt model",
                        "pass a gpt run or a Hugging Face GPT-2 folder");
    j.model = std::move(loaded.model);
    j.tokenizer = DataConfig::from_json(loaded.config).tokenizer;
    j.description =
        "aobench gpt run " + path + " step " + std::to_string(loaded.step) + (loaded.ema_weights ? " (EMA)" : "");
  } else if (fs::exists(p / "config.json")) {
    if (!fs::exists(p / "model.safetensors"))
      throw ConfigError(key + " '" + path + "' has config.json but no model.safetensors",
                        "download the safetensors weights of the GPT-2 model into the folder");
    nlohmann::json patch = {
        {"model",
         {{"plugin", "gpt"}, {"flavour", "small"}, {"init_from_hf", path}, {"bias", true}, {"start_token", false}}}};
    const nlohmann::json config = resolve_config(patch, {}, key + " " + path);
    j.model = PluginRegistry::instance().create("gpt");
    j.model->configure(config.at("model"));
    j.model->build(device);
    j.description = "Hugging Face " + p.lexically_normal().filename().string() + " (" + path + ")";
    j.tokenizer = "gpt2";
  } else {
    throw ConfigError(key + " '" + path + "' is neither an aobench run nor a Hugging Face GPT-2 folder",
                      "a run has config.resolved.json and checkpoints/; an HF folder has config.json and "
                      "model.safetensors");
  }
  j.model->module().eval();
  return j;
}

}  // namespace aobench
