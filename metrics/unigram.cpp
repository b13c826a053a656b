// Implements: the unigram level of a data set (see unigram.h). Both files are read once, in chunks, into
// id histograms; the score is then a sum over the V ids, not over the tokens.
#include "metrics/unigram.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/errors.h"

namespace aobench {
namespace {

// Occurrences of each id among tokens [0, n) of `file`: (V) int64 counts.
std::vector<int64_t> id_counts(const TokenFile& file, int64_t n, int64_t vocab) {
  constexpr int64_t kChunk = int64_t(1) << 20;  // 8 MiB of int64 ids at a time
  torch::Tensor counts = torch::zeros({vocab}, torch::kInt64);
  for (int64_t start = 0; start < n; start += kChunk) {
    const torch::Tensor hist = torch::bincount(file.slice(start, std::min(kChunk, n - start)), {}, vocab);
    if (hist.size(0) > vocab)
      throw DataError("token file " + file.path() + " holds id " + std::to_string(hist.size(0) - 1) +
                          ", outside the unigram's vocabulary of " + std::to_string(vocab) + " ids",
                      "the header's vocab_size (or the model's) must cover every id; re-create the file");
    counts += hist;
  }
  return std::vector<int64_t>(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + vocab);
}

}  // namespace

UnigramLevel unigram_level(const TokenFile& train, const TokenFile& eval, int64_t window, int64_t fallback_vocab,
                           int64_t max_tokens) {
  TORCH_CHECK(window >= 1 && max_tokens >= 1, "unigram_level: window and max_tokens must be positive");
  UnigramLevel u;
  u.vocab_size = std::max(train.header().vocab_size, eval.header().vocab_size);
  if (u.vocab_size <= 0) u.vocab_size = fallback_vocab;
  TORCH_CHECK(u.vocab_size >= 1, "unigram_level: no vocabulary size (headers 0 and fallback ", fallback_vocab, ")");
  u.train_tokens_counted = std::min(train.size(), max_tokens);
  u.val_tokens_scored = std::min(eval.size(), max_tokens) / window * window;  // whole windows only
  const std::vector<int64_t> counts = id_counts(train, u.train_tokens_counted, u.vocab_size);
  const std::vector<int64_t> scored = id_counts(eval, u.val_tokens_scored, u.vocab_size);
  const double denom = double(u.train_tokens_counted) + double(u.vocab_size);  // Σ (count + 1)
  double nats = 0;
  for (int64_t v = 0; v < u.vocab_size; ++v)
    if (scored[v] > 0) nats -= double(scored[v]) * std::log((double(counts[v]) + 1.0) / denom);
  u.nats = u.val_tokens_scored > 0 ? nats / double(u.val_tokens_scored) : std::nan("");
  return u;
}

}  // namespace aobench
