// Implements: harness/import/authors_checkpoint.h: the converted folder (checkpoint.json read as ordered JSON, its
// tensor references resolved against tensors.safetensors) and the Hugging Face folder; every file checked by name.
#include "harness/import/authors_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/config.h"
#include "core/errors.h"
#include "core/json_checks.h"
#include "harness/train/checkpoint.h"

namespace aobench {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

constexpr const char* kFormat = "aobench.torch_checkpoint/1";
constexpr const char* kConvert = "python3 scripts/convert_torch_checkpoint.py CHECKPOINT.pt OUT_DIR";

std::string read_whole(const std::string& path) {
  if (const std::string kind = special_file_kind(path); !kind.empty())
    throw CheckpointError("'" + path + "' is " + kind + ", not a regular file", "pass the converted folder");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError("cannot open '" + path + "'", "check the path");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// checkpoint.json keeps the pickle's dict order (an EMA shadow list follows the state dict's): ordered_json.
ojson parse_ordered(const std::string& path) {
  try {
    return ojson::parse(read_whole(path), json_checks<ojson>(kMaxJsonDepth));
  } catch (const JsonCheckFailure& f) {
    throw CheckpointError("'" + path + "': " +
                              (f.kind == JsonCheckFailure::kDuplicateKey ? "duplicate key '" + f.path + "'"
                                                                         : std::string("JSON nested too deep")),
                          std::string("rewrite it with ") + kConvert);
  } catch (const ojson::exception& e) {
    throw CheckpointError("invalid JSON in '" + path + "': " + e.what(), std::string("rewrite it with ") + kConvert);
  }
}

bool is_tensor_ref(const ojson& v) { return v.is_object() && v.contains("__tensor__"); }

std::string path_text(const std::vector<std::string>& path) {
  std::string out = "object";
  for (const auto& k : path) out += (k.find_first_not_of("0123456789") == std::string::npos ? "[" + k + "]" : "." + k);
  return out;
}

}  // namespace

std::string AuthorsCheckpoint::where(const std::vector<std::string>& path) const {
  return "'" + (object_file.empty() ? tensors_file : object_file) + "' " + path_text(path);
}

const ojson* AuthorsCheckpoint::find(const std::vector<std::string>& path) const {
  const ojson* at = &object;
  for (const auto& key : path) {
    if (at->is_object() && at->contains(key)) {
      at = &(*at)[key];
    } else if (at->is_array() && key.find_first_not_of("0123456789") == std::string::npos && !key.empty() &&
               key.size() < 10 && std::stoul(key) < at->size()) {
      at = &(*at)[std::stoul(key)];
    } else {
      return nullptr;
    }
  }
  return at;
}

StateDict AuthorsCheckpoint::state_dict(const std::vector<std::string>& path) const {
  const ojson* dict = find(path);
  if (!dict || !dict->is_object() || is_tensor_ref(*dict))
    throw CheckpointError(where(path) + " is not a state dict (a dict of tensors)",
                          "is this the checkpoint of the model named by --model?");
  StateDict sd;
  sd.origin = where(path);
  for (auto it = dict->begin(); it != dict->end(); ++it) {
    const std::string& name = it.key();
    const ojson& ref = it.value();
    if (!is_tensor_ref(ref))
      throw CheckpointError(sd.origin + " holds '" + name + "', which is not a tensor",
                            "a state dict maps parameter names to tensors; is this the right member?");
    if (ref.contains("same_as") && ref["__tensor__"].is_null()) {
      const std::string partner = ref["same_as"].is_string() ? ref["same_as"].get<std::string>() : "";
      auto found = tensors.find(partner);
      if (found == tensors.end())
        throw CheckpointError(
            sd.origin + ": '" + name + "' is the same tensor as '" + partner + "', which the file does not hold",
            std::string("rewrite the folder with ") + kConvert);
      // The partner's path names the state dict entry: the last path component (without its "/"-joined prefix).
      std::string alias_of;
      for (const auto& n : sd.names)
        if (sd.tensors.at(n).is_same(found->second)) alias_of = n;
      sd.same_as[name] = alias_of.empty() ? partner : alias_of;
      sd.tensors[name] = found->second;
    } else if (ref["__tensor__"].is_string()) {
      auto found = tensors.find(ref["__tensor__"].get<std::string>());
      if (found == tensors.end())
        throw CheckpointError(sd.origin + ": tensor '" + name + "' (" + ref["__tensor__"].get<std::string>() +
                                  ") is missing from '" + tensors_file + "'",
                              std::string("rewrite the folder with ") + kConvert);
      sd.tensors[name] = found->second;
    } else {
      throw CheckpointError(sd.origin + ": tensor '" + name + "' was not converted (" + ref.dump() + ")",
                            std::string("rewrite the folder with ") + kConvert);
    }
    sd.names.push_back(name);
  }
  return sd;
}

std::vector<torch::Tensor> AuthorsCheckpoint::tensor_list(const std::vector<std::string>& path) const {
  const ojson* list = find(path);
  if (!list || !list->is_array())
    throw CheckpointError(where(path) + " is not a list of tensors", "is this the right checkpoint?");
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < list->size(); ++i) {
    const ojson& ref = (*list)[i];
    auto found = is_tensor_ref(ref) && ref["__tensor__"].is_string()
                     ? tensors.find(ref["__tensor__"].get<std::string>())
                     : tensors.end();
    if (found == tensors.end())
      throw CheckpointError(where(path) + "[" + std::to_string(i) + "] is not a converted tensor",
                            std::string("rewrite the folder with ") + kConvert);
    out.push_back(found->second);
  }
  return out;
}

