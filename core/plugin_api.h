// Implements: the contract between the aobench harness and a model plugin. Everything a plugin author needs
// is in this file; nothing here refers to the harness (a plugin links core and plugins/common only).
//
// A plugin is libaobench_<name>.so built by aobench_add_plugin (cmake/AobenchPlugin.cmake) from
// plugins/<name>/: a class deriving from ModelPlugin, the line AOBENCH_PLUGIN(ThatClass) at the end of one
// source file, and default.json (its flavours, compiled in). The macro exports four C symbols: the API
// version (read before anything else; a mismatch is refused), the build fingerprint, the factory and the
// default config. Bump kPluginApiVersion on ANY change to the declarations in this file.
//
// The surface: ModelPlugin is the core every plugin implements (info, configure_model, build, module, loss;
// flops_per_token, vocab_size and block_size have defaults). Scoring (log_prob, and elbo / chain_log_probs when
// the capabilities say so) and Sampling (generate) are optional interfaces: a plugin that can score or sample
// derives from them too and returns itself from scoring() / sampling(). The harness calls ModelPlugin's
// log_prob / elbo / chain_log_probs / sample, which check the request against the capabilities (orders,
// prompts, lengths) before the plugin sees it, so a plugin never refuses what it did not declare. (A call on the
// plugin's own class reaches its Scoring / Sampling directly, unchecked: callers hold a ModelPlugin&.)
//
// Life of a plugin object: info() any time; configure(model section) once; build(device) once; then any
// number of loss / log_prob / elbo / chain_log_probs / sample calls, in train() or eval() mode as the caller
// sets on module(). Tensors come in on the model's device; the caller owns optimisers, autocast, orders,
// checkpoints and every loop. Bad model keys are ConfigError naming "model.<key>"; a call the plugin
// cannot serve is PluginError (core/errors.h); a shape bug is TORCH_CHECK.
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/order.h"

