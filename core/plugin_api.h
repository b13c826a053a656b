// Implements: the contract between the aobench harness and a model plugin (DESIGN.md §3).
// A plugin is libaobench_<name>.so exporting the two C symbols made by AOBENCH_PLUGIN(Class).
// The registry reads aobench_plugin_api_version() before anything else and refuses a mismatch.
// Bump kPluginApiVersion on ANY change to the declarations in this file.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/order.h"

namespace aobench {

inline constexpr uint32_t kPluginApiVersion = 3;

// Build fingerprint: Boost.DLL gives no ABI promise, so plugin and harness must agree on these too.
inline std::string build_fingerprint() {
  return std::string("torch ") + TORCH_VERSION + "; gcc " + std::to_string(__GNUC__) + "." +
         std::to_string(__GNUC_MINOR__) + "; cxx11abi " + std::to_string(_GLIBCXX_USE_CXX11_ABI);
}

enum class Paradigm { kAutoregressive, kAnyOrder, kMaskedDiffusionEncoder };

inline const char* to_string(Paradigm p) {
  switch (p) {
    case Paradigm::kAutoregressive: return "autoregressive";
    case Paradigm::kAnyOrder: return "any_order";
    case Paradigm::kMaskedDiffusionEncoder: return "masked_diffusion_encoder";
  }
  return "?";
}

struct PluginInfo {
  std::string name;      // "gpt": also the folder, the library suffix and model.plugin in configs
  std::string version;   // plugin version, bumped when numbers it produces may change
  Paradigm paradigm;
  std::string summary;   // one line for `aobench list`
};

struct ParamGroup {
  std::vector<torch::Tensor> params;
  bool decay = true;     // AdamW weight decay applies to this group
};

// One training micro-batch. tokens are 1024-style windows straight from the token file.
struct TrainBatch {
  torch::Tensor tokens;  // (B, T) int64, on the model's device
  torch::Tensor order;   // (B, T) int64 permutations drawn by the harness's OrderSpec (decoder-only
                         // plugins); σ[b, k] = original position of the k-th token. Undefined for encoders.
};

struct LossOutput {
  torch::Tensor loss;                       // scalar, differentiable, mean per token
  std::map<std::string, double> metrics;    // extra scalars to log (e.g. "mask_rate")
};

// Per-token log-likelihoods of a chain-rule factorisation (exact) or of a bound.
struct NllOutput {
  torch::Tensor nll;     // (B, T) float64: −log p of the k-th token in generation order σ
  torch::Tensor scored;  // (B, T) bool: entries the model can score (false e.g. for a GPT's first token)
  bool is_bound = false; // true when nll is an upper bound (diffusion ELBO)
};

struct SampleRequest {
  int64_t batch_size = 1;
  int64_t length = 1024;
  int64_t steps = 1024;          // network calls / sampling steps (AR ignores it unless it parallelises)
  double temperature = 1.0;
  double top_p = 1.0;
  uint64_t seed = 0;
  bool float64_sampling = true;  // categorical draws in float64 (false = legacy float32 Gumbel path)
  std::string schedule = "linear"; // per-step token counts for any-order samplers
  std::string counts = "deterministic";  // any-order: the reference's integer counts, or "bernoulli" (Lemma 1)
  torch::Tensor prompt;          // optional (B, L) int64 ids; −1 = free position (prompting / infill)
  torch::Device device = torch::kCPU;
};

struct SampleOutput {
  torch::Tensor tokens;              // (B, L) int64 ids in [0, vocab)
  int64_t network_calls = 0;         // NFE actually made (caching samplers report fewer than steps)
  torch::Tensor order;               // (B, L) int64 generation order σ (any-order samplers), else undefined
};

class ModelPlugin {
 public:
  virtual ~ModelPlugin() = default;

