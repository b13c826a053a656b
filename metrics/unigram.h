// Implements: the unigram level of a data set, the loss a model has when it has learnt token frequencies but
// no context: the plateau an any-order model sits at before its loss falls (docs/results/README.md).
// Add-one smoothed unigram fitted on a training token file, scored as mean cross-entropy on another; the
// numbers of scripts/unigram_ppl.py TRAIN EVAL --window W (its "all tokens" row).
#pragma once
#include <cstdint>

#include "datasets/token_file.h"

namespace aobench {

// Large files are bounded: at most the first 2^28 tokens (≈ 268 M) of each file are counted or scored.
inline constexpr int64_t kUnigramMaxTokens = int64_t(1) << 28;

struct UnigramLevel {
  double nats = 0;                   // mean cross-entropy, nats per token (NaN when nothing was scored)
  int64_t train_tokens_counted = 0;  // tokens of the training file the counts come from
  int64_t val_tokens_scored = 0;     // tokens of the evaluation file scored
  int64_t vocab_size = 0;            // V of the smoothing
};

// p(v) = (count_train(v) + 1) / (N_train + V) over V = the larger header vocab_size of the two files
// (`fallback_vocab`, e.g. the model's, when neither header has one), with N_train = the first
// min(size, max_tokens) tokens of `train`. Scored on every token of the whole `window`-token windows in the
// first min(size, max_tokens) tokens of `eval` (pass `train` itself when there is no validation file).
// Every token is scored, none skipped: the training and validation losses average over all T tokens of a
// window too. DataError when an id is ≥ V.
UnigramLevel unigram_level(const TokenFile& train, const TokenFile& eval, int64_t window, int64_t fallback_vocab,
                           int64_t max_tokens = kUnigramMaxTokens);

}  // namespace aobench
