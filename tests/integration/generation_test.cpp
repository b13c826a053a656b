// Implements: generation end to end through the aobench binary on CPU: `aobench sample` for a decoder, an
// any-order decoder and a diffusion encoder (JSONL fields, seeds, prompts, infilling, never overwriting),
// `aobench genppl` (a judge on its own near-greedy text matches `aobench eval` on the same ids; Hugging Face
// and run judges), `aobench speed` (results that `aobench compare` and `aobench report` read), the
// generation stages of `aobench run`, and hostile inputs (a prompt longer than the block, ids out of
// vocabulary, empty JSONL files, a judge folder whose config.json disagrees with its weights).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "datasets/token_file.h"
#include "harness/registry.h"
#include "reports/results.h"
#include "tests/test_util.h"

namespace aobench {
namespace {
namespace fs = std::filesystem;
using aobench::testing::TempDir;
using nlohmann::json;

int run(const std::vector<std::string>& args, std::string* out) {
  return aobench::testing::run_aobench_child(args, out);
}

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(json::parse(line));
  return lines;
}

// A clean error: non-zero exit, "error:", a hint, and every listed name in the message.
int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t pos = text.find(part); pos != std::string::npos; pos = text.find(part, pos + 1)) ++n;
  return n;
}

void expect_error(int rc, const std::string& out, const std::vector<std::string>& names) {
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("error: "), std::string::npos) << out;
  EXPECT_NE(out.find("HINT: "), std::string::npos) << out;
  for (const auto& n : names) EXPECT_NE(out.find(n), std::string::npos) << "no '" << n << "' in:\n" << out;
  for (const char* crash : {"terminate called", "Segmentation", "Aborted"})
    EXPECT_EQ(out.find(crash), std::string::npos) << out;
}

// Debug models shrunk to a 32-token block, trained a few steps on a byte corpus, once for the suite.
class GenerationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    std::vector<uint32_t> corpus(6000);
    uint32_t x = 11;
    for (auto& t : corpus) t = 97 + ((x = x * 1103515245u + 12345u) >> 16) % 8;  // 8 letters
    write_token_file(dir_->file("train.bin"), corpus, 257);
    for (const char* plugin : {"gpt", "ao_gpt", "sedd"}) {
      std::string out;
      const int rc = run({"train", "--config", write(std::string(plugin) + ".json", experiment(plugin).dump(2))}, &out);
      ASSERT_EQ(rc, 0) << out;
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  static json experiment(const std::string& plugin) {
    const json defaults = flavour_defaults(plugin, "debug");
    json model = {{"plugin", plugin}, {"flavour", "debug"}};
    for (const auto& [k, v] : std::map<std::string, int64_t>{{"block_size", 32}, {"n_layer", 1}, {"n_embd", 32}})
      if (defaults.contains(k)) model[k] = v;
    return {{"model", model},
            {"data", {{"train", dir_->file("train.bin")}, {"tokenizer", "bytes"}}},
            {"train",
             {{"out_dir", run_dir(plugin)},
              {"device", "cpu"},
              {"batch_size", 4},
              {"max_iters", 30},
              {"learning_rate", 3e-3},
              {"warmup_iters", 1},
              {"lr_decay_iters", 30},
              {"log_interval", 10},
              {"eval_interval", 0},
              {"checkpoint_interval", 0}}}};
  }
  static std::string run_dir(const std::string& plugin) { return dir_->file("run_" + plugin); }
  static std::string write(const std::string& name, const std::string& text) {
    aobench::testing::write_text(dir_->file(name), text);
    return dir_->file(name);
  }

  static TempDir* dir_;
};
TempDir* GenerationTest::dir_ = nullptr;

