// Implements: the harness's distributions over generation orders (DESIGN.md §3, spec-ao-gpt §2.1, §2.6).
// An order is a permutation σ of 0..T−1 listing original positions in generation order.
// Every draw uses the caller's seeded generator so runs are reproducible (the reference's unseeded
// Python `random` for the L2R/random choice is a known bug we do not copy).
#pragma once
#include <cstdint>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

namespace aobench {

struct OrderSpec {
  enum class Kind { kL2R, kRandom, kFixedRandom, kBlockwise, kMixture };
  Kind kind = Kind::kL2R;
  uint64_t seed = 0;   // fixed_random / blockwise: seed of the one fixed permutation
  int64_t block = 1;   // blockwise: block size b (T must be a multiple of b)
  double p_l2r = 0.1;  // mixture: probability that a sequence gets the identity order

  // (B, T) int64 permutations on `device`. Random draws use `gen` (a CPU generator).
  torch::Tensor draw(int64_t B, int64_t T, at::Generator& gen, torch::Device device = torch::kCPU) const;

  // {"kind": "l2r"|"random"|"fixed_random"|"blockwise"|"mixture", "seed":..., "block":..., "p_l2r":...}
  // `path` names the JSON location in errors.
  static OrderSpec from_json(const nlohmann::json& j, const std::string& path = "train.order");
  nlohmann::json to_json() const;
  std::string describe() const;  // "mixture(p_l2r=0.1)"
};

}  // namespace aobench
