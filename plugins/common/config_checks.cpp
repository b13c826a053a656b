// Implements: plugins/common/config_checks.h.
#include "plugins/common/config_checks.h"

#include <string>

#include "core/errors.h"

namespace aobench::common {

void check_model_sizes(std::initializer_list<std::pair<const char*, int64_t>> sizes, int64_t n_embd, int64_t n_head,
                       double dropout) {
  for (auto [key, v] : sizes)
    if (v <= 0) throw ConfigError(std::string("'model.") + key + "' must be positive, got " + std::to_string(v));
  if (n_embd % n_head != 0)
    throw ConfigError("'model.n_embd' (" + std::to_string(n_embd) + ") must be a multiple of 'model.n_head' (" +
                          std::to_string(n_head) + ")",
                      "the head dim is n_embd / n_head (64 in the paper)");
  if (!(dropout >= 0.0 && dropout < 1.0)) throw ConfigError("'model.dropout' must lie in [0, 1)");
}

}  // namespace aobench::common