namespace aobench {

inline constexpr uint32_t kPluginApiVersion = 9;  // 9: elbo(…, keep); 8: Scoring / Sampling, configure_model

// Build fingerprint: Boost.DLL gives no ABI promise, so plugin and harness must agree on these too.
inline std::string build_fingerprint() {
  return std::string("torch ") + TORCH_VERSION + "; gcc " + std::to_string(__GNUC__) + "." +
         std::to_string(__GNUC_MINOR__) + "; cxx11abi " + std::to_string(_GLIBCXX_USE_CXX11_ABI);
}

enum class Paradigm { kAutoregressive, kAnyOrder, kMaskedDiffusionEncoder };

inline const char* to_string(Paradigm p) {
  switch (p) {
    case Paradigm::kAutoregressive:
      return "autoregressive";
    case Paradigm::kAnyOrder:
      return "any_order";
    case Paradigm::kMaskedDiffusionEncoder:
      return "masked_diffusion_encoder";
  }
  return "?";
}

// What a plugin can do beyond loss / log_prob under the identity order / unprompted sample, declared up
// front so callers check a flag instead of trying a call. A declared capability must work; an undeclared one is
// refused with PluginError by ModelPlugin's entry points before the plugin is called (orders, elbo,
// chain_log_probs, prompts); the conformance suite checks both for every plugin.
struct Capabilities {
  bool any_order = false;        // loss / log_prob under any permutation σ (else: the identity only)
  bool elbo = false;             // elbo(): a diffusion ELBO (eval.mode=elbo)
  bool chain_log_probs = false;  // chain_log_probs(_last): arbitrary target slots (eval.mode=ensemble)
  bool prefix_prompt = false;    // sample() with a prompt whose given ids form a prefix of every row
  bool infill = false;           // sample() with given ids anywhere, every draw conditioned on all of them
  bool forced_tokens = false;    // sample() with given ids anywhere, kept in place but seen only by the
                                 // draws after them (a left-to-right model's teacher forcing; not infilling)
};

// How the harness may run a plugin faster without changing what it computes (no capability: nothing a caller
// can ask of the plugin depends on them).
struct SpeedHints {
  bool capturable_loss = false;  // loss() makes no host read, draws nothing from gen and returns no metrics,
                                 // given an undefined batch.order when any_order is false (identity implied):
                                 // the trainer may record a whole training step once in a CUDA graph and
                                 // replay it on new batches
};

struct PluginInfo {
  std::string name;     // "gpt": also the folder, the library suffix and model.plugin in configs
  std::string version;  // semver "MAJOR.MINOR.PATCH": MINOR+ when numbers it produces may change,
                        // MAJOR+ when its checkpoints cannot be read any more
  Paradigm paradigm;
  std::string summary;  // one line for `aobench list`
  Capabilities capabilities;
  SpeedHints speed{};
};

struct ParamGroup {
  std::vector<torch::Tensor> params;
  bool decay = true;  // AdamW weight decay applies to this group
};

// One training micro-batch. tokens are 1024-style windows straight from the token file.
struct TrainBatch {
  torch::Tensor tokens;  // (B, T) int64, on the model's device
  torch::Tensor order;   // (B, T) int64 permutations drawn by the harness's OrderSpec (decoder-only
                         // plugins); σ[b, k] = original position of the k-th token. Undefined for encoders.
};

struct LossOutput {
  torch::Tensor loss;                     // scalar, differentiable, mean per token
  std::map<std::string, double> metrics;  // extra scalars to log (e.g. "mask_rate")
};

// Per-token log-likelihoods of a chain-rule factorisation (exact) or of a bound.
struct NllOutput {
  torch::Tensor nll;      // (B, T) float64: −log p of the k-th token in generation order σ
  torch::Tensor scored;   // (B, T) bool: entries the model can score (false e.g. for a GPT's first token)
  bool is_bound = false;  // true when nll is an upper bound (diffusion ELBO)
};

struct SampleRequest {
  int64_t batch_size = 1;
  int64_t length = 1024;
  int64_t steps = 1024;  // network calls / sampling steps (AR ignores it unless it parallelises)
  double temperature = 1.0;
  double top_p = 1.0;
  uint64_t seed = 0;
  bool float64_sampling = true;          // categorical draws in float64 (false = legacy float32 Gumbel path)
  std::string schedule = "linear";       // per-step token counts for any-order samplers
  std::string counts = "deterministic";  // any-order: the reference's integer counts, or "bernoulli" (Lemma 1)
  torch::Tensor prompt;                  // optional (B, L) int64 ids; −1 = free position (prompting / infill)
  torch::Device device = torch::kCPU;
};

struct SampleOutput {
  torch::Tensor tokens;       // (B, L) int64 ids in [0, vocab)
  int64_t network_calls = 0;  // NFE actually made (caching samplers report fewer than steps)
  torch::Tensor order;        // (B, L) int64 generation order σ (any-order samplers), else undefined
};

// Optional: likelihoods (aobench eval). Called through ModelPlugin's entry points of the same names, which have
// checked the request; under NoGradGuard and eval().
class Scoring {
 public:
  virtual ~Scoring() = default;
  // Exact chain-rule NLL of `tokens` (B, T) under generation orders `order` (B, T): row k of the result is
  // −log p(x_σ(k) | x_σ(<k)). Decoder-only plugins do one causal forward; encoder-only plugins mask σ(≥k) and
  // make one network call per k (batched). Without capabilities.any_order the order is the identity (checked).
  virtual NllOutput log_prob(const torch::Tensor& tokens, const torch::Tensor& order, at::Generator& gen) = 0;
  // capabilities.elbo: diffusion ELBO per token with `mc_steps` Monte-Carlo timesteps per sequence: (B, T)
  // float64 whose row sums are the per-sequence NLL bounds, is_bound = true. `keep` (B, T) bool, when
  // defined, marks positions the forward process never masks (their terms are 0): the row sums then bound
  // −log p(x_masked-able | x_keep), the conditional ELBO of infilling.
  virtual NllOutput elbo(const torch::Tensor& tokens, int64_t mc_steps, at::Generator& gen, const torch::Tensor& keep);
  // capabilities.chain_log_probs (context-order ensembles of any-order decoders). Slot layout:
  //   ctx_tokens (N, S) int64  tokens in generation order; ctx_positions (N, S) their original positions;
  //   targets (N, S) int64     target position of each slot: slot 0 (the start slot) predicts targets[:,0],
  //                            slot k ≥ 1 (reading ctx token k−1) predicts targets[:,k].
  // Returns (N, S, V) float32 log-probabilities. ctx_tokens[:, S−1] is never read.
  virtual torch::Tensor chain_log_probs(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                                        const torch::Tensor& targets);
  // The last slot's row of chain_log_probs only: (N, V) float32. Ensembles need nothing else, and the head over
  // every slot would dominate their cost. Default: chain_log_probs(...)[:, S−1].
  virtual torch::Tensor chain_log_probs_last(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                                             const torch::Tensor& targets);
};

// Optional: generation (aobench sample / genppl / speed), through ModelPlugin::sample.
class Sampling {
 public:
  virtual ~Sampling() = default;
  // request.batch_size rows of request.length ids, reproducible from request.seed, on request.device; given
  // prompt ids (≥ 0) appear unchanged in the output. The request is checked already: 1 ≤ length ≤ block_size(),
  // batch_size ≥ 1, a prompt (when defined) of rank 2 that the capabilities cover. Runs in eval mode and
  // restores the caller's.
  virtual SampleOutput generate(const SampleRequest& request) = 0;
};

class ModelPlugin {
 public:
  virtual ~ModelPlugin() = default;

