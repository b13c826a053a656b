// Implements: the slot layout of the any-order decoders σ-GPT and AO-GPT (spec-ao-gpt §1.1): a [None] start
// slot, then one slot per context token carrying its current position and the position it predicts.
#pragma once
#include <torch/torch.h>

namespace aobench::common {

// One row of input slots. token −1 = the [None] start slot; position −1 = "no current position" (the
// [None] slot, wpe row 0); target −1 = "no target" (zero conditioning). Every tensor is (B, S) int64.
struct Slots {
  torch::Tensor tokens;
  torch::Tensor positions;
  torch::Tensor targets;
};

// Training / exact-chain slots for tokens (B, T) under orders σ (B, T): slot 0 = [None] targeting σ(0),
// slot k ≥ 1 reads x_σ(k−1) at position σ(k−1) and targets σ(k). T slots (slot T is never needed).
Slots slots_for_order(const torch::Tensor& tokens, const torch::Tensor& order);

// Slots of ModelPlugin::chain_log_probs (plugin_api.h): [None] + ctx_tokens[:, :S−1], targets as given.
Slots slots_for_chain(const torch::Tensor& ctx_tokens, const torch::Tensor& ctx_positions,
                      const torch::Tensor& targets);

}  // namespace aobench::common
