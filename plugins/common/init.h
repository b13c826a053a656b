// Implements: initialisation helpers and the padded vocabulary of the plugins' embeddings.
#pragma once
#include <cstdint>

#include <torch/torch.h>

namespace aobench::common {

// Vocabulary padded up to a multiple of 64 (GPT-2: 50257 → 50304): the rows of wte / the head's columns.
inline int64_t padded_vocab(int64_t v) { return (v + 63) / 64 * 64; }

// In-place truncated normal N(0, std²) cut at ±3·std, by inverse-CDF sampling (torch's C++ API has no
// trunc_normal_); uses the global generator so torch::manual_seed makes builds reproducible.
void trunc_normal_(torch::Tensor t, double std);

}  // namespace aobench::common
