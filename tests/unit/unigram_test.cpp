// Implements: tests of metrics/unigram.h on tiny token files against hand computations: add-one smoothing
// over the header's vocabulary, whole windows scored with every token counted, the training file scored on
// itself, the 2^28-style token bound, the fallback vocabulary of header-less files and an id outside it.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "datasets/token_file.h"
#include "metrics/unigram.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

// −mean log((count(v) + 1) / (N + V)) over the scored ids: the definition written out.
double add_one_nats(const std::vector<int>& counts, int64_t n_train, const std::vector<int>& scored) {
  double nats = 0;
  for (int v : scored) nats -= std::log((counts[v] + 1.0) / double(n_train + int64_t(counts.size())));
  return nats / double(scored.size());
}

TEST(Unigram, AddOneOverTheHeaderVocabularyOnWholeWindows) {
  testing::TempDir d;
  // Train: id 0 once, 1 twice, 2 three times, 3 never; V = 5 from the header (id 4 never seen either).
  write_token_file(d.file("train.bin"), {2, 1, 0, 2, 1, 2}, 5);
  // Eval: 7 tokens, windows of 3 → the first 6 are scored, the last (id 4) is cut with the partial window.
  write_token_file(d.file("val.bin"), {1, 2, 3, 2, 0, 2, 4}, 5);
  const TokenFile train(d.file("train.bin")), val(d.file("val.bin"));
  const UnigramLevel u = unigram_level(train, val, /*window=*/3, /*fallback_vocab=*/999);
  EXPECT_EQ(u.vocab_size, 5);
  EXPECT_EQ(u.train_tokens_counted, 6);
  EXPECT_EQ(u.val_tokens_scored, 6);
  // p = (c + 1) / (6 + 5): id 0 → 2/11, 1 → 3/11, 2 → 4/11, 3 → 1/11.
  const double want = -(std::log(3.0 / 11) + 3 * std::log(4.0 / 11) + std::log(1.0 / 11) + std::log(2.0 / 11)) / 6;
  EXPECT_NEAR(u.nats, want, 1e-12);
  EXPECT_NEAR(u.nats, add_one_nats({1, 2, 3, 0, 0}, 6, {1, 2, 3, 2, 0, 2}), 1e-12);

  // No validation file: the training file is scored on itself (both windows of 3).
  const UnigramLevel self = unigram_level(train, train, 3, 999);
  EXPECT_EQ(self.val_tokens_scored, 6);
  EXPECT_NEAR(self.nats, add_one_nats({1, 2, 3, 0, 0}, 6, {2, 1, 0, 2, 1, 2}), 1e-12);
}

TEST(Unigram, BoundedTokenCountsAndFallbackVocabulary) {
  testing::TempDir d;
  write_token_file(d.file("train.bin"), {2, 1, 0, 2, 1, 2}, 0);  // header vocab 0 = unknown
  write_token_file(d.file("val.bin"), {1, 2, 3, 2, 0, 2, 4}, 0);
  const TokenFile train(d.file("train.bin")), val(d.file("val.bin"));
  // At most 4 tokens of each file: train counts {2, 1, 0, 2}, eval scores the one whole window of 3 in {1, 2, 3, 2}.
  const UnigramLevel u = unigram_level(train, val, 3, /*fallback_vocab=*/6, /*max_tokens=*/4);
  EXPECT_EQ(u.vocab_size, 6);
  EXPECT_EQ(u.train_tokens_counted, 4);
  EXPECT_EQ(u.val_tokens_scored, 3);
  EXPECT_NEAR(u.nats, add_one_nats({1, 1, 2, 0, 0, 0}, 4, {1, 2, 3}), 1e-12);
  // An id outside the vocabulary is a DataError naming the file, not a silent out-of-range count.
  EXPECT_THROW(unigram_level(train, val, 1, /*fallback_vocab=*/4), DataError);
  // Fewer tokens than one window: nothing scored, NaN.
  EXPECT_TRUE(std::isnan(unigram_level(train, val, 8, 6).nats));
}

}  // namespace
}  // namespace aobench
