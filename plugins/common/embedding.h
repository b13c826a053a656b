// The input rows of a step: a token table's row plus a position table's row, in one kernel on CUDA
// (embedding_cuda.cu) where LibTorch took up to seven small launches a decode step (the where over AO-GPT's
// [None] slots, the clamp, two gathers, the position offset, the add); embed_sum_reference elsewhere and as the
// kernel's test oracle (the same additions in the tables' dtype, so the same bits).
#pragma once

#include <torch/torch.h>

namespace aobench::common {

// x[b, s] = (tokens[b, s] < 0 ? none : tok_table[tokens[b, s]]) + pos_table[positions[.., s] + pos_offset]:
// tokens (B, S) int64, positions (B, S) or (S) int64 (one row for every sequence), tok_table (V, d), pos_table
// (P, d), none (d) or (1, d) (AO-GPT's [None] row; undefined: every token must be ≥ 0) → (B, S, d) in the tables'
// dtype. On CUDA without a gradient an id outside its table gives a NaN row (the reference's gathers raise).
torch::Tensor embed_sum(const torch::Tensor& tok_table, const torch::Tensor& tokens, const torch::Tensor& none,
                        const torch::Tensor& pos_table, const torch::Tensor& positions, int64_t pos_offset);
torch::Tensor embed_sum_reference(const torch::Tensor& tok_table, const torch::Tensor& tokens,
                                  const torch::Tensor& none, const torch::Tensor& pos_table,
                                  const torch::Tensor& positions, int64_t pos_offset);

// CUDA entry point (embedding_cuda.cu, built with CUDA only) for what embed_sum has checked: float32 tables with
// contiguous rows of d % 4 = 0, contiguous int64 ids.
torch::Tensor embed_sum_cuda(const torch::Tensor& tok_table, const torch::Tensor& tokens, const torch::Tensor& none,
                             const torch::Tensor& pos_table, const torch::Tensor& positions, int64_t pos_offset);

}  // namespace aobench::common
