// Implements: training checkpoints (DESIGN.md §3): one directory per checkpoint,
//   <run>/checkpoints/step_<N>/model.safetensors   module() parameters and buffers (raw weights)
//                               ema.safetensors     EMA shadow weights (when EMA is on)
//                               optim.safetensors   AdamW moments and per-parameter step counts
//                               state.json          format_version, plugin, flavour, step, tokens seen,
//                                                   RNG states (hex), EMA update count, resolved config,
//                                                   sha256 of every file above
// written to a temporary directory, fsynced and renamed, then <run>/checkpoints/latest updated
// atomically. Loading verifies the checksums and that plugin and flavour match.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/safetensors.h"

namespace aobench {

class BatchSampler;
class ModelPlugin;

inline constexpr int kCheckpointFormatVersion = 1;

struct CheckpointData {
  nlohmann::json state;  // state.json contents (see above)
  TensorMap model;       // module() named parameters + buffers
  TensorMap ema;         // empty when EMA is off
  TensorMap optimizer;   // "<param>.exp_avg", "<param>.exp_avg_sq", "<param>.step"
};

// Writes <run_dir>/checkpoints/step_<step> atomically: files go to checkpoints/.tmp_step_<step>, are
// fsynced, the directory is renamed to step_<step>, then checkpoints/latest is replaced atomically.
// Fills state["format_version"], state["step"] and state["sha256"] {file: hex}; keeps only the newest
// `keep` step_* directories (keep ≤ 0 keeps all). Returns the checkpoint directory.
std::string save_checkpoint(const std::string& run_dir, int64_t step, CheckpointData data, int64_t keep);

// SHA-256 of a byte string / of a file's contents, lowercase hex (FIPS 180-4; used for checkpoints).
std::string sha256_hex(const std::string& bytes);
std::string sha256_file(const std::string& path);

// Path of the newest complete checkpoint of a run directory, if any.
std::optional<std::string> latest_checkpoint(const std::string& run_dir);

// Loads and verifies (checksums, format_version). Throws CheckpointError naming the file.
CheckpointData load_checkpoint(const std::string& checkpoint_dir);

// Builds the plugin described by a run directory's latest checkpoint (or an explicit checkpoint
// directory), loads weights — EMA weights when present and `prefer_ema` — and returns it in eval mode
// together with the resolved config saved in the checkpoint.
struct LoadedModel {
  std::unique_ptr<ModelPlugin> model;
  nlohmann::json config;
  int64_t step = 0;
  int64_t tokens = -1;  // training tokens over all ranks, as the checkpoint recorded them; -1: not recorded
  bool ema_weights = false;
};
LoadedModel load_model_for_eval(const std::string& run_or_checkpoint_dir, torch::Device device, bool prefer_ema = true);
// A Hugging Face GPT-2 folder (config.json + model.safetensors) ready to evaluate or sample without a
// training run: the gpt plugin with model.init_from_hf = folder, step 0; the config records the loaded shape
// and model.flavour "hf".
LoadedModel load_hf_gpt2(const std::string& folder, torch::Device device);

// Every RNG stream the training loop draws from, hex-encoded for state.json "rng": "data" (the batch
// sampler), "order" (orders and the plugin's noise), "torch_cpu" (the global CPU generator: init, dropout)
// and, on CUDA, "cuda" (the device's default generator).
nlohmann::json encode_rng_state(const BatchSampler& sampler, const at::Generator& order, torch::Device device);
// Restores what encode_rng_state wrote ("cuda" only on CUDA and when present). Bad hex is a CheckpointError.
void restore_rng_state(const nlohmann::json& rng, BatchSampler& sampler, at::Generator& order, torch::Device device);

// rm -rf of a directory tree (POSIX nftw; std::filesystem::remove_all can crash beside the pip libtorch.so, see
// checkpoint.cpp). A missing path is no error; CheckpointError naming the path otherwise.
void remove_directory_tree(const std::string& path);

// Copies tensors into module() by name; throws CheckpointError listing missing/unexpected/mis-shaped names.
void load_module_state(torch::nn::Module& module, const TensorMap& tensors, const std::string& origin);
TensorMap module_state(const torch::nn::Module& module);  // named parameters + buffers, CPU copies

}  // namespace aobench
