// Implements: the model-size rules the transformer plugins share, checked in configure() after reading the
// keys with ModelConfig (core/plugin_api.h).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <utility>

namespace aobench::common {

// Every listed size positive, n_embd a multiple of n_head, dropout in [0, 1); ConfigError names "model.<key>".
void check_model_sizes(std::initializer_list<std::pair<const char*, int64_t>> sizes, int64_t n_embd, int64_t n_head,
                       double dropout);

}  // namespace aobench::common
