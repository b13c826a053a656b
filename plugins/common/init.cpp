// Implements: plugins/common/init.h.
#include "plugins/common/init.h"

#include <cmath>

namespace aobench::common {

void trunc_normal_(torch::Tensor t, double std) {
  torch::NoGradGuard no_grad;
  // u ~ U(Φ(−3), Φ(3)), x = Φ⁻¹(u)·std = √2·erfinv(2u − 1)·std: exactly N(0, std²) cut at ±3 std.
  const double lo = 0.5 * std::erfc(3.0 / std::sqrt(2.0));
  auto u = torch::empty(t.sizes(), t.options().dtype(torch::kFloat64)).uniform_(lo, 1.0 - lo);
  auto x = torch::erfinv(u * 2.0 - 1.0) * (std::sqrt(2.0) * std);
  t.copy_(x.clamp(-3.0 * std, 3.0 * std));
}

}  // namespace aobench::common
