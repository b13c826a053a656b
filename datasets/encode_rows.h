// Implements: tokenizing the rows of a dataset on several threads for `aobench prepare` (spec-sedd-radd.md
// §4.3 step 1), on ATen's intra-op pool (at::parallel_for). Row i's ids land in slot i, so the result is
// the same for every thread count.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace aobench {

class Progress;
class Tokenizer;

// Rows per thread below which at::parallel_for uses fewer threads (its grain size).
inline constexpr int64_t kEncodeGrainRows = 16;

// tok.encode(rows[i]) for every i, on `threads` threads (≥ 1). How ATen's OpenMP pool honours `threads`:
// the rows are cut into min(threads, ⌈rows / kEncodeGrainRows⌉) contiguous blocks, one per thread, the
// calling thread included; so exactly `threads` threads once there are threads × 16 rows, fewer below.
// The pool's size is process-wide: it is set for this call and restored after. A row whose encoding
// throws is a DataError "cannot encode <row_name(i)>: <message>" (row_name(i) defaults to "row <i+1>");
// when several rows fail, the first in row order is reported, whatever the threads' timing.
// `progress` (may be null) advances by the rows done.
std::vector<std::vector<uint32_t>> encode_rows(const Tokenizer& tok, const std::vector<std::string>& rows, int threads,
                                               Progress* progress,
                                               const std::function<std::string(size_t)>& row_name = {});

}  // namespace aobench
