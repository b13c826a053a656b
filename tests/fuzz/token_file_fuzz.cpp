// Implements: token-file header fuzz target (datasets/token_file.h layout).
// Any file content must either open (and then every token and window it advertises is readable) or
// throw DataError; never read outside the mapping.
#include <algorithm>
#include <cstdint>

#include "core/errors.h"
#include "datasets/token_file.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = aobench::fuzz::scratch_path("token_file");
  aobench::fuzz::write_input(path, data, size);
  for (bool allow_raw : {true, false}) {
    try {
      aobench::TokenFile f(path, allow_raw);
      const int64_t n = f.size();
      if (n < 0) __builtin_trap();
      if (n > 0) {
        volatile uint32_t sink = f.at(0) + f.at(n - 1);
        (void)sink;
        const int64_t len = std::min<int64_t>(n, 64);
        torch::Tensor t = f.slice(n - len, len);  // (len,)
        if (t.numel() != len) __builtin_trap();
        for (int64_t T : {int64_t(1), int64_t(7), n})
          for (int64_t s : aobench::eval_window_starts(f, T))
            if (s < 0 || s + T > n) __builtin_trap();
      }
    } catch (const aobench::DataError&) {}
  }
  return 0;
}
