// Implements: fixture: a plugin library with the right API version but no
// aobench_plugin_fingerprint symbol, so its compiler and LibTorch cannot be checked; the registry must
// refuse it by name (tests/integration/hostile_input_test.cpp). Built into build*/bad_plugin_nofp.
#include <cstdint>

#include "core/plugin_api.h"

extern "C" __attribute__((visibility("default"))) uint32_t aobench_plugin_api_version() {
  return ::aobench::kPluginApiVersion;
}

// Never called: the missing fingerprint is refused first.
extern "C" __attribute__((visibility("default"))) ::aobench::ModelPlugin* aobench_create_plugin() { return nullptr; }
