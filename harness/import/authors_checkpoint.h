// Implements: reading the authors' checkpoints for `aobench import` (harness/import/import.h) in the two forms C++
// can read:
//   - a folder written by scripts/convert_torch_checkpoint.py from a torch.save file: checkpoint.json (the pickled
//     object, each tensor a {"__tensor__": NAME} reference, dicts in the pickle's key order) + tensors.safetensors,
//     and optionally config.json (a Hydra config of SEDD / RADD as JSON);
//   - a Hugging Face folder of SEDD / RADD (PyTorchModelHubMixin.save_pretrained): config.json + model.safetensors.
// A torch.save file itself is refused with the conversion command: LibTorch's unpickler turns every
// collections.OrderedDict into None, so it cannot read a state dict (README, "Importing the authors' checkpoints").
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/safetensors.h"

namespace aobench {

// A state dict as the checkpoint holds it: names in the checkpoint's order (the pickle's dict order; sorted for a
// safetensors file, whose header keeps none), a tensor for each, and the names whose tensor is the very same storage
// as an earlier one (σ-GPT's lm_head.weight is transformer.wte.weight).
struct StateDict {
  std::vector<std::string> names;
  TensorMap tensors;                           // by name; an alias holds its partner's tensor
  std::map<std::string, std::string> same_as;  // alias → the earlier name
  std::string origin;                          // "<file> (object.model)": what errors name
};

struct AuthorsCheckpoint {
  std::string kind;               // "converted torch checkpoint" | "Hugging Face folder"
  std::string folder;             // the --from path
  std::string tensors_file;       // tensors.safetensors or model.safetensors
  std::string object_file;        // checkpoint.json; "" for a Hugging Face folder
  nlohmann::ordered_json object;  // checkpoint.json's "object"; for a Hugging Face folder the weights as references
  nlohmann::ordered_json source;  // checkpoint.json's "source" (file, bytes, sha256); Hugging Face: the weights' sha256
  nlohmann::json config;          // config.json of the folder or --config; null when there is none
  std::string config_file;        // where `config` came from
  TensorMap tensors;              // every tensor the file holds, by its name

  // The member at `path` (a list of keys from the object's root; {} = the root), or nullptr when absent.
  const nlohmann::ordered_json* find(const std::vector<std::string>& path) const;
  // The dict at `path` read as a state dict: every value must be a tensor reference. CheckpointError otherwise.
  StateDict state_dict(const std::vector<std::string>& path) const;
  // The list at `path` read as tensors in order (an EMA's shadow_params). CheckpointError otherwise.
  std::vector<torch::Tensor> tensor_list(const std::vector<std::string>& path) const;
  // "checkpoint.json: object.model_args" — how messages name a member.
  std::string where(const std::vector<std::string>& path) const;
};

// Reads `from` (a folder in one of the two forms above). `config_file` (a JSON file) replaces the folder's
// config.json when given. CheckpointError naming the file for anything else, with the command that converts a
// torch.save file.
AuthorsCheckpoint read_authors_checkpoint(const std::string& from, const std::string& config_file);

}  // namespace aobench
