// Implements: the FLOP count for MFU of the any-order decoders (6N + 12·L·d·T convention).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace aobench::common {

// 6N + 12·L·d·T for an any-order decoder, N its parameters without the position tables (wpe*, wtpe*,
// wnonee) and without those whose name contains one of `lookups`: those are lookups, not per-token matmuls.
double any_order_flops_per_token(const torch::nn::Module& net, int64_t n_layer, int64_t n_embd, int64_t T,
                                 const std::vector<std::string>& lookups = {});

}  // namespace aobench::common
