// Implements: plugins/common/sampling.h.
#include "plugins/common/sampling.h"

namespace aobench::common {

torch::Tensor top_p_keep(const torch::Tensor& probs, double top_p) {
  auto [sorted, idx] = probs.sort(-1, /*descending=*/true);
  auto mass_before = sorted.cumsum(-1) - sorted;  // mass strictly above each sorted token
  return torch::zeros_like(mass_before, torch::kBool).scatter(-1, idx, mass_before < top_p);
}

}  // namespace aobench::common
