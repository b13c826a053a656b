// Implements: config parser fuzz target (core/config.h).
// The first line of the input is a "--set key=value" assignment, the rest a JSON experiment file.
// Parsing, strict merging into the harness defaults, the override and the typed getters must either
// succeed or throw ConfigError (never another exception type, never a crash).
#include <cstdint>
#include <string>

#include "core/config.h"
#include "core/config_types.h"
#include "core/errors.h"
#include "harness/resolve_config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nl = input.find('\n');
  const std::string assignment = input.substr(0, nl);
  const std::string body = nl == std::string::npos ? "" : input.substr(nl + 1);
  const std::string& path = aobench::fuzz::scratch_path("config");
  aobench::fuzz::write_input(path, reinterpret_cast<const uint8_t*>(body.data()), body.size());

  aobench::json config = aobench::base_config();
  try {
    const aobench::json experiment = aobench::load_json_file(path);
    aobench::merge_strict(config, experiment, path);
  } catch (const aobench::ConfigError&) {}
  try {
    aobench::apply_set(config, assignment);
  } catch (const aobench::ConfigError&) {}
  // The typed getters over every leaf path the fuzzed assignment may have touched.
  const std::string key = assignment.substr(0, assignment.find('='));
  for (const auto& p : {key, std::string("train.learning_rate"), std::string("train.batch_size")}) {
    try {
      aobench::get_number_in(config, p, 0.0, 1e9);
    } catch (const aobench::ConfigError&) {}
    try {
      aobench::get_int(config, p);
    } catch (const aobench::ConfigError&) {}
    try {
      aobench::get_string(config, p);
    } catch (const aobench::ConfigError&) {}
    try {
      aobench::get_bool(config, p);
    } catch (const aobench::ConfigError&) {}
  }
  // The typed sections: a value or a ConfigError naming the key.
  try {
    aobench::DataConfig::from_json(config);
  } catch (const aobench::ConfigError&) {}
  try {
    aobench::TrainConfig::from_json(config);
  } catch (const aobench::ConfigError&) {}
  try {
    aobench::EvalConfig::from_json(config);
  } catch (const aobench::ConfigError&) {}
  try {
    aobench::SampleConfig::from_json(config);
  } catch (const aobench::ConfigError&) {}
  try {
    aobench::SpeedConfig::from_json(config);
  } catch (const aobench::ConfigError&) {}
  try {
    aobench::GenpplConfig::from_json(config);
  } catch (const aobench::ConfigError&) {}
  volatile size_t sink = aobench::config_summary(config, "config.resolved.json").size();
  (void)sink;
  return 0;
}
