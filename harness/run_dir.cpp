// Implements: the run directory (see run_dir.h).
#include "harness/run_dir.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/errors.h"
#include "harness/safetensors.h"

namespace aobench {
namespace fs = std::filesystem;

RunDir::RunDir(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  fs::create_directories(fs::path(path_) / "checkpoints", ec);
  if (ec) throw ConfigError("cannot create run directory '" + path_ + "': " + ec.message(),
                            "check train.out_dir and its permissions");
}

void RunDir::write_config(const nlohmann::json& resolved) const {
  write_file_atomic(path_ + "/config.resolved.json", resolved.dump(2) + "\n");
}

void RunDir::append_metrics(const nlohmann::json& line) const {
  std::ofstream out(metrics_path(), std::ios::app);
  if (!out) throw ConfigError("cannot append to '" + metrics_path() + "': " + std::strerror(errno));
  out << line.dump() << "\n";
  out.flush();
}

void RunDir::truncate_metrics_after(int64_t step) const {
  std::ifstream in(metrics_path());
  if (!in) return;
  std::ostringstream kept;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) continue;  // a torn last line from a crash
    if (j.contains("step") && j["step"].is_number() && j["step"].get<int64_t>() <= step) kept << line << "\n";
  }
  in.close();
  write_file_atomic(metrics_path(), kept.str());
}

}  // namespace aobench
