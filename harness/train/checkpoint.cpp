// Implements: training checkpoints (see checkpoint.h; DESIGN.md §3): atomic step_<N>
// directories with a state.json sidecar holding format_version and the SHA-256 of every file, verified
// on load. SHA-256 is OpenSSL's (EVP): a medium run's checkpoint is ≈ 7 GB, hashed on every save and load,
// and OpenSSL's (CPU SHA extensions) hashes a file at 1.2–1.3 GB/s where the FIPS 180-4 code written here
// before managed 0.29 GB/s (README, "Dependencies"). The digests are the same: old checkpoints load.
#include "harness/train/checkpoint.h"

#include <fcntl.h>
#include <ftw.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <system_error>
#include <vector>

#include "core/config.h"
#include "core/errors.h"
#include "core/plugin_api.h"
#include "core/sha256.h"
#include "datasets/token_file.h"
#include "harness/registry.h"
#include "harness/resolve_config.h"

namespace aobench {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

void fsync_path(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY);
  if (fd < 0) throw CheckpointError("cannot open '" + p.string() + "' to fsync: " + std::strerror(errno));
  ::fsync(fd);
  ::close(fd);
}

// rm -rf with POSIX nftw. Why not std::filesystem::remove_all: the pip libtorch.so exports its own copy
// of the std::filesystem symbols, and when it wins symbol resolution remove_all jumps to a null pointer.
void remove_tree(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return;
  auto rm = [](const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); };
  if (::nftw(p.c_str(), rm, 16, FTW_DEPTH | FTW_PHYS) != 0)
    throw CheckpointError("cannot remove '" + p.string() + "': " + std::strerror(errno),
                          "check permissions of the run directory");
}

// step_<N> → N; −1 for anything else (".tmp_step_3", "latest").
int64_t step_of(const std::string& name) {
  if (name.rfind("step_", 0) != 0 || name.size() == 5) return -1;
  const std::string digits = name.substr(5);
  if (!std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  if (digits.size() > 18)  // beyond what int64 holds for sure: refuse by name, never std::stoll's "stoll"
    throw CheckpointError("checkpoint folder '" + name + "' has a step number too large for a 64-bit integer",
                          "remove or rename that folder; aobench writes checkpoints/step_<N>");
  return std::stoll(digits);
}

std::vector<std::pair<int64_t, fs::path>> complete_checkpoints(const fs::path& dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const int64_t s = step_of(e.path().filename().string());
    if (s >= 0 && fs::exists(e.path() / "state.json")) out.emplace_back(s, e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

void remove_directory_tree(const std::string& path) { remove_tree(path); }

std::string sha256_hex(const std::string& bytes) {
  Sha256 h("a string of " + std::to_string(bytes.size()) + " bytes");
  h.update(bytes.data(), bytes.size());
  return h.hex();
}

std::string sha256_file(const std::string& path) {
  try {
    return sha256_file_hex(path);
  } catch (const std::system_error& e) {
    throw CheckpointError("cannot read '" + path + "': " + e.code().message(),
                          "the checkpoint is incomplete or the disk reported an error; use an older one");
  }
}

// ---------------------------------------------------------------------------------------------------
std::string save_checkpoint(const std::string& run_dir, int64_t step, CheckpointData data, int64_t keep) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  const std::string name = "step_" + std::to_string(step);
  const fs::path tmp = root / (".tmp_" + name), final_dir = root / name;
  fs::create_directories(root);
  remove_tree(tmp);  // a crash mid-write leaves a stale tmp dir: never trusted, always replaced
  fs::create_directories(tmp);

  json sums = json::object();
  auto put = [&](const std::string& file, const TensorMap& tensors) {
    write_safetensors((tmp / file).string(), tensors);
    sums[file] = sha256_file((tmp / file).string());
  };
  put("model.safetensors", data.model);
  if (!data.ema.empty()) put("ema.safetensors", data.ema);
  put("optim.safetensors", data.optimizer);
  data.state["format_version"] = kCheckpointFormatVersion;
  data.state["step"] = step;
  data.state["sha256"] = sums;
  write_file_atomic((tmp / "state.json").string(), data.state.dump(2) + "\n");
  fsync_path(tmp);

  if (fs::exists(final_dir)) remove_tree(final_dir);  // re-saving a step (e.g. resumed then stopped)
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0)
    throw CheckpointError("cannot rename '" + tmp.string() + "' to '" + final_dir.string() +
                          "': " + std::strerror(errno));
  fsync_path(root);
  write_file_atomic((root / "latest").string(), name + "\n");

  if (keep > 0) {
    auto all = complete_checkpoints(root);
    for (size_t i = 0; i + size_t(keep) < all.size(); ++i)
      if (all[i].second != final_dir) remove_tree(all[i].second);
  }
  return final_dir.string();
}

std::optional<std::string> latest_checkpoint(const std::string& run_dir) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  std::ifstream latest(root / "latest");
  std::string name;
  if (latest && std::getline(latest, name) && step_of(name) >= 0 && fs::exists(root / name / "state.json"))
    return (root / name).string();
  // `latest` missing or stale (crash between rename and its update): newest complete step_* wins.
  auto all = complete_checkpoints(root);
  if (all.empty()) return std::nullopt;
  return all.back().second.string();
}

