// Implements: tests of the layered strict config (core/config.h): unknown keys with
// "did you mean", type mismatches, --set parsing, and range checks that reject NaN/negative/absurd values.
#include <algorithm>
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "core/config.h"
#include "core/config_types.h"
#include "core/device.h"
#include "core/errors.h"
#include "harness/resolve_config.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

// Runs f, expects a ConfigError whose message contains every needle; returns the message.
template <class F>
std::string expect_config_error(F f, std::initializer_list<std::string> needles) {
  try {
    f();
  } catch (const ConfigError& e) {
    const std::string msg = std::string(e.what()) + " | HINT: " + e.hint();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    return msg;
  }
  ADD_FAILURE() << "no ConfigError thrown";
  return "";
}

TEST(Config, BaseHasTrainAndDataSections) {
  const json& b = base_config();
  EXPECT_TRUE(b["train"].is_object());
  EXPECT_EQ(b["data"]["val"], "");
  EXPECT_EQ(b["train"]["nan_policy"], "stop");
}

TEST(Config, UnknownKeySuggestsTheClosest) {
  json c = base_config();
  expect_config_error([&] { apply_set(c, "train.learnin_rate=1e-3"); },
                      {"unknown key 'train.learnin_rate'", "did you mean 'train.learning_rate'"});
  expect_config_error([&] { apply_set(c, "nosuchsection.x=1"); }, {"unknown key 'nosuchsection'"});
}

TEST(Config, SetParsesJsonOrString) {
  json c = base_config();
  apply_set(c, "train.learning_rate=3e-4");
  EXPECT_DOUBLE_EQ(c["train"]["learning_rate"].get<double>(), 3e-4);
  apply_set(c, "train.out_dir=runs/x-1");
  EXPECT_EQ(c["train"]["out_dir"], "runs/x-1");
  apply_set(c, "train.batch_size=16.0");  // integral float fills an integer
  EXPECT_TRUE(c["train"]["batch_size"].is_number_integer());
  EXPECT_EQ(c["train"]["batch_size"], 16);
  apply_set(c, "train.learning_rate=1");  // integer fills a float
  EXPECT_DOUBLE_EQ(get_number(c, "train.learning_rate"), 1.0);
  apply_set(c, R"(train.order={"kind": "mixture", "p_l2r": 0.2})");  // objects merge
  EXPECT_EQ(c["train"]["order"]["kind"], "mixture");
  EXPECT_EQ(c["train"]["order"]["block"], 1);
  // Only the first '=' splits: "5=6" is a string, not an integer.
  expect_config_error([&] { apply_set(c, "train.max_iters=5=6"); }, {"train.max_iters", "got string"});
  expect_config_error([&] { apply_set(c, "train.max_iters"); }, {"key.path=value"});
  expect_config_error([&] { apply_set(c, "=5"); }, {"key.path=value"});
}

TEST(Config, TypeMismatchesNameKeyAndTypes) {
  json c = base_config();
  expect_config_error([&] { apply_set(c, "train.batch_size=1.5"); }, {"train.batch_size", "must be integer"});
  expect_config_error([&] { apply_set(c, "train.batch_size=\"8\""); }, {"train.batch_size", "got string"});
  expect_config_error([&] { apply_set(c, "train.ema=true"); }, {"train.ema", "must be number"});
  expect_config_error([&] { apply_set(c, "train.order=5"); }, {"train.order"});
  expect_config_error([&] { merge_strict(c, json{{"train", 3}}, "exp.json"); }, {"exp.json", "'train'"});
  // The empty `model` slot takes an object only.
  expect_config_error([&] { merge_strict(c, json{{"model", "gpt"}}, "exp.json"); }, {"exp.json", "'model'"});
}

TEST(Config, OverflowingNumberIsAConfigError) {
  json c = base_config();
  // 1e999 overflows a double: either rejected at --set time or as a non-finite value by get_number_in.
  try {
    apply_set(c, "train.learning_rate=1e999");
  } catch (const ConfigError&) {
    return;
  }
  expect_config_error([&] { get_number_in(c, "train.learning_rate", 0, 10); }, {"train.learning_rate"});
}

