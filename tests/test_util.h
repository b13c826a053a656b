// Shared test helpers: temp dirs, the shared data dir, running the aobench binary.
#pragma once
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "datasets/data_dir.h"

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

// The shared data folder by the binary's rule (datasets/data_dir.h: $AOBENCH_DATA_DIR, else ../shared/data
// beside the checkout); "" when it does not exist (callers GTEST_SKIP()).
inline std::string shared_data_dir() {
  const std::string d = ::aobench::shared_data_dir();
  return !d.empty() && std::filesystem::is_directory(d) ? d : "";
}

#define AOBENCH_REQUIRE_DATA(var)                                \
  const std::string var = ::aobench::testing::shared_data_dir(); \
  if (var.empty()) GTEST_SKIP() << "no shared data folder (" << ::aobench::shared_data_dir_rule() << "); skipping"

// Runs the aobench binary with `args`; returns exit code, stdout+stderr in `output`.
inline int run_aobench(const std::string& args, std::string* output = nullptr) {
  TempDir tmp;
  const std::string log = tmp.file("out.txt");
  const std::string cmd = std::string(AOBENCH_BINARY) + " " + args + " > " + log + " 2>&1";
  int rc = std::system(cmd.c_str());
  if (output) *output = read_text(log);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// `cd dir && [env] aobench args` (a shell line: args from the tests only) with stdout+stderr in
// dir/aobench_output.txt (stderr a file, not a terminal); returns the exit code.
inline int run_aobench_in(const std::string& dir, const std::string& args, std::string* output,
                          const std::string& env = "") {
  const std::string log = dir + "/aobench_output.txt";
  const std::string cmd =
      "cd '" + dir + "' && " + env + " " + std::string(AOBENCH_BINARY) + " " + args + " > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  *output = read_text(log);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// The embedded quickstart corpus (Debian package `fortunes`, installed by scripts/setup.sh), or skip.
#define AOBENCH_REQUIRE_FORTUNES()                                 \
  if (!std::filesystem::is_directory("/usr/share/games/fortunes")) \
  GTEST_SKIP() << "/usr/share/games/fortunes is absent (Debian package `fortunes`; scripts/setup.sh installs it)"

// `aobench args...` as a child process with stdout+stderr in `log`; returns its pid at once. Optional:
// another AOBENCH_PLUGIN_PATH, and a file-size limit (RLIMIT_FSIZE with SIGXFSZ ignored: write() then fails
// with EFBIG, as on a full disk).
struct ChildOptions {
  const char* plugin_path = nullptr;
  rlim_t fsize_limit = RLIM_INFINITY;
  const char* stderr_log = nullptr;  // standard error into this file instead of `log` (standard output alone)
};
inline pid_t spawn_aobench(const std::vector<std::string>& args, const std::string& log,
                           const ChildOptions& options = {}) {
  std::vector<std::string> argv_s = {AOBENCH_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {  // child: only async-signal-safe calls until exec
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) ::_exit(120);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    if (options.stderr_log) {
      const int err = ::open(options.stderr_log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (err < 0) ::_exit(123);
      ::dup2(err, 2);
    }
    if (options.plugin_path) ::setenv("AOBENCH_PLUGIN_PATH", options.plugin_path, 1);
    if (options.fsize_limit != RLIM_INFINITY) {
      ::signal(SIGXFSZ, SIG_IGN);
      const rlimit lim{options.fsize_limit, options.fsize_limit};
      if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(121);
    }
    ::execv(argv[0], argv.data());
    ::_exit(122);
  }
  return pid;
}

// Runs `aobench args...` to completion; the exit code, or −signal when the child died of a signal.
inline int run_aobench_child(const std::vector<std::string>& args, std::string* out, const ChildOptions& options = {}) {
  TempDir tmp;
  const std::string log = tmp.file("out.txt");
  const pid_t pid = spawn_aobench(args, log, options);
  int status = 0;
  ::waitpid(pid, &status, 0);
  *out = read_text(log);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

}  // namespace aobench::testing
