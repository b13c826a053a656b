// Shared by the libFuzzer targets: the readers under test take a path, so each input is written to a
// per-process scratch file first (in /dev/shm when present: no disk traffic per execution).
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace aobench::fuzz {

inline const std::string& scratch_path(const char* tag) {
  static const std::string dir = std::filesystem::is_directory("/dev/shm")
                                     ? std::string("/dev/shm")
                                     : std::filesystem::temp_directory_path().string();
  static const std::string path = dir + "/aobench_fuzz_" + tag + "_" + std::to_string(getpid());
  return path;
}

inline void write_input(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();  // the fuzzer cannot work without its scratch file
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
}

}  // namespace aobench::fuzz
