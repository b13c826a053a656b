// Implements: the small statistics every report needs (DESIGN.md §5: any-order perplexities carry a
// standard error): mean and standard error of the mean over independent units (sequences, seeds).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace aobench {

struct MeanStderr {
  double mean = 0;
  double stderr_ = 0;  // sample std (n − 1) / sqrt(n); 0 when n < 2
  int64_t n = 0;
};

double mean_of(const std::vector<double>& xs);  // 0 for an empty vector
// Standard error of the mean with the unbiased (n − 1) variance; 0 when fewer than two values.
double stderr_of(const std::vector<double>& xs);
MeanStderr mean_stderr(const std::vector<double>& xs);

// Two-sided 95 % critical value of Student's t with `df` degrees of freedom; df = ∞ gives the normal 1.960.
// Fractional df are rounded down (the conservative side); df < 1 is treated as 1.
double t_critical_95(double df);

// One quantity of one job (a final loss, a perplexity) estimated over its replicates (seeds). With n ≥ 2 the
// standard error is the seed spread sd/√n (df = n − 1); a single run has only its measurement error (the
// evaluation's standard error over windows or batches, df = ∞), NaN when none was recorded.
struct Estimate {
  double mean = NAN;
  double sd = NAN;  // spread over replicates; NaN when n < 2
  double se = NAN;  // standard error of the mean
  double df = INFINITY;
  int64_t n = 0;
};
// `measured_se[i]` is replicate i's own standard error (NaN when unknown); used only when n = 1.
Estimate estimate_over_replicates(const std::vector<double>& values, const std::vector<double>& measured_se);

// a − b against its noise: Welch's t at 95 % (two-sided) with Welch–Satterthwaite degrees of freedom, a
// single run's measured error counting as known (df = ∞). sign = +1 when a > b beyond the margin, −1 when
// a < b beyond it, 0 within it; known = false when either standard error is unknown (then sign = 0).
struct Difference {
  double diff = NAN, se = NAN, df = INFINITY;
  double margin = NAN;  // t_critical_95(df) · se
  int sign = 0;
  bool known = false;
};
Difference welch_difference(const Estimate& a, const Estimate& b);
// a − b for one model measured twice (a[i] and b[i] from replicate i: the same run, data and seed), paired: the
// mean of the n differences against Student's t at 95 % with n − 1 degrees of freedom. known = false for n < 2,
// unequal lengths or differences that are all equal (no spread to judge them by). Tighter than Welch when the replicates differ more from each other than a from b.
Difference paired_difference(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace aobench
