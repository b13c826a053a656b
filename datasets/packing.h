// Implements: rows → token stream packing of spec-sedd-radd.md §4.3: EOS after every row, then
// "none" (plain concatenation, training files), "simple" (global concatenation floored to whole windows)
// or "reference" (SEDD/RADD: 8 contiguous shards → 1000-row groups → concatenate → cut into windows →
// drop each group's remainder).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace aobench {

struct PackOptions {
  std::string mode = "none";  // none | simple | reference
  int64_t window = 1024;
  int64_t num_shards = 8;     // reference: HF datasets.map(num_proc=8)
  int64_t group_rows = 1000;  // reference: HF map batch size
};

struct PackResult {
  std::vector<uint32_t> tokens;  // the packed stream (a whole number of windows unless mode == none)
  int64_t windows = 0;           // tokens / window for simple/reference; 0 for none
  int64_t dropped = 0;           // tokens dropped by flooring
};

// `rows` are tokenized rows without EOS; EOS is appended after each. Bad mode/window → ConfigError.
PackResult pack_rows(const std::vector<std::vector<uint32_t>>& rows, uint32_t eos, const PackOptions& opt);

// HF `Dataset.shard(num_shards, index, contiguous=True)` bounds: [begin, end) of shard `index` of n rows.
void contiguous_shard(int64_t n, int64_t num_shards, int64_t index, int64_t* begin, int64_t* end);

}  // namespace aobench
