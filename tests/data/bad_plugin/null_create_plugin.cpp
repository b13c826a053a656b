// Implements: fixture: a plugin library with the right API version, fingerprint and default config whose
// aobench_create_plugin() returns null; the registry must refuse it by name, never crash
// (tests/integration/hostile_input_test.cpp). Built into build*/bad_plugin_nullcreate, its own folder.
#include <cstdint>

#include "core/plugin_api.h"

extern "C" __attribute__((visibility("default"))) uint32_t aobench_plugin_api_version() {
  return ::aobench::kPluginApiVersion;
}

extern "C" __attribute__((visibility("default"))) const char* aobench_plugin_fingerprint() {
  static const std::string fp = ::aobench::build_fingerprint();
  return fp.c_str();
}

extern "C" __attribute__((visibility("default"))) const char* aobench_plugin_default_config() {
  return R"({"flavours": {"debug": {}}, "doc": {}})";
}

extern "C" __attribute__((visibility("default"))) ::aobench::ModelPlugin* aobench_create_plugin() { return nullptr; }