CheckpointData load_checkpoint(const std::string& checkpoint_dir) {
  const fs::path dir(checkpoint_dir);
  const fs::path state_path = dir / "state.json";
  CheckpointData data;
  {
    std::ifstream in(state_path);
    if (!in)
      throw CheckpointError("checkpoint '" + checkpoint_dir + "' has no state.json",
                            "the directory is not a complete checkpoint");
    try {
      data.state = json::parse(in);
    } catch (const json::parse_error& e) {
      throw CheckpointError("corrupt '" + state_path.string() + "': " + e.what(), "use an older checkpoint");
    }
  }
  const int version = data.state.value("format_version", -1);
  if (version != kCheckpointFormatVersion)
    throw CheckpointError("checkpoint '" + state_path.string() + "' has format_version " + std::to_string(version) +
                              ", this build reads " + std::to_string(kCheckpointFormatVersion),
                          "use the aobench version that wrote it");
  if (!data.state.contains("sha256") || !data.state["sha256"].is_object())
    throw CheckpointError("'" + state_path.string() + "' lists no sha256 checksums", "the checkpoint is incomplete");
  for (auto it = data.state["sha256"].begin(); it != data.state["sha256"].end(); ++it) {
    const std::string file = (dir / it.key()).string();
    const std::string got = sha256_file(file);
    if (got != it.value().get<std::string>())
      throw CheckpointError("checksum mismatch for '" + file + "': expected sha256 " + it.value().get<std::string>() +
                                ", file has " + got,
                            "the file is corrupt or was modified; resume from an older checkpoint");
    TensorMap tensors = read_safetensors(file).tensors;
    if (it.key() == "model.safetensors")
      data.model = std::move(tensors);
    else if (it.key() == "ema.safetensors")
      data.ema = std::move(tensors);
    else if (it.key() == "optim.safetensors")
      data.optimizer = std::move(tensors);
  }
  return data;
}

TensorMap module_state(const torch::nn::Module& module) {
  TensorMap out;
  for (const auto& p : module.named_parameters()) out[p.key()] = p.value().detach().to(torch::kCPU).clone();
  for (const auto& b : module.named_buffers()) out[b.key()] = b.value().detach().to(torch::kCPU).clone();
  return out;
}

void load_module_state(torch::nn::Module& module, const TensorMap& tensors, const std::string& origin) {
  torch::NoGradGuard no_grad;
  std::vector<std::string> missing, mis_shaped, unexpected;
  std::map<std::string, torch::Tensor> targets;
  for (auto& p : module.named_parameters()) targets[p.key()] = p.value();
  for (auto& b : module.named_buffers()) targets[b.key()] = b.value();
  for (const auto& [name, t] : targets) {
    auto it = tensors.find(name);
    if (it == tensors.end())
      missing.push_back(name);
    else if (it->second.sizes() != t.sizes())
      mis_shaped.push_back(name);
  }
  for (const auto& kv : tensors)
    if (!targets.count(kv.first)) unexpected.push_back(kv.first);
  if (!missing.empty() || !mis_shaped.empty() || !unexpected.empty()) {
    std::ostringstream msg;
    msg << "weights in '" << origin << "' do not match the model:";
    if (!missing.empty()) msg << " missing [" << join_names(missing) << "]";
    if (!unexpected.empty()) msg << " unexpected [" << join_names(unexpected) << "]";
    if (!mis_shaped.empty()) msg << " wrong shape [" << join_names(mis_shaped) << "]";
    throw CheckpointError(msg.str(), "the checkpoint was written by a different model configuration");
  }
  for (auto& [name, t] : targets) t.copy_(tensors.at(name));
}

