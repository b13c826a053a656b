// Implements: mean and standard error of the mean (see stats.h). Sums run in float64 in one pass over a
// centred copy, which is accurate enough for per-sequence NLLs (values of order 1–10).
#include "metrics/stats.h"

#include <cmath>

namespace aobench {

double mean_of(const std::vector<double>& xs) {
  if (xs.empty()) return 0;
  double s = 0;
  for (double x : xs) s += x;
  return s / static_cast<double>(xs.size());
}

double stderr_of(const std::vector<double>& xs) {
  const size_t n = xs.size();
  if (n < 2) return 0;
  const double m = mean_of(xs);
  double ss = 0;
  for (double x : xs) ss += (x - m) * (x - m);
  const double var = ss / static_cast<double>(n - 1);
  return std::sqrt(var / static_cast<double>(n));
}

MeanStderr mean_stderr(const std::vector<double>& xs) {
  return {mean_of(xs), stderr_of(xs), static_cast<int64_t>(xs.size())};
}

}  // namespace aobench
