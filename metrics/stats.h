// Implements: the small statistics every report needs (DESIGN.md §5: any-order perplexities carry a
// standard error): mean and standard error of the mean over independent units (sequences, seeds).
#pragma once
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

}  // namespace aobench
