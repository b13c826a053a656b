// Implements: plugins/common/flops.h.
#include "plugins/common/flops.h"

#include <algorithm>

namespace aobench::common {

double any_order_flops_per_token(const torch::nn::Module& net, int64_t n_layer, int64_t n_embd, int64_t T,
                                 const std::vector<std::string>& lookups) {
  double n = 0;
  for (const auto& p : net.named_parameters()) {
    const auto& k = p.key();
    if (k.rfind("wpe", 0) == 0 || k.rfind("wtpe", 0) == 0 || k == "wnonee") continue;
    auto in_k = [&](const std::string& l) { return k.find(l) != std::string::npos; };
    if (std::any_of(lookups.begin(), lookups.end(), in_k)) continue;
    n += p.value().numel();
  }
  return 6.0 * n + 12.0 * n_layer * n_embd * T;
}

}  // namespace aobench::common
