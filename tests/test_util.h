// Shared test helpers: temp dirs, the shared data dir, running the aobench binary.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace aobench::testing {

// A fresh empty directory under the system temp dir, removed when the object dies.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() / ("aobench_test_" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ../shared/data via AOBENCH_DATA_DIR; "" when unset or missing (callers GTEST_SKIP()).
inline std::string shared_data_dir() {
  const char* d = std::getenv("AOBENCH_DATA_DIR");
  if (!d || !*d || !std::filesystem::is_directory(d)) return "";
  return d;
}

#define AOBENCH_REQUIRE_DATA(var)                                                              \
  const std::string var = ::aobench::testing::shared_data_dir();                               \
  if (var.empty()) GTEST_SKIP() << "AOBENCH_DATA_DIR is not set to the shared data folder (../shared/data); skipping"

// Runs the aobench binary with `args`; returns exit code, stdout+stderr in `output`.
inline int run_aobench(const std::string& args, std::string* output = nullptr) {
  TempDir tmp;
  const std::string log = tmp.file("out.txt");
  const std::string cmd = std::string(AOBENCH_BINARY) + " " + args + " > " + log + " 2>&1";
  int rc = std::system(cmd.c_str());
  if (output) *output = read_text(log);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace aobench::testing
