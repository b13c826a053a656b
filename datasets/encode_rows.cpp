// Implements: datasets/encode_rows.h.
#include "datasets/encode_rows.h"

#include <ATen/Parallel.h>

#include <exception>
#include <limits>
#include <mutex>

#include "core/errors.h"
#include "core/progress.h"
#include "datasets/tokenizer.h"

namespace aobench {

std::vector<std::vector<uint32_t>> encode_rows(const Tokenizer& tok, const std::vector<std::string>& rows, int threads,
                                               Progress* progress, const std::function<std::string(size_t)>& row_name) {
  if (threads < 1)
    throw ConfigError("encode_rows: " + std::to_string(threads) + " threads", "give 1 or more (prepare: --threads)");
  std::vector<std::vector<uint32_t>> out(rows.size());
  // The intra-op pool is process-wide (`aobench run` prepares, then trains in the same process): restore it.
  struct PoolSize {
    int before = at::get_num_threads();
    ~PoolSize() { at::set_num_threads(before); }
  } restore;
  at::set_num_threads(threads);

  std::mutex failed_mutex;
  size_t failed_row = std::numeric_limits<size_t>::max();
  std::exception_ptr failed;
  at::parallel_for(0, static_cast<int64_t>(rows.size()), kEncodeGrainRows, [&](int64_t begin, int64_t end) {
    constexpr int64_t kReportEvery = 64;  // rows between two progress updates of one thread
    int64_t unreported = 0;
    for (int64_t i = begin; i < end; ++i) {
      try {
        out[i] = tok.encode(rows[i]);
      } catch (...) {  // this block stops at its first failure; the earliest row over all blocks is reported
        std::lock_guard<std::mutex> lock(failed_mutex);
        if (static_cast<size_t>(i) < failed_row) failed_row = static_cast<size_t>(i), failed = std::current_exception();
        break;
      }
      if (++unreported == kReportEvery && progress) progress->advance(unreported), unreported = 0;
    }
    if (progress && unreported > 0) progress->advance(unreported);
  });
  if (failed) {
    const std::string where = row_name ? row_name(failed_row) : "row " + std::to_string(failed_row + 1);
    try {
      std::rethrow_exception(failed);
    } catch (const Error& e) {
      throw DataError("cannot encode " + where + ": " + e.what(), e.hint());
    } catch (const std::exception& e) {
      throw DataError("cannot encode " + where + ": " + e.what(),
                      "check that row's text; std::bad_alloc means out of memory (fewer --threads or --max-rows help)");
    }
  }
  return out;
}

}  // namespace aobench
