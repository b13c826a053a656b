// Implements: the typed errors the harness throws; main() catches them, prints "error: …" and a HINT
// line, and exits non-zero. Messages name the file, key or value at fault.
#pragma once
#include <stdexcept>
#include <string>

namespace aobench {

class Error : public std::runtime_error {
 public:
  Error(const std::string& what, std::string hint = "") : std::runtime_error(what), hint_(std::move(hint)) {}
  const std::string& hint() const { return hint_; }
  virtual int exit_code() const { return 1; }

 private:
  std::string hint_;
};

struct ConfigError : Error {
  using Error::Error;
  int exit_code() const override { return 2; }
};
struct DataError : Error {
  using Error::Error;
  int exit_code() const override { return 3; }
};
struct PluginError : Error {
  using Error::Error;
  int exit_code() const override { return 4; }
};
struct CheckpointError : Error {
  using Error::Error;
  int exit_code() const override { return 5; }
};
struct TrainingError : Error {
  using Error::Error;
  int exit_code() const override { return 6; }
};

}  // namespace aobench