TEST_F(GenerationTest, SampleWritesOneRecordPerSampleForEveryParadigm) {
  for (const char* plugin : {"gpt", "ao_gpt", "sedd"}) {
    const std::string f = dir_->file(std::string("s_") + plugin + ".jsonl");
    std::vector<std::string> args = {"sample",
                                     "--run",
                                     run_dir(plugin),
                                     "--out",
                                     f,
                                     "--set",
                                     "sample.num_samples=3",
                                     "--set",
                                     "sample.batch_size=2",
                                     "--set",
                                     "sample.length=32",
                                     "--set",
                                     "sample.steps=8",
                                     "--set",
                                     "sample.top_p=0.9",
                                     "--set",
                                     "sample.temperature=0.8"};
    std::string out;
    ASSERT_EQ(run(args, &out), 0) << out;
    EXPECT_NE(out.find("sample: 3/3"), std::string::npos) << out;  // progress on stderr
    const auto lines = read_jsonl(f);
    ASSERT_EQ(lines.size(), 3u) << plugin;
    for (size_t i = 0; i < lines.size(); ++i) {
      const json& j = lines[i];
      ASSERT_EQ(j["ids"].size(), 32u);
      for (const auto& id : j["ids"]) EXPECT_TRUE(id.get<int64_t>() >= 0 && id.get<int64_t>() < 257);
      EXPECT_TRUE(j["text"].is_string());
      EXPECT_EQ(j["seed"].get<int64_t>(), 4234 + static_cast<int64_t>(i / 2)) << "batch i uses seed + i";
      EXPECT_EQ(j["steps"], 8);
      EXPECT_DOUBLE_EQ(j["top_p"].get<double>(), 0.9);
      EXPECT_DOUBLE_EQ(j["temperature"].get<double>(), 0.8);
      EXPECT_GE(j["network_calls"].get<int64_t>(), 1);
      EXPECT_EQ(j["plugin"], plugin);
      EXPECT_EQ(j["settings"]["counts"], "deterministic");
      EXPECT_EQ(j.contains("order"), std::string(plugin) == "ao_gpt");
      if (j.contains("order")) {
        std::set<int64_t> pos(j["order"].begin(), j["order"].end());
        EXPECT_EQ(pos.size(), 32u);
        EXPECT_EQ(j["network_calls"], 8);
      }
    }
    // The same command never overwrites; another file with the same seed holds the same samples.
    expect_error(run(args, &out), out, {f, "never overwrites"});
    args[4] = dir_->file(std::string("s2_") + plugin + ".jsonl");
    ASSERT_EQ(run(args, &out), 0) << out;
    const auto again = read_jsonl(args[4]);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(again[i]["ids"], lines[i]["ids"]) << plugin;
  }
  // Lemma 1's Bernoulli counts for the any-order sampler: fewer or equal network calls than steps.
  std::string out;
  const std::string f = dir_->file("s_bern.jsonl");
  ASSERT_EQ(run({"sample", "--run", run_dir("ao_gpt"), "--out", f, "--set", "sample.num_samples=2", "--set",
                 "sample.length=32", "--set", "sample.steps=8", "--set", "sample.counts=bernoulli"},
                &out),
            0)
      << out;
  for (const auto& j : read_jsonl(f)) EXPECT_EQ(j["settings"]["counts"], "bernoulli");
  expect_error(run({"sample", "--run", run_dir("ao_gpt"), "--set", "sample.counts=binomial"}, &out), out,
               {"sample.counts", "binomial"});
  expect_error(run({"sample", "--run", run_dir("ao_gpt"), "--set", "train.max_iters=3"}, &out), out,
               {"train.max_iters", "sample.*"});
}

