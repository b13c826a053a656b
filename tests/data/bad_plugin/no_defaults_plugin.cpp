// Implements: fixture: a plugin library with the right API version and fingerprint but no
// aobench_plugin_default_config symbol (its default.json), so no flavour could be resolved; the registry must
// refuse it by name (tests/integration/hostile_input_test.cpp). Built into build*/bad_plugin_nodefaults.
#include <cstdint>
#include <string>

#include "core/plugin_api.h"

extern "C" __attribute__((visibility("default"))) uint32_t aobench_plugin_api_version() {
  return ::aobench::kPluginApiVersion;
}

extern "C" __attribute__((visibility("default"))) const char* aobench_plugin_fingerprint() {
  static const std::string fp = ::aobench::build_fingerprint();
  return fp.c_str();
}

// Never called: the registry checks the default config first.
extern "C" __attribute__((visibility("default"))) ::aobench::ModelPlugin* aobench_create_plugin() { return nullptr; }
