// Implements: the shared data folder rule (see data_dir.h).
#include "datasets/data_dir.h"

#include <cstdlib>
#include <filesystem>

namespace aobench {
namespace {

std::string beside_checkout() {
  return (std::filesystem::path(AOBENCH_SOURCE_DIR) / ".." / "shared" / "data").lexically_normal().string();
}

}  // namespace

std::string shared_data_dir() {
  if (const char* d = std::getenv("AOBENCH_DATA_DIR"); d && *d) return d;
  const std::string beside = beside_checkout();
  return std::filesystem::is_directory(beside) ? beside : "";
}

std::string shared_data_dir_rule() {
  if (const char* d = std::getenv("AOBENCH_DATA_DIR"); d && *d) return std::string("$AOBENCH_DATA_DIR=") + d;
  return beside_checkout() + " (beside the checkout; $AOBENCH_DATA_DIR unset)";
}

}  // namespace aobench