  virtual PluginInfo info() const = 0;
  // {"flavours": {"debug": {...}, "tiny": {...}, "small": {...}, "medium": {...}}, "doc": {key: text}}.
  // Every key a config may set for this model appears in every flavour: unknown keys are errors.
  virtual nlohmann::json default_config() const = 0;
  // Receives the resolved `model` section (flavour defaults + user overrides). Throws ConfigError
  // naming the JSON path ("model.n_head") and the broken rule.
  virtual void configure(const nlohmann::json& model_config) = 0;
  // The model section as configure() resolved it, for config.resolved.json, checkpoints and results:
  // keys a plugin fills from elsewhere (gpt: the shape of an init_from_hf folder's config.json) hold the
  // values it built. Called after configure(); the default returns `model_config` unchanged.
  virtual nlohmann::json resolved_model_config(const nlohmann::json& model_config) const { return model_config; }
  virtual void build(torch::Device device) = 0;
  // The network, for parameters, named state (checkpoints), train()/eval() and to().
  virtual torch::nn::Module& module() = 0;
  // Decay / no-decay groups. Default rule (nanoGPT): tensors with ≥ 2 dims decay.
  virtual std::vector<ParamGroup> param_groups();
  // Forward+backward FLOPs per token at context T for MFU (6N + 12·L·d·T convention).
  virtual double flops_per_token(int64_t T) const = 0;
  virtual int64_t vocab_size() const = 0;       // ids a sample may contain: [0, vocab_size)
  virtual int64_t block_size() const = 0;

  // Training loss under the harness's order (decoder-only) or the plugin's noise process (encoder).
  virtual LossOutput loss(const TrainBatch& batch, at::Generator& gen) = 0;

  // Exact chain-rule NLL of `tokens` (B, T) under generation orders `order` (B, T): row k of the
  // result is −log p(x_σ(k) | x_σ(<k)). Decoder-only plugins do one causal forward; encoder-only
  // plugins mask σ(≥k) and make one network call per k (batched).
  virtual NllOutput log_prob(const torch::Tensor& tokens, const torch::Tensor& order,
                             at::Generator& gen) = 0;

  // Diffusion ELBO per token with `mc_steps` Monte-Carlo timesteps per sequence: (B, T) float64 whose
  // row sums are the per-sequence NLL bounds. Only for masked-diffusion encoders.
  virtual NllOutput elbo(const torch::Tensor& tokens, int64_t mc_steps, at::Generator& gen);

  // Any-order decoders only (context-order ensembles). Slot layout of spec-ao-gpt §1.1:
  //   ctx_tokens (N, S) int64  tokens in generation order; ctx_positions (N, S) their original positions;
  //   targets (N, S) int64     target position of each slot: slot 0 ([None]) predicts targets[:,0],
  //                            slot k ≥ 1 (reading ctx token k−1) predicts targets[:,k].
  // Returns (N, S, V) float32 log-probabilities. ctx_tokens[:, S−1] is never read.
  virtual torch::Tensor chain_log_probs(const torch::Tensor& ctx_tokens,
                                        const torch::Tensor& ctx_positions,
                                        const torch::Tensor& targets);
  // The last slot's row of chain_log_probs only: (N, V) float32. Ensembles need nothing else, and the
  // head over every slot would dominate their cost. Default: chain_log_probs(...)[:, S−1].
  virtual torch::Tensor chain_log_probs_last(const torch::Tensor& ctx_tokens,
                                             const torch::Tensor& ctx_positions,
                                             const torch::Tensor& targets);

  virtual SampleOutput sample(const SampleRequest& request) = 0;

  // Optional plugin-specific state beyond module() tensors to keep in checkpoints.
  virtual nlohmann::json extra_state() const { return nlohmann::json::object(); }
  virtual void load_extra_state(const nlohmann::json&) {}
};

}  // namespace aobench

// Export macro: one per plugin library.
#define AOBENCH_PLUGIN(PluginClass)                                                         \
  extern "C" __attribute__((visibility("default"))) uint32_t aobench_plugin_api_version() { \
    return ::aobench::kPluginApiVersion;                                                    \
  }                                                                                         \
  extern "C" __attribute__((visibility("default"))) const char* aobench_plugin_fingerprint() { \
    static const std::string fp = ::aobench::build_fingerprint();                           \
    return fp.c_str();                                                                      \
  }                                                                                         \
  extern "C" __attribute__((visibility("default"))) ::aobench::ModelPlugin* aobench_create_plugin() { \
    return new PluginClass();                                                               \
  }