TEST(Config, RangeChecksRejectNanNegativeAbsurd) {
  json c = base_config();
  c["train"]["learning_rate"] = std::nan("");
  expect_config_error([&] { get_number_in(c, "train.learning_rate", 0, 10); }, {"train.learning_rate", "nan"});
  c["train"]["learning_rate"] = -1e-3;
  expect_config_error([&] { get_number_in(c, "train.learning_rate", 0, 10); }, {"train.learning_rate"});
  c["train"]["learning_rate"] = std::numeric_limits<double>::infinity();
  expect_config_error([&] { get_number_in(c, "train.learning_rate", 0, 10); }, {"train.learning_rate"});
  c["train"]["learning_rate"] = 1e6;
  expect_config_error([&] { get_number_in(c, "train.learning_rate", 0, 10); }, {"out of range"});
  c["train"]["learning_rate"] = 3e-4;
  EXPECT_DOUBLE_EQ(get_number_in(c, "train.learning_rate", 0, 10), 3e-4);
  expect_config_error([&] { get_number(c, "train.nope"); }, {"missing config key 'train.nope'"});
  expect_config_error([&] { get_int(c, "train.learning_rate"); }, {"must be an integer"});
  expect_config_error([&] { get_string(c, "train.seed"); }, {"must be a string"});
  expect_config_error([&] { get_bool(c, "train.seed"); }, {"true or false"});
}

TEST(Config, JsonFilesAllowCommentsAndNameTheFileOnErrors) {
  aobench::testing::TempDir dir;
  const std::string good = dir.file("good.json"), bad = dir.file("bad.json");
  aobench::testing::write_text(good, "{\n  // a comment\n  \"train\": {\"max_iters\": 5} /* x */\n}\n");
  json c = base_config();
  merge_strict(c, load_json_file(good), good);
  EXPECT_EQ(c["train"]["max_iters"], 5);
  aobench::testing::write_text(bad, "{\"train\": {\"max_iters\": 5,}}");
  expect_config_error([&] { load_json_file(bad); }, {bad});
  expect_config_error([&] { load_json_file(dir.file("missing.json")); }, {"missing.json"});
  // Free top-level string keys.
  merge_strict(c, json{{"description", "why"}}, "x");
  EXPECT_EQ(c["description"], "why");
  expect_config_error([&] { merge_strict(c, json{{"description", 3}}, "x"); }, {"description"});
}

// nlohmann keeps the last of two equal keys; each text below would parse without the check.
TEST(Config, DuplicateKeysAreErrorsNamingTheirPath) {
  const std::string origin = "'dup.json'";
  for (const auto& [text, path] : std::vector<std::pair<std::string, std::string>>{
           {R"({"train": {"max_iters": 1, "max_iters": 2}})", "train.max_iters"},
           {R"({"seed": 1, "train": {}, "seed": 2})", "seed"},
           {R"({"jobs": [{"name": "a"}, {"name": "b", "name": "c"}]})", "jobs[1].name"},
           {R"({"m": [1, [2, {"k": 0}], {"k": 1, "k": 2}]})", "m[2].k"},
           {R"({"m": [[], [{"k": 1, "k": 2}]]})", "m[1][0].k"}}) {
    const std::string msg =
        expect_config_error([&] { parse_json_limited(text, origin); }, {origin, "duplicate key '" + path + "'"});
    EXPECT_NE(msg.find("HINT: "), std::string::npos);
  }
  // The same key in different objects is no duplicate; nesting is still bounded.
  const json ok = parse_json_limited(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 2}]})", origin);
  EXPECT_EQ(ok["c"][1]["x"], 2);
  expect_config_error([&] { parse_json_limited(std::string(100, '[') + std::string(100, ']'), origin); },
                      {origin, "deeper than 64"});
  aobench::testing::TempDir dir;
  const std::string file = dir.file("dup.json");
  aobench::testing::write_text(file, "{\n  \"train\": {\"max_iters\": 1, // one\n  \"max_iters\": 2}\n}\n");
  expect_config_error([&] { load_json_file(file); }, {file, "duplicate key 'train.max_iters'"});
}

// A directory or device read as a config would give an empty or endless file: refused by name first.
TEST(Config, SpecialFilesAreRefusedByKind) {
  aobench::testing::TempDir dir;
  expect_config_error([&] { load_json_file(dir.path.string()); }, {dir.path.string(), "a directory"});
  expect_config_error([&] { load_json_file("/dev/null"); }, {"/dev/null", "a character device"});
  EXPECT_EQ(special_file_kind(dir.file("missing.json")), "");  // the open error names a missing file
  aobench::testing::write_text(dir.file("ok.json"), "{}");
  EXPECT_EQ(special_file_kind(dir.file("ok.json")), "");
}

