// Implements: plugins/common/slots.h (spec-ao-gpt §1.1 slot table).
#include "plugins/common/slots.h"

namespace aobench::common {

Slots slots_for_order(const torch::Tensor& tokens, const torch::Tensor& order) {
  TORCH_CHECK(tokens.sizes() == order.sizes(), "tokens ", tokens.sizes(), " and order ", order.sizes(),
              " must have the same shape");
  auto x_sigma = tokens.gather(1, order);  // (B, T) tokens in generation order
  return slots_for_chain(x_sigma, order, order);
}

Slots slots_for_chain(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                      const torch::Tensor& targets) {
  TORCH_CHECK(
      ctx_tokens.dim() == 2 && ctx_tokens.sizes() == ctx_positions.sizes() && ctx_tokens.sizes() == targets.sizes(),
      "chain slots need (N, S) ctx_tokens, ctx_positions and targets; got ", ctx_tokens.sizes(), ", ",
      ctx_positions.sizes(), ", ", targets.sizes());
  const int64_t S = ctx_tokens.size(1);
  auto none = torch::full({ctx_tokens.size(0), 1}, -1, ctx_tokens.options().dtype(torch::kLong));
  Slots s;
  s.tokens = torch::cat({none, ctx_tokens.narrow(1, 0, S - 1)}, 1);        // (N, S)
  s.positions = torch::cat({none, ctx_positions.narrow(1, 0, S - 1)}, 1);  // (N, S)
  s.targets = targets;
  return s;
}

}  // namespace aobench::common