  // Name, semver version, paradigm, one-line summary and capabilities; constant, callable before configure().
  virtual PluginInfo info() const = 0;
  // Keeps the resolved `model` section (the flavour of default.json merged with the user's overrides plus
  // "plugin" and "flavour"; the harness has already refused unknown keys and wrong JSON types) for model_config()
  // and the defaults below, then calls configure_model().
  void configure(const nlohmann::json& model_config);
  // The model section as configure() resolved it, for config.resolved.json, checkpoints and results:
  // keys a plugin fills from elsewhere (gpt: the shape of an init_from_hf folder's config.json) hold the
  // values it built. Called after configure(); the default returns `model_config` unchanged.
  virtual nlohmann::json resolved_model_config(const nlohmann::json& model_config) const { return model_config; }
  // Creates the network on `device`, initialised from the global torch generator (the caller seeds it).
  virtual void build(torch::Device device) = 0;
  // The network: its named parameters and buffers are the checkpoint; the caller sets train()/eval().
  virtual torch::nn::Module& module() = 0;
  // Decay / no-decay groups. Default rule (nanoGPT): tensors with ≥ 2 dims decay.
  virtual std::vector<ParamGroup> param_groups();
  // Forward+backward FLOPs per token at context T for MFU (6N + 12·L·d·T convention). Default: N = every
  // parameter of module() but the tables of its torch::nn::Embedding modules (lookups, no FLOPs), L and d the
  // model section's n_layer and n_embd (0 when it has none). A tied output head is a matmul over an embedding
  // table: such a plugin counts it itself.
  virtual double flops_per_token(int64_t T) const;
  // Ids a sample may contain, [0, vocab_size): default model.vocab_size.
  virtual int64_t vocab_size() const;
  // The longest sequence loss / log_prob / sample accept: default model.block_size.
  virtual int64_t block_size() const;

  // Training loss under the harness's order (decoder-only) or the plugin's noise process (encoder): a
  // scalar mean per token the caller backpropagates. Draw all randomness from `gen` (CPU).
  virtual LossOutput loss(const TrainBatch& batch, at::Generator& gen) = 0;

  // The optional interfaces: the plugin itself when it implements them, else nullptr (the default).
  virtual Scoring* scoring() { return nullptr; }
  virtual Sampling* sampling() { return nullptr; }

  // The harness's entry points. Each refuses with PluginError, naming the plugin and what it lacks, what the
  // plugin does not declare: scoring at all, an order other than the identity without capabilities.any_order,
  // elbo / chain_log_probs without their capability, sampling at all, a prompt the capabilities do not cover
  // (check_sample_request, which also checks sizes); then calls the plugin's Scoring / Sampling.
  NllOutput log_prob(const torch::Tensor& tokens, const torch::Tensor& order, at::Generator& gen);
  NllOutput elbo(const torch::Tensor& tokens, int64_t mc_steps, at::Generator& gen,
                 const torch::Tensor& keep = torch::Tensor());
  torch::Tensor chain_log_probs(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                                const torch::Tensor& targets);
  torch::Tensor chain_log_probs_last(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                                     const torch::Tensor& targets);
  SampleOutput sample(const SampleRequest& request);

  // Named scalars describing the model's state (not a batch), e.g. ao_gpt's mean |adaLN gate| per block
  // "gate_attn/l0": the trainer logs them every train.log_interval on the main rank as "diag/<name>" (a name
  // "<group>/<member>" is summarised on the log line as the group's min…max). Keep it to a few small device
  // ops and one host read; no randomness, no collectives. Default: none.
  virtual std::map<std::string, double> diagnostics() { return {}; }

  // Optional plugin-specific state beyond module() tensors to keep in checkpoints.
  virtual nlohmann::json extra_state() const { return nlohmann::json::object(); }
  virtual void load_extra_state(const nlohmann::json&) {}

 protected:
  // Reads the model section with ModelConfig below and checks the plugin's own rules (positive sizes,
  // n_embd % n_head, enumerations), throwing ConfigError naming "model.<key>". Keep what was read; build
  // nothing yet.
  virtual void configure_model(const nlohmann::json& model_config) = 0;
  // The section configure() received (an empty object before).
  const nlohmann::json& model_config() const { return model_config_; }