// The start-of-run print lists only what differs from base.json and the flavour, not every key.
TEST(Config, SummaryListsOnlyChangedKeys) {
  const json c = resolve_config(
      json{{"model", {{"plugin", "gpt"}, {"flavour", "debug"}, {"block_size", 64}}}, {"description", "a run"}},
      Overrides::from_sets({"train.learning_rate=1e-3", "train.order.kind=random", "eval.ensemble=[1,2]"}));
  const std::string s = config_summary(c, "runs/x/config.resolved.json");
  EXPECT_NE(s.find("gpt/debug"), std::string::npos) << s;
  EXPECT_NE(s.find("runs/x/config.resolved.json"), std::string::npos) << s;
  EXPECT_NE(s.find("model: block_size=64"), std::string::npos) << s;
  EXPECT_NE(s.find("learning_rate=0.001"), std::string::npos) << s;
  EXPECT_NE(s.find("order.kind=\"random\""), std::string::npos) << s;
  EXPECT_NE(s.find("ensemble=[1,2]"), std::string::npos) << s;
  for (const char* unchanged : {"batch_size", "beta1", "n_layer", "seed", "nan_policy", "description"})
    EXPECT_EQ(s.find(unchanged), std::string::npos) << unchanged << " is at its default:\n" << s;
  EXPECT_LE(std::count(s.begin(), s.end(), '\n'), 5) << s;
  // Defaults only: nothing listed.
  EXPECT_NE(config_summary(resolve_config(json::object(), {}), "f").find("(none)"), std::string::npos);
}

// Every leaf of configs/base.json outside `model` is read by one of the typed section parsers: a key that
// nothing reads is a knob that does nothing.
TEST(ConfigTypes, EveryDefaultKeyIsRead) {
  const json& base = base_config();
  KeysRead read;
  DataConfig::from_json(base, &read);
  TrainConfig::from_json(base, &read);
  EvalConfig::from_json(base, &read);
  SampleConfig::from_json(base, &read);
  SpeedConfig::from_json(base, &read);
  GenpplConfig::from_json(base, &read);
  PerfConfig::from_json(base, &read);
  std::vector<std::pair<std::string, json>> leaves;
  flatten_config(base, "", leaves);
  std::set<std::string> expected;
  for (const auto& [path, value] : leaves)
    if (path != "description" && path != "model" && path.rfind("model.", 0) != 0) expected.insert(path);
  const std::set<std::string> got(read.begin(), read.end());
  EXPECT_EQ(got.size(), read.size()) << "a key is read twice";
  for (const auto& k : expected) EXPECT_TRUE(got.count(k)) << "configs/base.json key '" << k << "' is read by nothing";
  for (const auto& k : got) EXPECT_TRUE(expected.count(k)) << "'" << k << "' is read but not in configs/base.json";
}

