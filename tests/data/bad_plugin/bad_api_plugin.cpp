// Implements: fixture: a plugin library "built against another plugin API version".
// It exports the version and factory symbols of core/plugin_api.h, but reports kPluginApiVersion + 1, so the
// registry must refuse it before reading any other symbol or creating anything (tests/integration/hostile_input_test.cpp).
// Built as build*/bad_plugin/libaobench_badapi.so, outside the normal plugin directory.
#include <cstdint>

#include "core/plugin_api.h"

extern "C" __attribute__((visibility("default"))) uint32_t aobench_plugin_api_version() {
  return ::aobench::kPluginApiVersion + 1;
}

// Never called: the registry checks the version first. It exists so the library looks like a plugin
// (the registry requires both symbols) and the version check, not the symbol check, is what fails.
extern "C" __attribute__((visibility("default"))) ::aobench::ModelPlugin* aobench_create_plugin() { return nullptr; }
