// Implements: plugins/common/embedding.h.
#include "plugins/common/embedding.h"

#include "plugins/common/kernel_util.h"

namespace aobench::common {

namespace {
void check_inputs(const torch::Tensor& tok_table, const torch::Tensor& tokens, const torch::Tensor& none,
                  const torch::Tensor& pos_table, const torch::Tensor& positions) {
  const int64_t d = tok_table.dim() == 2 ? tok_table.size(1) : -1;
  TORCH_CHECK(tok_table.dim() == 2 && pos_table.dim() == 2 && pos_table.size(1) == d &&
                  pos_table.scalar_type() == tok_table.scalar_type() &&
                  (!none.defined() || (none.numel() == d && none.scalar_type() == tok_table.scalar_type())),
              "embed_sum: the tables must be (V, d) and (P, d) of one dtype and none (d), got ", tok_table.sizes(),
              ", ", pos_table.sizes(), " and ", none.defined() ? none.sizes() : torch::IntArrayRef{});
  TORCH_CHECK(
      tokens.dim() == 2 && tokens.scalar_type() == torch::kLong && positions.scalar_type() == torch::kLong &&
          (positions.sizes() == tokens.sizes() || (positions.dim() == 1 && positions.size(0) == tokens.size(1))),
      "embed_sum: tokens must be (B, S) and positions (B, S) or (S), int64, got ", tokens.sizes(), " and ",
      positions.sizes());
}

// The reference's expressions on checked inputs.
torch::Tensor sum_of_gathers(const torch::Tensor& tok_table, const torch::Tensor& tokens, const torch::Tensor& none,
                             const torch::Tensor& pos_table, const torch::Tensor& positions, int64_t pos_offset) {
  namespace F = torch::nn::functional;
  torch::Tensor tok = F::embedding(none.defined() ? tokens.clamp_min(0) : tokens, tok_table);  // (B, S, d)
  if (none.defined()) tok = torch::where(tokens.lt(0).unsqueeze(-1), none.view({-1}), tok);
  return tok + F::embedding(pos_offset != 0 ? positions + pos_offset : positions, pos_table);
}
}  // namespace

torch::Tensor embed_sum_reference(const torch::Tensor& tok_table, const torch::Tensor& tokens,
                                  const torch::Tensor& none, const torch::Tensor& pos_table,
                                  const torch::Tensor& positions, int64_t pos_offset) {
  check_inputs(tok_table, tokens, none, pos_table, positions);
  return sum_of_gathers(tok_table, tokens, none, pos_table, positions, pos_offset);
}

torch::Tensor embed_sum(const torch::Tensor& tok_table, const torch::Tensor& tokens, const torch::Tensor& none,
                        const torch::Tensor& pos_table, const torch::Tensor& positions, int64_t pos_offset) {
  check_inputs(tok_table, tokens, none, pos_table, positions);
#ifdef AOBENCH_FUSED_CUDA
  const int64_t d = tok_table.size(1);
  const auto on = [&](const torch::Tensor& t) { return !t.defined() || t.device() == tokens.device(); };
  // Tables of 16-byte aligned rows with unit column stride (float4 loads), the [None] row contiguous.
  const auto rows = [](const torch::Tensor& t) { return t.stride(1) == 1 && t.stride(0) % 4 == 0 && aligned(t, 16); };
  if (tokens.is_cuda() && on(tok_table) && on(pos_table) && on(none) && on(positions) &&
      tok_table.scalar_type() == torch::kFloat && d % 4 == 0 && rows(tok_table) && rows(pos_table) &&
      (!none.defined() || (none.is_contiguous() && aligned(none, 16))) && !records_grad({tok_table, pos_table, none}))
    return embed_sum_cuda(tok_table, tokens.contiguous(), none, pos_table, positions.contiguous(), pos_offset);
#endif
  return sum_of_gathers(tok_table, tokens, none, pos_table, positions, pos_offset);
}

}  // namespace aobench::common