TEST_F(GenerationTest, PromptsPrefixForEveryPluginInfillForAnyOrderAndDiffusion) {
  const std::string prefix = write("prefix.jsonl", "{\"text\": \"abc\"}\n\n{\"ids\": [100, 101, -1, null]}\n");
  const std::string infill = write("infill.jsonl", "{\"ids\": [-1, 65, null, 66]}\n");
  for (const char* plugin : {"gpt", "ao_gpt", "sedd"}) {
    std::string out;
    const std::string f = dir_->file(std::string("p_") + plugin + ".jsonl");
    ASSERT_EQ(run({"sample", "--run", run_dir(plugin), "--prompt-file", prefix, "--out", f, "--set",
                   "sample.num_samples=2", "--set", "sample.length=16", "--set", "sample.steps=4"},
                  &out),
              0)
        << out;
    const auto lines = read_jsonl(f);
    ASSERT_EQ(lines.size(), 4u);  // 2 per prompt line
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(lines[i]["prompt_line"], 1);
      EXPECT_EQ(lines[i]["text"].get<std::string>().substr(0, 3), "abc");
      EXPECT_EQ(lines[2 + i]["prompt_line"], 3);
      EXPECT_EQ(lines[2 + i]["ids"][0], 100);
      EXPECT_EQ(lines[2 + i]["ids"][1], 101);
      EXPECT_EQ(lines[i]["given"], json({0, 1, 2}));  // "abc": three bytes
      EXPECT_EQ(lines[2 + i]["given"], json({0, 1}));
      EXPECT_EQ(lines[i]["tokenizer"], "bytes");
    }
    if (std::string(plugin) == "gpt") {
      // genppl of prompted samples: a key of their own, only the generated tokens scored.
      const std::string judged = dir_->file("gpt_prompted_judged");
      fs::copy(run_dir("gpt"), judged, fs::copy_options::recursive);
      ASSERT_EQ(run({"genppl", f, "--judge", run_dir("gpt"), "--run", judged}, &out), 0) << out;
      const Results r = Results::load(judged + "/results.json");
      const auto& m = r.runs.at("gpt_prompted_judged").metrics;
      EXPECT_FALSE(m.count("gen_p1_t1_s4/genppl")) << out;  // no unconditional key for prompted samples
      ASSERT_TRUE(m.count("gen_prompted_p1_t1_s4/genppl")) << out;
      EXPECT_TRUE(m.at("gen_prompted_p1_t1_s4/genppl").params.prompted);
      EXPECT_NE(m.at("gen_prompted_p1_t1_s4/genppl").protocol.find("prompt's tokens are context"), std::string::npos);
      // Scored: positions 1..15 minus the given ones: 15 − 2 ("abc") and 15 − 1 (100, 101), two samples each.
      EXPECT_NE(out.find("gen_prompted_p1_t1_s4"), std::string::npos) << out;
      EXPECT_NE(out.find(" 54\n"), std::string::npos) << out;  // 2 × 13 + 2 × 14 tokens
      // A prompted sample that does not say which positions it fixed is refused, not scored whole.
      json line = lines[0];
      line.erase("given");
      const std::string old = write("old_prompted.jsonl", line.dump() + "\n");
      expect_error(run({"genppl", old, "--judge", run_dir("gpt")}, &out), out, {old, "line 1", "\"given\""});
      // The report shows a few samples per file, the prompt marked; --print shows them on the terminal.
      fs::create_directories(judged + "/samples");
      fs::copy_file(f, judged + "/samples/prompted.jsonl");
      ASSERT_EQ(run({"report", judged}, &out), 0) << out;
      const std::string html = aobench::testing::read_text(judged + "/report/index.html");
      EXPECT_NE(html.find("<h2>Samples</h2>"), std::string::npos);
      EXPECT_EQ(count(html, "<pre class=sample><mark>abc</mark>"), 2) << html;  // 3 shown of 4: 2 + 1
      EXPECT_EQ(count(html, "<pre class=sample>"), 3) << html;
      ASSERT_EQ(run({"sample", "--run", run_dir("gpt"), "--prompt-file", prefix, "--out", dir_->file("printed.jsonl"),
                     "--set", "sample.num_samples=1", "--set", "sample.length=16", "--print"},
                    &out),
                0)
          << out;
      EXPECT_NE(out.find("--- sample 0 (seed "), std::string::npos) << out;
      EXPECT_NE(out.find("«abc»"), std::string::npos) << out;
      EXPECT_EQ(out.find('\x1b'), std::string::npos) << "no raw escape character reaches the terminal";
    }
    const std::string g = dir_->file(std::string("i_") + plugin + ".jsonl");
    const int rc = run({"sample", "--run", run_dir(plugin), "--prompt-file", infill, "--out", g, "--set",
                        "sample.num_samples=2", "--set", "sample.length=16", "--set", "sample.steps=4"},
                       &out);
    if (std::string(plugin) == "gpt") {
      expect_error(rc, out, {infill, "line 1", "infilling"});
      EXPECT_FALSE(fs::exists(g));
      continue;
    }
    ASSERT_EQ(rc, 0) << out;
    for (const auto& j : read_jsonl(g)) {
      EXPECT_EQ(j["ids"][1], 65);
      EXPECT_EQ(j["ids"][3], 66);
    }
  }
}