 private:
  Scoring& require_scoring(const char* call);
  nlohmann::json model_config_ = nlohmann::json::object();
};

// What sample() checks before generate(): ConfigError unless 1 ≤ request.length ≤ `block_size` and
// request.batch_size ≥ 1; PluginError unless `request.prompt` (when defined) needs only what `info.capabilities`
// declares: a prompt whose given ids (≥ 0) are a prefix of every row needs prefix_prompt (or infill /
// forced_tokens), any other needs infill or forced_tokens.
void check_sample_request(const PluginInfo& info, int64_t block_size, const SampleRequest& request);

// The resolved `model` section as configure() reads it: one typed getter for every plugin. Errors are
// ConfigError naming "model.<key>" with a hint pointing at plugins/<plugin>/default.json. The harness has
// checked keys and types against the flavour already; the checks here serve direct callers (tests, tools).
class ModelConfig {
 public:
  // Refuses keys that no flavour of `defaults` (default.json: {"flavours": {...}}) defines, besides
  // "plugin" and "flavour" ("did you mean …?").
  ModelConfig(const nlohmann::json& model, const nlohmann::json& defaults, std::string plugin);
  bool has(const std::string& key) const { return model_.contains(key); }
  // T = int64_t (an integer, or a float with an integral value), double (any number), bool, std::string.
  template <typename T>
  T get(const std::string& key) const;
  // get<int64_t> that must be ≥ min.
  int64_t get_int(const std::string& key, int64_t min) const;
  // get<std::string> that must be one of `allowed`.
  std::string get_choice(const std::string& key, const std::vector<std::string>& allowed) const;

 private:
  const nlohmann::json& at(const std::string& key, const char* type_name) const;
  [[noreturn]] void wrong_type(const std::string& key, const char* type_name) const;
  nlohmann::json model_;
  std::string plugin_;
};

template <typename T>
T ModelConfig::get(const std::string& key) const {
  if constexpr (std::is_same_v<T, bool>) {
    const auto& v = at(key, "true or false");
    if (!v.is_boolean()) wrong_type(key, "true or false");
    return v.get<bool>();
  } else if constexpr (std::is_same_v<T, int64_t>) {
    const auto& v = at(key, "an integer");
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float() && std::trunc(v.get<double>()) == v.get<double>() && std::abs(v.get<double>()) < 9e18)
      return static_cast<int64_t>(v.get<double>());  // 2.0 from a --set is 2
    wrong_type(key, "an integer");
  } else if constexpr (std::is_same_v<T, double>) {
    const auto& v = at(key, "a number");
    if (!v.is_number()) wrong_type(key, "a number");
    return v.get<double>();
  } else {
    static_assert(std::is_same_v<T, std::string>, "ModelConfig::get<T>: T is int64_t, double, bool or std::string");
    const auto& v = at(key, "a string");
    if (!v.is_string()) wrong_type(key, "a string");
    return v.get<std::string>();
  }
}

}  // namespace aobench

// The plugin's default.json text (compiled in by aobench_add_plugin), exported by AOBENCH_PLUGIN.
extern "C" __attribute__((visibility("default"))) const char* aobench_plugin_default_config();

namespace aobench {
// Inside a plugin (and its test binary): default.json parsed, e.g. for ModelConfig and its tests.
inline nlohmann::json plugin_default_config() { return nlohmann::json::parse(aobench_plugin_default_config()); }
}  // namespace aobench

// Export macro: one per plugin library, after the class. The four C symbols are the whole ABI.
#define AOBENCH_PLUGIN(PluginClass)                                                                   \
  extern "C" const char* aobench_plugin_default_json();                                               \
  extern "C" __attribute__((visibility("default"))) uint32_t aobench_plugin_api_version() {           \
    return ::aobench::kPluginApiVersion;                                                              \
  }                                                                                                   \
  extern "C" __attribute__((visibility("default"))) const char* aobench_plugin_fingerprint() {        \
    static const std::string fp = ::aobench::build_fingerprint();                                     \
    return fp.c_str();                                                                                \
  }                                                                                                   \
  extern "C" __attribute__((visibility("default"))) const char* aobench_plugin_default_config() {     \
    return aobench_plugin_default_json();                                                             \
  }                                                                                                   \
  extern "C" __attribute__((visibility("default"))) ::aobench::ModelPlugin* aobench_create_plugin() { \
    return new PluginClass();                                                                         \
  }
