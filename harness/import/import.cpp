// Implements: harness/import/import.h. Per model: where its checkpoint keeps the state dict, the EMA and the config
// (train_AOGPT_CL.py / train_CADD.py: {model, ema_model, model_args, iter_num, config}; SEDD / RADD utils.py:
// {model, ema, step, optimizer} beside a Hydra config, or a Hugging Face folder), then the strict name mapping
// (mappings.h), the plugin built and loaded by name, and the run folder written as `aobench train` writes one.
#include "harness/import/import.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include "core/errors.h"
#include "core/plugin_api.h"
#include "harness/import/authors_checkpoint.h"
#include "harness/import/mappings.h"
#include "harness/registry.h"
#include "harness/resolve_config.h"
#include "harness/run_dir.h"
#include "harness/run_record.h"
#include "harness/train/checkpoint.h"

namespace aobench {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr int64_t kGpt2Vocab = 50257;  // GPT-2 BPE: the tokenizer of all four releases

json plain(const nlohmann::ordered_json* j) { return j ? json::parse(j->dump()) : json(); }

int64_t int_or(const json& obj, const std::string& key, int64_t fallback) {
  return obj.is_object() && obj.contains(key) && obj[key].is_number_integer() ? obj[key].get<int64_t>() : fallback;
}

// What one checkpoint holds, found where its authors' code puts it.
struct Located {
  StateDict weights;
  std::optional<std::vector<torch::Tensor>> ema;  // shadow_params, in model.parameters() order
  std::string ema_origin;
  json ema_info;                // {decay, num_updates} as the checkpoint states them
  int64_t step = 0;             // iter_num / step; 0 when the checkpoint does not say (a Hugging Face release)
  int64_t tokens_per_step = 0;  // global batch × length when the config says it; 0 = unknown
  int64_t micro_batch = 0, accumulation = 0;  // train.batch_size; global_batch_size = micro_batch × accumulation
  json authors_config;                        // recorded in state.json
  ModelMapping mapping;
};

// The checkpoint's EMA under `key` ({shadow_params, decay, num_updates}, torch_ema's state), when it has one.
void take_ema(const AuthorsCheckpoint& ck, const std::string& key, Located& at) {
  if (!ck.find({key, "shadow_params"})) return;
  at.ema = ck.tensor_list({key, "shadow_params"});
  at.ema_origin = ck.where({key, "shadow_params"});
  const json e = plain(ck.find({key}));
  at.ema_info = {{"decay", e.value("decay", json())}, {"num_updates", e.value("num_updates", json())}};
}

// nanoGPT's torch.compile wrapper prefixes every name with "_orig_mod."; their train script strips it on resume.
void strip_compile_prefix(StateDict& sd, std::vector<std::string>& notes) {
  const std::string prefix = "_orig_mod.";
  for (const auto& n : sd.names)
    if (n.rfind(prefix, 0) != 0) return;
  StateDict out;
  out.origin = sd.origin;
  for (const auto& n : sd.names) {
    const std::string s = n.substr(prefix.size());
    out.names.push_back(s);
    out.tensors[s] = sd.tensors.at(n);
    if (sd.same_as.count(n)) out.same_as[s] = sd.same_as.at(n).substr(prefix.size());
  }
  sd = std::move(out);
  notes.push_back("every name carried torch.compile's '_orig_mod.' prefix: stripped, as their resume code does");
}

Located locate_nanogpt(const AuthorsCheckpoint& ck, const std::string& plugin) {
  if (ck.kind != "converted torch checkpoint")
    throw CheckpointError("'" + ck.folder + "' is a " + ck.kind + "; the authors' " + plugin +
                              " checkpoints are torch.save files (ckpt_<iter>.pt)",
                          "convert the .pt with python3 scripts/convert_torch_checkpoint.py ckpt.pt OUT_DIR");
  Located at;
  at.weights = ck.state_dict({"model"});
  std::vector<std::string> notes;
  strip_compile_prefix(at.weights, notes);
  const json args = plain(ck.find({"model_args"}));
  if (args.is_null())
    throw CheckpointError(ck.where({"model_args"}) + " is missing",
                          "the training scripts save model_args beside the weights; is this their checkpoint?");
  at.mapping = plugin == "ao_gpt" ? ao_gpt_mapping(args, ck.where({"model_args"}), at.weights)
                                  : sigma_gpt_mapping(args, ck.where({"model_args"}));
  at.mapping.notes.insert(at.mapping.notes.begin(), notes.begin(), notes.end());
  take_ema(ck, "ema_model", at);
  const json config = plain(ck.find({"config"}));
  const json iter = plain(ck.find({"iter_num"}));
  at.step = iter.is_number_integer() ? iter.get<int64_t>() : 0;
  // Their batch: batch_size per GPU × gradient_accumulation_steps summed over GPUs (the script divides it by the
  // world size), so one step is batch_size × gradient_accumulation_steps × block_size tokens wherever it ran.
  at.micro_batch = int_or(config, "batch_size", 0);
  at.accumulation = int_or(config, "gradient_accumulation_steps", 0);
  if (at.micro_batch > 0 && at.accumulation > 0)
    at.tokens_per_step = at.micro_batch * at.accumulation * int_or(args, "block_size", 0);
  at.authors_config = {{"model_args", args}, {"config", config}, {"iter_num", iter}};
  return at;
}

Located locate_encoder(const AuthorsCheckpoint& ck, const std::string& plugin) {
  if (ck.config.is_null())
    throw CheckpointError("'" + ck.folder + "' has no config.json and no --config was given",
                          plugin == "sedd" || plugin == "radd"
                              ? "pass their Hydra config: python3 scripts/convert_torch_checkpoint.py CHECKPOINT.pth "
                                "OUT_DIR --config RUN/.hydra/config.yaml writes OUT_DIR/config.json"
                              : "");
  Located at;
  const std::string where = "'" + ck.config_file + "'";
  at.mapping = plugin == "sedd" ? sedd_mapping(ck.config, where) : radd_mapping(ck.config, where);
  const auto* model = ck.find({"model"});
  if (ck.kind == "converted torch checkpoint" && model && model->is_object() && !model->contains("__tensor__")) {
    at.weights = ck.state_dict({"model"});  // utils.save_checkpoint: {optimizer, model, ema, step}
    take_ema(ck, "ema", at);
    const json step = plain(ck.find({"step"}));
    at.step = step.is_number_integer() ? step.get<int64_t>() : 0;
  } else {
    at.weights = ck.state_dict({});  // a Hugging Face release or a converted pytorch_model.bin: the state dict itself
  }
  // Their training.batch_size is the global batch per step (split over GPUs and training.accum micro-steps).
  const json training = ck.config.value("training", json::object());
  const int64_t batch = int_or(training, "batch_size", 0), accum = int_or(training, "accum", 1);
  if (batch > 0 && accum > 0 && batch % accum == 0) {
    at.micro_batch = batch / accum;
    at.accumulation = accum;
    at.tokens_per_step = batch * at.mapping.model["block_size"].get<int64_t>();
  }
  at.authors_config = ck.config;
  return at;
}

// The plugin flavour whose shape the checkpoint has (small / medium for the releases), else debug: the flavour only
// supplies the keys the checkpoint does not fix (chain_chunk, sampler choices).
std::string matching_flavour(const ModelMapping& m) {
  for (const char* f : {"debug", "tiny", "small", "medium"}) {
    const json d = flavour_defaults(m.plugin, f);
    bool same = true;
    for (const char* k : {"n_layer", "n_head", "n_embd"}) same = same && d.value(k, json()) == m.model.value(k, json());
    if (same) return f;
  }
  return "debug";
}

std::string run_name_of(const std::string& out) {
  const fs::path p = fs::path(out).lexically_normal();
  return p.filename().empty() ? p.parent_path().filename().string() : p.filename().string();
}

}  // namespace