AuthorsCheckpoint read_authors_checkpoint(const std::string& from, const std::string& config_file) {
  const fs::path dir(from);
  std::error_code ec;
  AuthorsCheckpoint ck;
  ck.folder = from;
  if (!fs::is_directory(dir, ec)) {
    const std::string ext = dir.extension().string();
    if (ext == ".pt" || ext == ".pth" || ext == ".bin" || ext == ".ckpt")
      throw CheckpointError("'" + from +
                                "' is a torch.save file (a Python pickle), which C++ cannot read: LibTorch's unpickler "
                                "turns every collections.OrderedDict (each state dict) into None",
                            std::string("convert it first: ") + kConvert + ", then pass OUT_DIR to --from");
    throw CheckpointError("--from '" + from + "' is not a folder",
                          std::string("pass a folder converted by ") + kConvert +
                              " or a Hugging Face folder (config.json + model.safetensors)");
  }
  if (fs::exists(dir / "checkpoint.json")) {
    ck.kind = "converted torch checkpoint";
    ck.object_file = (dir / "checkpoint.json").string();
    ojson doc = parse_ordered(ck.object_file);
    if (!doc.is_object() || doc.value("format", "") != kFormat || !doc.contains("object"))
      throw CheckpointError("'" + ck.object_file + "' is not a " + kFormat + " document",
                            std::string("write it with ") + kConvert);
    ck.object = doc["object"];
    ck.source = doc.value("source", ojson::object());
    ck.tensors_file = (dir / "tensors.safetensors").string();
    if (!fs::exists(ck.tensors_file))
      throw CheckpointError("'" + from + "' has checkpoint.json but no tensors.safetensors",
                            std::string("rewrite the folder with ") + kConvert);
    ck.tensors = read_safetensors(ck.tensors_file).tensors;
  } else if (fs::exists(dir / "model.safetensors")) {
    ck.kind = "Hugging Face folder";
    ck.tensors_file = (dir / "model.safetensors").string();
    ck.tensors = read_safetensors(ck.tensors_file).tensors;
    ck.object = ojson::object();  // the weights as a state dict of references, by name
    for (const auto& [name, t] : ck.tensors) ck.object[name] = {{"__tensor__", name}};
    ck.source = {{"file", "model.safetensors"}, {"sha256", sha256_file(ck.tensors_file)}};
  } else {
    const bool pickle = fs::exists(dir / "pytorch_model.bin");
    throw CheckpointError(
        "'" + from + "' has neither checkpoint.json (a converted torch checkpoint) nor model.safetensors",
        pickle ? std::string("its pytorch_model.bin is a Python pickle: convert it with "
                             "python3 scripts/convert_torch_checkpoint.py ") +
                     (dir / "pytorch_model.bin").string() + " OUT_DIR --config " + (dir / "config.json").string() +
                     ", then pass OUT_DIR to --from"
               : std::string("convert the torch.save file with ") + kConvert);
  }
  ck.config_file = !config_file.empty() ? config_file : (dir / "config.json").string();
  if (!config_file.empty() || fs::exists(ck.config_file)) ck.config = load_json_file(ck.config_file);
  return ck;
}

}  // namespace aobench
