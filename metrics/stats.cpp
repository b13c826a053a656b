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

double t_critical_95(double df) {
  // Two-sided 95 % points of Student's t (df 1 … 30, then 40, 60, 120, ∞), the standard table.
  static const double small[30] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                   2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                   2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (!(df >= 1)) df = 1;
  if (std::isinf(df)) return 1.960;
  const auto k = static_cast<int64_t>(std::floor(df));
  if (k <= 30) return small[k - 1];
  if (k < 40) return 2.042;
  if (k < 60) return 2.021;
  if (k < 120) return 2.000;
  return 1.980;
}

Estimate estimate_over_replicates(const std::vector<double>& values, const std::vector<double>& measured_se) {
  Estimate e;
  e.n = static_cast<int64_t>(values.size());
  if (values.empty()) return e;
  e.mean = mean_of(values);
  if (e.n >= 2) {
    e.se = stderr_of(values);
    e.sd = e.se * std::sqrt(static_cast<double>(e.n));
    e.df = static_cast<double>(e.n - 1);
  } else {
    e.se = measured_se.empty() ? NAN : measured_se[0];
    e.df = INFINITY;
  }
  return e;
}

Difference paired_difference(const std::vector<double>& a, const std::vector<double>& b) {
  Difference d;
  if (a.size() != b.size() || a.size() < 2) return d;
  std::vector<double> diffs(a.size());
  for (size_t i = 0; i < a.size(); ++i) diffs[i] = a[i] - b[i];
  d.diff = mean_of(diffs);
  d.se = stderr_of(diffs);
  if (!std::isfinite(d.diff) || !(d.se > 0)) return d;
  d.df = static_cast<double>(diffs.size() - 1);
  d.margin = t_critical_95(d.df) * d.se;
  d.known = true;
  d.sign = d.diff > d.margin ? 1 : d.diff < -d.margin ? -1 : 0;
  return d;
}

Difference welch_difference(const Estimate& a, const Estimate& b) {
  Difference d;
  d.diff = a.mean - b.mean;
  if (!std::isfinite(a.se) || !std::isfinite(b.se) || !std::isfinite(d.diff)) return d;
  const double va = a.se * a.se, vb = b.se * b.se;
  d.se = std::sqrt(va + vb);
  // Welch–Satterthwaite; a term with df = ∞ (a known error) adds nothing to the denominator.
  const double denom = (std::isinf(a.df) ? 0 : va * va / a.df) + (std::isinf(b.df) ? 0 : vb * vb / b.df);
  d.df = denom > 0 ? (va + vb) * (va + vb) / denom : INFINITY;
  d.margin = t_critical_95(d.df) * d.se;
  d.known = true;
  d.sign = d.diff > d.margin ? 1 : d.diff < -d.margin ? -1 : 0;
  return d;
}

}  // namespace aobench