// The parsers return the defaults of base.json, and --set values land in the fields.
TEST(ConfigTypes, FieldsCarryTheResolvedValues) {
  json c = base_config();
  apply_set(c, "train.learning_rate=3e-4");
  apply_set(c, "train.order.kind=mixture");
  apply_set(c, "eval.first_token=score");
  apply_set(c, "sample.counts=bernoulli");
  apply_set(c, "speed.steps=[2,8]");
  const TrainConfig t = TrainConfig::from_json(c);
  EXPECT_DOUBLE_EQ(t.learning_rate, 3e-4);
  EXPECT_EQ(t.seed, 1337u);
  EXPECT_EQ(t.order.kind, OrderSpec::Kind::kMixture);
  EXPECT_DOUBLE_EQ(t.order.p_l2r, 0.1);
  EXPECT_FALSE(EvalConfig::from_json(c).skip_first);
  EXPECT_EQ(SampleConfig::from_json(c).counts, "bernoulli");
  EXPECT_EQ(SpeedConfig::from_json(c).steps, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(DataConfig::from_json(c).tokenizer, "gpt2");
  EXPECT_EQ(GenpplConfig::from_json(c).batch_size, 16);
}

// Enum and range errors name the key, as the path getters do.
TEST(ConfigTypes, ErrorsNameTheKey) {
  json c = base_config();
  c["train"]["nan_policy"] = "ignore";
  expect_config_error([&] { TrainConfig::from_json(c); }, {"train.nan_policy", "ignore", "stop or skip"});
  c = base_config();
  c["train"]["ddp_bucket_mb"] = 0;
  expect_config_error([&] { TrainConfig::from_json(c); }, {"train.ddp_bucket_mb", "out of range"});
  c = base_config();
  c["eval"]["mode"] = "beam";
  expect_config_error([&] { EvalConfig::from_json(c); }, {"eval.mode", "l2r, random, ensemble, elbo"});
  c = base_config();
  c["sample"]["schedule"] = "exp";
  expect_config_error([&] { SampleConfig::from_json(c); }, {"sample.schedule", "linear, cosine"});
  c = base_config();
  c["speed"]["repeats"] = 0;
  expect_config_error([&] { SpeedConfig::from_json(c); }, {"speed.repeats", "out of range"});
  c = base_config();
  c["genppl"]["batch_size"] = 0;
  expect_config_error([&] { GenpplConfig::from_json(c); }, {"genppl.batch_size"});
  c = base_config();
  c["train"]["order"] = {{"kind", "sideways"}};
  expect_config_error([&] { TrainConfig::from_json(c); }, {"train.order.kind", "sideways"});
}

// train.global_batch_size fixes the sequences per optimizer step over all ranks: each rank accumulates
// global / (batch_size × ranks) micro-batches; a count that does not divide, or both keys set, is refused.
TEST(ConfigTypes, GlobalBatchSizeSetsTheAccumulationPerNumberOfRanks) {
  json c = base_config();
  EXPECT_EQ(TrainConfig::from_json(c).accumulation_steps(4), 1);  // unset: the per-rank accumulation as given
  apply_set(c, "train.gradient_accumulation_steps=3");
  EXPECT_EQ(TrainConfig::from_json(c).accumulation_steps(8), 3);
  c = base_config();
  apply_set(c, "train.batch_size=16");
  apply_set(c, "train.global_batch_size=512");  // the paper's 0.5 M tokens at T = 1024
  const TrainConfig t = TrainConfig::from_json(c);
  EXPECT_EQ(t.accumulation_steps(1), 32);
  EXPECT_EQ(t.accumulation_steps(2), 16);
  EXPECT_EQ(t.accumulation_steps(16), 2);
  EXPECT_EQ(t.accumulation_steps(32), 1);
  expect_config_error([&] { t.accumulation_steps(3); },
                      {"train.global_batch_size", "512", "3 ranks", "16 × 3 = 48", "divides 32"});
  expect_config_error([&] { t.accumulation_steps(64); }, {"train.global_batch_size", "64 ranks"});
  apply_set(c, "train.gradient_accumulation_steps=2");
  expect_config_error([&] { TrainConfig::from_json(c); },
                      {"train.global_batch_size", "train.gradient_accumulation_steps", "set one"});
  c = base_config();
  apply_set(c, "train.batch_size=12");
  apply_set(c, "train.global_batch_size=512");
  expect_config_error([&] { TrainConfig::from_json(c); }, {"train.global_batch_size", "512", "train.batch_size", "12"});
}

}  // namespace
}  // namespace aobench

namespace aobench {
namespace {

// The perf section sets the speed switches; the environment variable of a switch overrides the config; every
// switch in effect is what results record.
TEST(PerfSwitches, TheConfigSetsThemAndTheEnvironmentOverrides) {
  const char* old = std::getenv("AOBENCH_FUSED_CE");
  const std::string saved = old ? old : "";
  ::unsetenv("AOBENCH_FUSED_CE");
  EnvSwitch fused_ce("AOBENCH_FUSED_CE");
  json c = base_config();
  apply_set(c, "perf.fused_ce=false");
  const PerfConfig off = PerfConfig::from_json(c);
  EXPECT_FALSE(off.fused_ce);
  EXPECT_TRUE(off.cuda_graphs);
  off.apply();
  EXPECT_FALSE(fused_ce.on());  // read again after the config changed
  EXPECT_NE(perf_switches_in_effect().find("fused_ce=0"), std::string::npos) << perf_switches_in_effect();
  EXPECT_NE(perf_switches_in_effect().find("cuda_graphs=1"), std::string::npos);
  ::setenv("AOBENCH_FUSED_CE", "1", 1);  // the environment wins over the config
  EXPECT_TRUE(env_switch_on("AOBENCH_FUSED_CE"));
  ::unsetenv("AOBENCH_FUSED_CE");
  PerfConfig().apply();
  EXPECT_TRUE(fused_ce.on());
  EXPECT_TRUE(PerfConfig::from_json(json::object()).fused_ce);  // a run saved before the section: all on
  EXPECT_THROW(set_perf_switch("fused_everything", false), ConfigError);
  if (old) ::setenv("AOBENCH_FUSED_CE", saved.c_str(), 1);
}

}  // namespace
}  // namespace aobench
