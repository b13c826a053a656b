// Implements: safetensors header fuzz target (core/safetensors.h format).
// Any bytes must either parse into tensors whose memory is fully readable, or throw CheckpointError.
// A file that parses is written back and must read back to the same tensors and metadata.
#include <cstdint>

#include "core/errors.h"
#include "core/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = aobench::fuzz::scratch_path("safetensors");
  aobench::fuzz::write_input(path, data, size);
  aobench::SafetensorsFile f;
  try {
    f = aobench::read_safetensors(path);
  } catch (const aobench::CheckpointError&) {
    return 0;
  }
  for (const auto& [name, t] : f.tensors) {
    // Touch every byte: a view past the buffer would show up under ASan here.
    const torch::Tensor bytes = t.contiguous().view({-1}).view(torch::kUInt8);  // (numel · itemsize,)
    volatile int64_t sink = bytes.sum().item<int64_t>();
    (void)sink;
  }
  const std::string again = path + ".rt";
  aobench::write_safetensors(again, f.tensors, f.metadata);
  const aobench::SafetensorsFile g = aobench::read_safetensors(again);
  if (g.metadata != f.metadata || g.tensors.size() != f.tensors.size()) __builtin_trap();
  for (const auto& [name, t] : f.tensors) {
    const torch::Tensor& u = g.tensors.at(name);
    if (u.scalar_type() != t.scalar_type() || u.sizes() != t.sizes()) __builtin_trap();
    // Compare bytes, not values: NaN payloads in fuzzed floats are legal and compare unequal.
    if (t.numel() &&
        !torch::equal(t.contiguous().view({-1}).view(torch::kUInt8), u.contiguous().view({-1}).view(torch::kUInt8)))
      __builtin_trap();
  }
  return 0;
}