TEST_F(GenerationTest, HostilePromptsAndSamples) {
  std::string out;
  std::string forty = "97";
  for (int i = 1; i < 40; ++i) forty += ",97";
  const std::string longp = write("long.jsonl", "{\"ids\": [" + forty + "]}\n");
  expect_error(run({"sample", "--run", run_dir("ao_gpt"), "--prompt-file", longp, "--set", "sample.length=32"}, &out),
               out, {longp, "line 1", "40 tokens", "sample.length = 32"});
  const std::string vocab = write("vocab.jsonl", "{\"ids\": [1, 300]}\n");
  expect_error(run({"sample", "--run", run_dir("ao_gpt"), "--prompt-file", vocab, "--set", "sample.length=32"}, &out),
               out, {vocab, "line 1", "300", "[0, 257)"});
  const std::string empty = write("empty.jsonl", "\n");
  expect_error(run({"sample", "--run", run_dir("ao_gpt"), "--prompt-file", empty, "--set", "sample.length=32"}, &out),
               out, {empty, "no prompt"});
  const std::string bad = write("bad.jsonl", "{\"ids\": [1]}\n{\"idz\": [1]}\n");
  expect_error(run({"sample", "--run", run_dir("ao_gpt"), "--prompt-file", bad, "--set", "sample.length=32"}, &out),
               out, {bad, "line 2", "\"ids\""});
  expect_error(run({"sample", "--run", run_dir("ao_gpt"), "--set", "sample.length=64"}, &out), out,
               {"sample.length = 64", "block_size 32"});
  expect_error(run({"sample", "--run", run_dir("ao_gpt"), "--set", "sample.temperature=0"}, &out), out,
               {"sample.temperature"});
  // genppl: an empty file, ids the judge does not know, a judge that is not a gpt run.
  expect_error(run({"genppl", empty, "--judge", run_dir("gpt")}, &out), out, {empty, "no sample"});
  const std::string big = write("big.jsonl",
                                "{\"ids\": [1, 2, 3], \"steps\": 4, \"top_p\": 1, \"temperature\": 1}\n"
                                "{\"ids\": [1, 400, 3], \"steps\": 4, \"top_p\": 1, \"temperature\": 1}\n");
  expect_error(run({"genppl", big, "--judge", run_dir("gpt")}, &out), out, {big, "line 2", "400", "[0, 257)"});
  const std::string ok = write("ok.jsonl", "{\"ids\": [1, 2, 3], \"steps\": 4, \"top_p\": 1, \"temperature\": 1}\n");
  expect_error(run({"genppl", ok, "--judge", run_dir("ao_gpt")}, &out), out, {"ao_gpt run", "gpt"});
  expect_error(run({"genppl", ok, "--judge", dir_->file("nowhere")}, &out), out, {"nowhere", "config.json"});
}

TEST_F(GenerationTest, GenPplOfAJudgeOnItsOwnGreedyTextMatchesEval) {
  std::string out;
  const std::string f = dir_->file("greedy.jsonl");
  ASSERT_EQ(run({"sample", "--run", run_dir("gpt"), "--out", f, "--set", "sample.num_samples=4", "--set",
                 "sample.batch_size=4", "--set", "sample.length=32", "--set", "sample.temperature=1e-6"},
                &out),
            0)
      << out;
  std::vector<uint32_t> ids;
  for (const auto& j : read_jsonl(f))
    for (const auto& id : j["ids"]) ids.push_back(id.get<uint32_t>());
  ASSERT_EQ(ids.size(), 128u);
  write_token_file(dir_->file("greedy.bin"), ids, 257, 32);
  const std::string eval_out = dir_->file("eval_results.json");
  ASSERT_EQ(run({"eval", "--run", run_dir("gpt"), "--data", "g=" + dir_->file("greedy.bin"), "--out", eval_out}, &out),
            0)
      << out;
  const Results ev = Results::load(eval_out);
  const double eval_ppl = ev.runs.begin()->second.metrics.at("g/ppl").value;

  // Record into a copy of the run, so the eval file above stays the only other result.
  const std::string judged = dir_->file("gpt_judged");
  fs::copy(run_dir("gpt"), judged, fs::copy_options::recursive);
  ASSERT_EQ(run({"genppl", f, "--judge", run_dir("gpt"), "--run", judged}, &out), 0) << out;
  const Results gp = Results::load(judged + "/results.json");
  const auto& m = gp.runs.at("gpt_judged").metrics;
  const std::string key = "gen_p1_t1e-06_s256";
  ASSERT_TRUE(m.count(key + "/genppl_corpus")) << out;
  EXPECT_NEAR(m.at(key + "/genppl_corpus").value, eval_ppl, 1e-6 * eval_ppl);
  EXPECT_EQ(m.at(key + "/genppl").n, 4);
  EXPECT_GE(m.at(key + "/genppl").value, m.at(key + "/genppl_corpus").value * (1 - 1e-9))
      << "mean of exp ≥ exp of mean (Jensen)";
  EXPECT_GT(m.at(key + "/entropy").value, 0.0);
  EXPECT_NE(m.at(key + "/genppl").protocol.find("first token unscored"), std::string::npos);
}

