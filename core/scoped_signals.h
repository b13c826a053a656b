// Implements: ScopedSignals — one handler for SIGINT and SIGTERM while in scope, the previous handlers restored
// when it ends. Used by the trainer (checkpoint, then stop) and by the lanes of `aobench run` (pass the signal on).
#pragma once
#include <signal.h>

namespace aobench {

class ScopedSignals {
 public:
  explicit ScopedSignals(void (*handler)(int)) {
    struct sigaction sa {};
    sa.sa_handler = handler;  // no SA_RESTART: a blocking call sees EINTR and the caller checks its flag
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~ScopedSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  ScopedSignals(const ScopedSignals&) = delete;
  ScopedSignals& operator=(const ScopedSignals&) = delete;

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

}  // namespace aobench
