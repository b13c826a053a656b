// Implements: the learning-rate schedule of the training loop (spec-ao-gpt §2.2, spec-sedd-radd §2.6):
// nanoGPT's linear warm-up + cosine decay to train.min_lr, or SEDD/RADD's warm-up then constant.
#pragma once
#include <cstdint>

#include "core/config_types.h"

namespace aobench {

// LR at optimizer step `it` (0-based) under train.lr_schedule ("cosine": nanoGPT get_lr; "constant": warm-up
// then flat). Reads fields only: the train section was validated by TrainConfig::from_json.
double learning_rate_at(const TrainConfig& train, int64_t it);

}  // namespace aobench
