// Implements: the run directory (see run_dir.h).
#include "harness/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/env_info.h"
#include "core/errors.h"
#include "core/safetensors.h"

namespace aobench {
namespace fs = std::filesystem;

DirLock::DirLock(const std::string& lock_path, const std::string& what, bool wait) : path_(lock_path) {
  auto holder = [&] {
    char buf[512] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    std::string h(buf, n > 0 ? size_t(n) : 0);
    while (!h.empty() && (h.back() == '\n' || h.back() == '\0')) h.pop_back();
    return h.empty() ? std::string("another process") : h;
  };
  // The holder removes the file when done, so a lock taken on a file already unlinked (or replaced) is no lock:
  // after flock the path must still name the same file, else open it again.
  for (bool announced = false;;) {
    fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw ConfigError("cannot open lock file '" + lock_path + "': " + std::strerror(errno),
                        "check the directory exists and is writable");
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EINTR) continue;
      if (errno != EWOULDBLOCK) {
        const std::string why = std::strerror(errno);
        ::close(fd_);
        throw ConfigError("cannot lock '" + lock_path + "': " + why,
                          "is the directory on a file system without flock?");
      }
      if (!wait) {
        const std::string h = holder();
        ::close(fd_);
        throw ConfigError("'" + lock_path + "' is held by " + h + ": one writer at a time",
                          "wait for that command to finish (or stop it), or use another directory");
      }
      if (!announced) std::cout << "waiting for '" << lock_path << "', held by " << holder() << "\n" << std::flush;
      announced = true;
      while (::flock(fd_, LOCK_EX) != 0)
        if (errno != EINTR) {
          const std::string why = std::strerror(errno);
          ::close(fd_);
          throw ConfigError("cannot lock '" + lock_path + "': " + why);
        }
      break;
    }
    struct stat held {
    }, named{};
    if (::fstat(fd_, &held) == 0 && ::stat(lock_path.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev)
      break;
    ::close(fd_);  // the previous holder removed it meanwhile: take the new one
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string me =
      "pid " + std::to_string(::getpid()) + " (" + what + ") on " + host + " since " + utc_timestamp() + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size()))
    std::cerr << "warning: cannot record the holder in '" << lock_path << "': " << std::strerror(errno) << "\n";
}

DirLock::~DirLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still held: a waiter on this file re-checks the path and opens a new one
  ::close(fd_);             // releases the flock
}

RunDir::RunDir(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  fs::create_directories(fs::path(path_) / "checkpoints", ec);
  if (ec)
    throw ConfigError("cannot create run directory '" + path_ + "': " + ec.message(),
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
