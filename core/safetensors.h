// Implements: the safetensors file format (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {..}},
// then the raw little-endian tensor bytes. Used for checkpoints and for Hugging Face GPT-2 weights.
// Every offset and size is validated before memory is touched; errors name the file and tensor.
#pragma once
#include <map>
#include <string>

#include <torch/torch.h>

namespace aobench {

using TensorMap = std::map<std::string, torch::Tensor>;

struct SafetensorsFile {
  TensorMap tensors;                            // CPU tensors, owning their memory
  std::map<std::string, std::string> metadata;  // "__metadata__" (string → string)
};

// Reads a whole file. Supported dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL.
// Throws CheckpointError on a missing file, bad header JSON, overlapping/out-of-range offsets,
// unknown dtype or a size that does not match the shape.
SafetensorsFile read_safetensors(const std::string& path);

// Writes atomically: to "<path>.tmp", fsync, rename over <path>, fsync the directory.
// Tensors are written contiguous, on CPU, in their own dtype, sorted by name.
void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Atomic write of arbitrary bytes with the same tmp+fsync+rename protocol (JSON sidecars, results).
void write_file_atomic(const std::string& path, const std::string& bytes);
// The same, but never over an existing file, even one another process creates meanwhile: ConfigError when
// `path` exists at the moment of the final link(2).
void write_new_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace aobench