std::string ImportTask::command_line() const {
  std::string line = "--model " + model + " --from " + from + " --out " + out;
  if (!config.empty()) line += " --config " + config;
  return line + overrides.command_line() + (force ? " --force" : "");
}

void run_import(const ImportTask& task) {
  if (task.model != "ao_gpt" && task.model != "sigma_gpt" && task.model != "sedd" && task.model != "radd")
    throw ConfigError("--model '" + task.model + "' has no import", std::string("use one of ao_gpt, sigma_gpt, sedd, "
                                                                                "radd; ") +
                                                                        kImportUsage);
  if (task.from.empty() || task.out.empty()) throw ConfigError("aobench import needs --from and --out", kImportUsage);
  const std::string name = run_name_of(task.out);
  if (name.empty() || name == "." || name == "..")
    throw ConfigError("--out '" + task.out + "' names no folder",
                      "give the run folder to create, e.g. runs/aogpt_small");
  std::error_code ec;
  if (fs::exists(fs::symlink_status(task.out, ec)) && !task.force)
    throw ConfigError("--out '" + task.out + "' exists", "pass --force to replace it, or choose another folder");
  task.overrides.require_within(
      {"data.tokenizer", "model", "train.device", "train.dtype", "eval", "sample", "genppl", "speed", "perf"},
      "aobench import takes data.tokenizer, model.*, train.device, train.dtype, eval.*, sample.*, genppl.*, speed.* "
      "and perf.* overrides",
      "the weights fix the rest; training on from an imported run is not supported");

  const AuthorsCheckpoint ck = read_authors_checkpoint(task.from, task.config);
  Located at = task.model == "ao_gpt" || task.model == "sigma_gpt" ? locate_nanogpt(ck, task.model)
                                                                   : locate_encoder(ck, task.model);
  const ModelMapping& m = at.mapping;

  // The config: the checkpoint's shape on the matching flavour, GPT-2's tokenizer (all four releases use it).
  json model = m.model;
  model["plugin"] = m.plugin;
  model["flavour"] = matching_flavour(m);
  if (m.padded_rows > 0) model["vocab_size"] = kGpt2Vocab;  // the real vocabulary under wte's padded rows
  json train = {{"out_dir", task.out}, {"ema", at.ema ? at.ema_info.value("decay", json(0.9999)) : json(0.0)}};
  if (!train["ema"].is_number()) train["ema"] = 0.9999;
  if (at.micro_batch > 0 && at.accumulation > 0)
    train.update({{"batch_size", at.micro_batch}, {"global_batch_size", at.micro_batch * at.accumulation}});
  if (at.step > 0) train["max_iters"] = at.step;
  json config = resolve_config({{"model", model}, {"data", {{"tokenizer", "gpt2"}}}, {"train", train}}, task.overrides,
                               "aobench import");
  for (const auto& key : m.fixed_keys)
    if (config["model"][key] != m.model[key])
      throw ConfigError("model." + key + " = " + brief(config["model"][key]) + " differs from the checkpoint's " +
                            brief(m.model[key]),
                        "the checkpoint fixes model." + key + "; drop that --set");
  const int64_t vocab = config["model"]["vocab_size"].get<int64_t>();
  if (m.padded_rows > 0 && (vocab + 63) / 64 * 64 != m.padded_rows)
    throw ConfigError("model.vocab_size = " + std::to_string(vocab) + " pads to " +
                          std::to_string((vocab + 63) / 64 * 64) + " rows, but the checkpoint's wte has " +
                          std::to_string(m.padded_rows) + " (model_args.vocab_size)",
                      "set the real vocabulary under the padded rows: --set model.vocab_size=N (GPT-2: 50257)");

  // The network as aobench builds it, filled by name: the mapper's checks, then load_module_state's.
  std::unique_ptr<ModelPlugin> plugin = PluginRegistry::instance().create(m.plugin);
  plugin->configure(config.at("model"));
  config["model"] = plugin->resolved_model_config(config.at("model"));
  plugin->build(torch::kCPU);
  TensorMap targets, param_targets;
  for (const auto& p : plugin->module().named_parameters()) targets[p.key()] = param_targets[p.key()] = p.value();
  for (const auto& b : plugin->module().named_buffers()) targets[b.key()] = b.value();
  const TensorMap weights = map_state_dict(at.weights, m, targets);
  load_module_state(plugin->module(), weights, at.weights.origin);
  TensorMap ema;
  if (at.ema)
    for (auto& [k, v] : map_ema(*at.ema, at.ema_origin, at.weights, m, param_targets))
      ema[k] = v.to(torch::kFloat32).contiguous().clone();  // the plugin's parameters are fp32, as a trained run's

  // Print what was read and done.
  std::cout << "import: " << m.plugin << " from " << ck.folder << " (" << ck.kind;
  if (ck.source.contains("file")) std::cout << " of " << ck.source["file"].get<std::string>();
  std::cout << "), rules of " << m.authors_file << "\n";
  std::cout << "import: model " << brief(m.model, 200) << " → flavour " << config["model"]["flavour"].get<std::string>()
            << " + these keys"
            << (m.padded_rows > 0
                    ? ", vocab_size " + std::to_string(vocab) + " (wte rows " + std::to_string(m.padded_rows) + ")"
                    : "")
            << "\n";
  for (const auto& note : m.notes) std::cout << "import: " << note << "\n";
  std::cout << "import: " << weights.size() << " tensors mapped by name from " << at.weights.origin << "\n";
  if (at.ema)
    std::cout << "import: EMA weights present (" << at.ema_origin << ", " << brief(at.ema_info)
              << "): written as ema.safetensors; eval, sample and genppl use them, as the authors evaluate\n";
  else
    std::cout << "import: no EMA weights in the checkpoint: the model's weights are used\n";

  // The run folder, written beside --out and renamed into place.
  CheckpointData data;
  data.model = module_state(plugin->module());
  data.ema = ema;
  const int64_t tokens = at.step * at.tokens_per_step;
  json mapping_table = json::array();
  for (const auto& r : m.rules)
    mapping_table.push_back({r.source, r.kind == MappingRule::Kind::kWeight ? r.target
                                       : r.kind == MappingRule::Kind::kTied ? "tied to " + r.target
                                                                            : "constant, checked"});
  data.state = {{"plugin", m.plugin},
                {"flavour", config["model"]["flavour"]},
                {"plugin_version", plugin->info().version},
                {"tokens", tokens},
                {"time_s", 0.0},
                {"nan_skips", 0},
                {"ema_updates", at.ema ? at.ema_info.value("num_updates", json(0)) : json(0)},
                {"ema_decay", config["train"]["ema"]},
                {"extra_state", plugin->extra_state()},
                {"config", config},
                {"imported_from",
                 {{"model", m.plugin},
                  {"authors_file", m.authors_file},
                  {"from", fs::absolute(ck.folder).lexically_normal().string()},
                  {"kind", ck.kind},
                  {"source", json::parse(ck.source.dump())},
                  {"weights", ema.empty() ? "model" : "model + ema (eval uses ema)"},
                  {"authors_config", at.authors_config},
                  {"mapping", mapping_table}}}};
  if (!data.state["ema_updates"].is_number_integer()) data.state["ema_updates"] = 0;
  const fs::path final_dir = fs::path(task.out).lexically_normal();
  const fs::path stage = final_dir.parent_path() / (".import_" + std::to_string(::getpid()));
  const fs::path staged = stage / name;
  remove_directory_tree(stage.string());
  try {
    RunDir run(staged.string());
    run.write_config(config);
    save_checkpoint(run.path(), at.step, data, /*keep=*/0);
    record_training_run(run.path(), config, *plugin, at.step, tokens, plugin->flops_per_token(plugin->block_size()));
    if (fs::exists(fs::symlink_status(final_dir, ec))) remove_directory_tree(final_dir.string());  // --force
    if (::rename(staged.c_str(), final_dir.c_str()) != 0)
      throw CheckpointError("cannot rename '" + staged.string() + "' to '" + final_dir.string() +
                            "': " + std::strerror(errno));
    remove_directory_tree(stage.string());
  } catch (...) {
    remove_directory_tree(stage.string());
    throw;
  }
  int64_t params = 0;
  for (const auto& p : plugin->module().parameters()) params += p.numel();
  std::cout << "import: wrote " << final_dir.string() << " (step " << at.step << ", " << params << " parameters"
            << (tokens > 0 ? ", " + std::to_string(tokens) + " tokens trained" : std::string(", tokens unknown"))
            << "); evaluate with: aobench eval --run " << final_dir.string() << " --data NAME=FILE.bin\n";
}

}  // namespace aobench