TEST_F(GenerationTest, GenPplWithAHuggingFaceJudgeAndAMismatchedConfig) {
  std::string out;
  std::string f = dir_->file("hf_samples.jsonl");
  ASSERT_EQ(run({"sample", "--run", run_dir("ao_gpt"), "--out", f, "--set", "sample.num_samples=2", "--set",
                 "sample.length=32", "--set", "sample.steps=16"},
                &out),
            0)
      << out;
  const std::string hf = std::string(AOBENCH_TEST_DATA) + "/hf_tiny_gpt2";
  // The run's samples are bytes; a GPT-2 judge reads BPE ids: ids below its vocabulary still mean other text.
  expect_error(run({"genppl", f, "--judge", hf}, &out), out, {f, "'bytes' tokens", "'gpt2' tokens"});
  // The same ids declared as GPT-2 tokens: the Hugging Face judge path itself.
  std::string relabelled;
  for (auto j : read_jsonl(f)) {
    j["tokenizer"] = "gpt2";
    relabelled += j.dump() + "\n";
  }
  f = write("hf_samples_gpt2.jsonl", relabelled);
  ASSERT_EQ(run({"genppl", f, "--judge", hf}, &out), 0) << out;
  EXPECT_NE(out.find("gen_p1_t1_s16"), std::string::npos) << out;
  EXPECT_NE(out.find("Hugging Face hf_tiny_gpt2"), std::string::npos) << out;
  const std::string broken = dir_->file("hf_broken");
  fs::copy(hf, broken);
  json cfg = json::parse(aobench::testing::read_text(hf + "/config.json"));
  cfg["n_layer"] = 3;
  aobench::testing::write_text(broken + "/config.json", cfg.dump());
  expect_error(run({"genppl", f, "--judge", broken}, &out), out, {"model.safetensors"});
  fs::remove(broken + "/model.safetensors");
  expect_error(run({"genppl", f, "--judge", broken}, &out), out, {broken, "no model.safetensors"});
}

TEST_F(GenerationTest, SpeedResultsCompareAndPlot) {
  std::string out;
  const std::string f = dir_->file("speed.json");
  const std::vector<std::string> sets = {"--set", "speed.steps=[2,8]", "--set", "speed.batch_size=2",
                                         "--set", "speed.length=16",   "--set", "speed.repeats=2",
                                         "--set", "speed.warmup=1"};
  std::vector<std::string> args = {
      "speed", "--set", "model.plugin=ao_gpt", "--set", "model.flavour=debug", "--set", "train.device=cpu", "--out", f};
  args.insert(args.end(), sets.begin(), sets.end());
  ASSERT_EQ(run(args, &out), 0) << out;
  const Results r = Results::load(f);
  const auto& m = r.runs.at("ao_gpt_debug").metrics;
  for (const char* k : {"speed_s2/gen_s", "speed_s8/gen_s"}) {
    ASSERT_TRUE(m.count(k)) << out;
    EXPECT_GT(m.at(k).value, 0.0);
    EXPECT_EQ(m.at(k).n, 2);
  }
  EXPECT_NE(m.at("speed_s8/gen_s").protocol.find("8 network calls"), std::string::npos);
  EXPECT_TRUE(m.at("speed_s8/gen_tok_s").higher_is_better);
  // Timings are gated only when named: alone in the file, the default gate has nothing to compare.
  EXPECT_EQ(run({"compare", f, f, "--metrics", "gen_s,gen_tok_s"}, &out), 0) << out;
  EXPECT_NE(out.find("PASS: 0 of 4 metric(s) worse"), std::string::npos) << out;
  expect_error(run({"compare", f, f}, &out), out, {"no quality metric", "timing metrics are compared only when"});
  expect_error(run({"speed", "--set", "speed.batch_size=2"}, &out), out, {"model.plugin"});
  expect_error(run({"speed", "--set", "model.plugin=ao_gpt", "--set", "model.flavour=debug", "--set",
                    "train.device=cpu", "--set", "speed.length=4096"},
                   &out),
               out, {"speed.length = 4096"});
  // A run: merged into its results.json; the report plots seconds against steps.
  const std::string timed = dir_->file("sedd_timed");
  fs::copy(run_dir("sedd"), timed, fs::copy_options::recursive);
  args = {"speed", "--run", timed};
  args.insert(args.end(), sets.begin(), sets.end());
  ASSERT_EQ(run(args, &out), 0) << out;
  ASSERT_EQ(run({"report", timed}, &out), 0) << out;
  EXPECT_TRUE(fs::exists(timed + "/report/gen_speed.gp")) << out;
  EXPECT_NE(aobench::testing::read_text(timed + "/report/summary.md").find("speed_s2"), std::string::npos)
      << aobench::testing::read_text(timed + "/report/summary.md");
}

