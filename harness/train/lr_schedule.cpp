// Implements: the learning-rate schedules (see lr_schedule.h).
#include "harness/train/lr_schedule.h"

#include <cmath>

namespace aobench {
namespace {
constexpr double kPi = 3.14159265358979323846;
}  // namespace

double learning_rate_at(const TrainConfig& p, int64_t it) {
  if (p.lr_schedule == "constant") {
    // SEDD/RADD: lr·min(step/warmup, 1) with step counted from 1.
    if (p.warmup_iters > 0 && it < p.warmup_iters) return p.learning_rate * double(it + 1) / double(p.warmup_iters);
    return p.learning_rate;
  }
  // nanoGPT get_lr.
  if (it < p.warmup_iters) return p.learning_rate * double(it + 1) / double(p.warmup_iters + 1);
  if (it > p.lr_decay_iters) return p.min_lr;
  if (p.lr_decay_iters == p.warmup_iters) return p.learning_rate;
  const double ratio = double(it - p.warmup_iters) / double(p.lr_decay_iters - p.warmup_iters);  // in [0, 1]
  const double coeff = 0.5 * (1.0 + std::cos(kPi * ratio));
  return p.min_lr + coeff * (p.learning_rate - p.min_lr);
}

}  // namespace aobench
