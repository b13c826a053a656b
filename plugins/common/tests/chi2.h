// Pearson χ² helpers of the sampler tests (plugins/common/tests, plugins/ao_gpt): the statistic of observed
// counts against expected probabilities and its upper α quantile.
#pragma once
#include <cmath>
#include <utility>
#include <vector>

namespace aobench::testing_stats {

// Upper α quantile of χ²(df) by Wilson–Hilferty (accurate to < 1% for df ≥ 3); z = 3.09 is α = 1e-3.
inline double chi2_critical(double df, double z = 3.0902) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3);
}

// Pearson χ² of observed counts against expected probabilities (cells with expectation < 5 pooled).
inline std::pair<double, double> chi2(const std::vector<double>& observed, const std::vector<double>& probs, double n) {
  double stat = 0, pooled_o = 0, pooled_e = 0;
  int64_t cells = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    const double e = probs[i] * n;
    if (e < 5) {
      pooled_o += observed[i];
      pooled_e += e;
      continue;
    }
    stat += (observed[i] - e) * (observed[i] - e) / e;
    ++cells;
  }
  if (pooled_e > 0) {
    stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
    ++cells;
  }
  return {stat, static_cast<double>(cells - 1)};
}

}  // namespace aobench::testing_stats