TEST_F(GenerationTest, RunDrivesSampleGenPplAndSpeedStages) {
  json exp = {{"out_dir", dir_->file("exp")},
              {"jobs", json::array({{{"name", "gpt"}, {"config", experiment("gpt")}}})},
              {"generation",
               {{"judge", "gpt"},
                {"sample", {{"num_samples", 2}, {"batch_size", 2}, {"length", 16}}},
                {"settings", json::array({{{"steps", 4}}, {{"steps", 8}, {"top_p", 0.95}, {"temperature", 0.7}}})},
                {"speed",
                 {{"steps", json::array({4})},
                  {"batch_size", 1},
                  {"length", 16},
                  {"repeats", 1},
                  {"warmup", 0},
                  {"sample", {{"top_p", 0.95}}}}}}}};
  exp["jobs"][0]["config"]["train"]["max_iters"] = 2;
  exp["jobs"][0]["config"]["train"].erase("out_dir");
  const std::string path = write("exp.json", exp.dump(2));
  std::string out;
  ASSERT_EQ(run({"run", path}, &out), 0) << out;
  const Results r = Results::load(dir_->file("exp") + "/gpt/results.json");
  const auto& m = r.runs.at("gpt").metrics;
  for (const char* k : {"gen_p1_t1_s4/genppl", "gen_p0.95_t0.7_s8/genppl", "gen_p1_t1_s4/entropy", "speed_s4/gen_s"})
    EXPECT_TRUE(m.count(k)) << k << "\n" << out;
  // What each stage measured, as fields; the log names the command that repeats each stage.
  EXPECT_EQ(m.at("gen_p0.95_t0.7_s8/genppl").params.to_json(),
            (json{{"family", "genppl"}, {"steps", 8}, {"top_p", 0.95}, {"temperature", 0.7}}));
  EXPECT_EQ(m.at("speed_s4/gen_s").params.to_json(), (json{{"family", "gen_s"}, {"steps", 4}}));
  EXPECT_NE(out.find("run: aobench sample --run " + dir_->file("exp") + "/gpt --out "), std::string::npos) << out;
  EXPECT_NE(out.find("run: aobench genppl "), std::string::npos) << out;
  EXPECT_NE(out.find("run: aobench speed --run " + dir_->file("exp") + "/gpt --set speed."), std::string::npos) << out;
  const std::string md = aobench::testing::read_text(dir_->file("exp") + "/report/summary.md");
  EXPECT_NE(md.find("## genppl"), std::string::npos) << md;
  // Finished stages are skipped on a second run.
  ASSERT_EQ(run({"run", path}, &out), 0) << out;
  EXPECT_NE(out.find("sample+genppl"), std::string::npos);
  EXPECT_NE(out.find("done earlier, skipped"), std::string::npos) << out;
  EXPECT_EQ(out.find("run: aobench sample"), std::string::npos) << out;
  // A typo in the generation section fails before any work.
  exp["generation"]["settings"][0]["stepz"] = 4;
  expect_error(run({"run", write("typo.json", exp.dump(2))}, &out), out, {"sample.stepz"});
}

}  // namespace
}  // namespace aobench