LoadedModel load_model_for_eval(const std::string& run_or_checkpoint_dir, torch::Device device, bool prefer_ema) {
  std::string dir = run_or_checkpoint_dir;
  if (!fs::exists(fs::path(dir) / "state.json")) {
    auto latest = latest_checkpoint(dir);
    if (!latest)
      throw CheckpointError("no checkpoint in '" + dir + "'",
                            "pass a run directory written by `aobench train` or a checkpoints/step_N directory");
    dir = *latest;
  }
  CheckpointData data = load_checkpoint(dir);
  LoadedModel out;
  out.config = data.state.at("config");
  out.step = data.state.value("step", int64_t(0));
  out.tokens = data.state.value("tokens", int64_t(-1));
  out.model = PluginRegistry::instance().create(data.state.at("plugin").get<std::string>());
  out.model->configure(out.config.at("model"));
  out.config["model"] = out.model->resolved_model_config(out.config.at("model"));
  out.model->build(device);
  load_module_state(out.model->module(), data.model, dir + "/model.safetensors");
  if (prefer_ema && !data.ema.empty()) {
    // EMA shadows cover the trainable parameters only (buffers keep their model values).
    torch::NoGradGuard no_grad;
    for (auto& p : out.model->module().named_parameters()) {
      auto it = data.ema.find(p.key());
      if (it == data.ema.end())
        throw CheckpointError("EMA weights in '" + dir + "' lack parameter '" + p.key() + "'",
                              "pass prefer_ema=false to use the raw weights");
      p.value().copy_(it->second);
    }
    out.ema_weights = true;
  }
  if (data.state.contains("extra_state")) out.model->load_extra_state(data.state["extra_state"]);
  out.model->module().eval();
  return out;
}

LoadedModel load_hf_gpt2(const std::string& folder, torch::Device device) {
  if (!fs::is_regular_file(fs::path(folder) / "config.json") ||
      !fs::is_regular_file(fs::path(folder) / "model.safetensors"))
    throw CheckpointError("'" + folder +
                              "' is not a Hugging Face GPT-2 folder (needs config.json and "
                              "model.safetensors)",
                          "pass the folder written by save_pretrained(..., safe_serialization=True)");
  LoadedModel out;
  // The flavour only fills keys the folder's config.json does not set (dropout, bias, start_token).
  out.config = resolve_config(json{{"model", {{"plugin", "gpt"}, {"flavour", "small"}, {"init_from_hf", folder}}},
                                   {"data", {{"tokenizer", "gpt2"}}}},
                              {}, "--hf " + folder);
  out.model = PluginRegistry::instance().create("gpt");
  out.model->configure(out.config.at("model"));
  out.config["model"] = out.model->resolved_model_config(out.config.at("model"));
  out.config["model"]["flavour"] = "hf";  // recorded as what it is: no gpt flavour, the folder's shape
  out.model->build(device);
  out.model->module().eval();
  return out;
}

// ---------------------------------------------------------------------------------------------------
// RNG states travel as hex strings in state.json.
namespace {

std::string to_hex(const torch::Tensor& bytes) {
  const torch::Tensor b = bytes.to(torch::kCPU).contiguous();
  TORCH_CHECK(b.scalar_type() == torch::kUInt8, "RNG state must be uint8");
  const uint8_t* p = b.data_ptr<uint8_t>();
  std::string out;
  out.reserve(size_t(b.numel()) * 2);
  for (int64_t i = 0; i < b.numel(); ++i) out += "0123456789abcdef"[p[i] >> 4], out += "0123456789abcdef"[p[i] & 15];
  return out;
}

torch::Tensor from_hex(const std::string& hex, const std::string& what) {
  if (hex.size() % 2) throw CheckpointError("checkpoint RNG state '" + what + "' has odd hex length");
  torch::Tensor t = torch::empty({int64_t(hex.size() / 2)}, torch::kUInt8);
  uint8_t* p = t.data_ptr<uint8_t>();
  auto nib = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw CheckpointError("checkpoint RNG state '" + what + "' is not hex");
  };
  for (size_t i = 0; i < hex.size() / 2; ++i) p[i] = uint8_t(nib(hex[2 * i]) << 4 | nib(hex[2 * i + 1]));
  return t;
}

}  // namespace

json encode_rng_state(const BatchSampler& sampler, const at::Generator& order, torch::Device device) {
  json rng = {{"data", to_hex(sampler.get_state())},
              {"order", to_hex(order.get_state())},
              {"torch_cpu", to_hex(at::detail::getDefaultCPUGenerator().get_state())}};
  if (device.is_cuda()) rng["cuda"] = to_hex(at::globalContext().defaultGenerator(device).get_state());
  return rng;
}

void restore_rng_state(const json& rng, BatchSampler& sampler, at::Generator& order, torch::Device device) {
  sampler.set_state(from_hex(rng.at("data").get<std::string>(), "data"));
  order.set_state(from_hex(rng.at("order").get<std::string>(), "order"));
  at::Generator cpu_default = at::detail::getDefaultCPUGenerator();  // shares the global generator state
  cpu_default.set_state(from_hex(rng.at("torch_cpu").get<std::string>(), "torch_cpu"));
  if (device.is_cuda() && rng.contains("cuda")) {
    at::Generator cuda_default = at::globalContext().defaultGenerator(device);
    cuda_default.set_state(from_hex(rng.at("cuda").get<std::string>(), "cuda"));
  }
}

}  // namespace aobench
