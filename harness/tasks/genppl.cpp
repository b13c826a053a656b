// Implements: `aobench genppl SAMPLES.jsonl --judge PATH [--run RUN_DIR]` (spec-ao-gpt §4.6):
// generative perplexity of `aobench sample` output under a GPT-2-family judge — a Hugging Face folder
// (config.json + model.safetensors, loaded by the gpt plugin's model.init_from_hf; GPT-2 Large in the paper)
// or an aobench `gpt` run. Per sample: exp(mean NLL of tokens 1…L−1 given their prefix), the first token
// unscored, float32, no BOS, EOS scored like any token. Reported per protocol (steps, top-p, temperature):
// mean ± stderr of the per-sample perplexities (the paper's number), the corpus-level perplexity
// exp(Σ nats / Σ tokens) and the mean unigram entropy of the samples (low = degenerate repetition).
// With --run the numbers are merged into RUN_DIR/results.json as "gen_p<top_p>_t<T>_s<steps>/genppl",
// "…/genppl_corpus" and "…/entropy". Samples that complete a prompt ("given" positions) form groups of their own,
// "gen_prompted_p…_t…_s…", scored on their generated tokens only (the prompt is context), which no verdict reads.
// Samples and judge must share a tokenizer (the samples' "tokenizer" field against the judge's).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <tuple>

#include "core/config.h"
#include "core/config_types.h"
#include "core/device.h"
#include "core/env_info.h"
#include "core/errors.h"
#include "core/plugin_api.h"
#include "harness/cli.h"
#include "harness/tasks.h"
#include "harness/tasks/judge.h"
#include "metrics/generation.h"
#include "reports/results.h"

namespace aobench {
namespace fs = std::filesystem;

namespace {

struct Group {
  std::vector<std::vector<int64_t>> samples;
  std::vector<std::vector<int64_t>> given;  // per sample: the positions its prompt fixed (empty: none)
  std::set<std::string> runs;
};

// A sample's protocol: steps, top-p, temperature, and whether it completes a prompt.
using GroupKey = std::tuple<int64_t, double, double, bool>;

}  // namespace

std::string GenpplTask::command_line() const {
  std::string line = samples + " --judge " + judge;
  if (!run_dir.empty()) line += " --run " + run_dir;
  line += overrides.command_line();
  return line;
}

void run_genppl(const GenpplTask& task) {
  const nlohmann::json config = generation_config(base_config(), task.overrides, {"genppl", "perf"}, "genppl");
  PerfConfig::from_json(config).apply();
  const GenpplConfig genppl = GenpplConfig::from_json(config);
  const int64_t batch_size = genppl.batch_size;
  const torch::Device device = select_device(genppl.device, "genppl.device");
  const std::string& samples_path = task.samples;
  if (!task.run_dir.empty() && !fs::exists(fs::path(task.run_dir) / "config.resolved.json"))
    throw ConfigError("--run '" + task.run_dir + "' is not a run directory (no config.resolved.json)",
                      "pass the run the samples came from, or leave --run out to print only");

  // Samples grouped by protocol (steps, top-p, temperature), in file order inside each group.
  std::ifstream in(samples_path);
  if (!in) throw DataError("cannot open samples file '" + samples_path + "'", "write it with `aobench sample`");
  std::map<GroupKey, Group> groups;
  std::map<std::string, int64_t> tokenizers;  // the samples' "tokenizer" field → first line naming it
  int64_t line_no = 0, n = 0;
  std::vector<std::pair<int64_t, int64_t>> id_lines;  // (max id, line) to check against the judge's vocab
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "'" + samples_path + "' line " + std::to_string(line_no);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("ids") || !j["ids"].is_array())
      throw DataError(where + " is not a sample record with an \"ids\" list", "genppl reads `aobench sample` output");
    for (const char* k : {"steps", "top_p", "temperature"})
      if (!j.contains(k) || !j[k].is_number())
        throw DataError(where + " lacks the number \"" + std::string(k) + "\"",
                        "genppl reads `aobench sample` output, which records the protocol");
    std::vector<int64_t> ids;
    int64_t max_id = 0;
    for (const auto& v : j["ids"]) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0)
        throw DataError(where + ": id " + v.dump() + " is not a token id", "ids are integers ≥ 0");
      ids.push_back(v.get<int64_t>());
      max_id = std::max(max_id, ids.back());
    }
    if (ids.size() < 2) throw DataError(where + " has fewer than 2 tokens: nothing to score (the first is unscored)");
    id_lines.emplace_back(max_id, line_no);
    // "given": the positions a prompt fixed. A prompted sample written before they were recorded cannot be
    // scored honestly (its prompt would count as generated text).
    std::vector<int64_t> given;
    if (j.contains("given")) {
      if (!j["given"].is_array())
        throw DataError(where + ": \"given\" must be a list of positions", "genppl reads `aobench sample` output");
      for (const auto& v : j["given"]) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= static_cast<int64_t>(ids.size()))
          throw DataError(where + ": given position " + v.dump() + " is not a position of its " +
                              std::to_string(ids.size()) + " ids",
                          "genppl reads `aobench sample` output");
        given.push_back(v.get<int64_t>());
      }
    } else if (j.contains("prompt_line") && !j["prompt_line"].is_null()) {
      throw DataError(where + " completes a prompt but does not say which positions it fixed (no \"given\")",
                      "sample it again with this aobench: prompt tokens must not be scored as generated text");
    }
    if (j.contains("tokenizer")) {
      if (!j["tokenizer"].is_string())
        throw DataError(where + ": \"tokenizer\" must be a name", "genppl reads `aobench sample` output");
      tokenizers.emplace(j["tokenizer"].get<std::string>(), line_no);
    }
    const bool prompted = !given.empty();
    Group& g = groups[{j["steps"].get<int64_t>(), j["top_p"].get<double>(), j["temperature"].get<double>(), prompted}];
    if (prompted && static_cast<int64_t>(given.size()) + 1 >= static_cast<int64_t>(ids.size()))
      throw DataError(where + ": its prompt fixes " + std::to_string(given.size()) + " of " +
                          std::to_string(ids.size()) + " positions: at most one generated token, nothing to judge",
                      "sample with a shorter prompt or a longer sample.length");
    g.samples.push_back(std::move(ids));
    g.given.push_back(std::move(given));
    if (j.contains("run") && j["run"].is_string()) g.runs.insert(j["run"].get<std::string>());
    ++n;
  }
  if (n == 0) throw DataError("samples file '" + samples_path + "' holds no sample", "write it with `aobench sample`");

  Judge judge = load_judge(task.judge, device, "--judge");
  ModelPlugin& model = *judge.model;
  for (const auto& [name, line] : tokenizers)
    if (name != judge.tokenizer)
      throw DataError("'" + samples_path + "' line " + std::to_string(line) + " holds '" + name +
                          "' tokens but the judge " + judge.description + " reads '" + judge.tokenizer + "' tokens",
                      "judge samples with a model of their tokenizer (GPT-2 BPE samples: a GPT-2 judge)");
  for (const auto& [max_id, line] : id_lines)
    if (max_id >= model.vocab_size())
      throw DataError("'" + samples_path + "' line " + std::to_string(line) + ": id " + std::to_string(max_id) +
                          " is outside the judge's vocabulary [0, " + std::to_string(model.vocab_size()) + ")",
                      "the samples and the judge must share a tokenizer (GPT-2 BPE for GPT-2 judges)");
  for (const auto& [key, g] : groups)
    for (const auto& s : g.samples)
      if (static_cast<int64_t>(s.size()) > model.block_size())
        throw DataError("'" + samples_path + "' has a " + std::to_string(s.size()) +
                            "-token sample, longer than the "
                            "judge's context " +
                            std::to_string(model.block_size()),
                        "sample at most the judge's context (sample.length)");
  std::cout << "genppl: " << n << " sample(s) from " << samples_path << ", judge " << judge.description << " on "
            << device.str() << " (float32)\n";
  std::printf("%-30s %6s %16s %12s %16s %8s\n", "protocol", "n", "ppl (mean ± se)", "corpus ppl", "entropy", "tokens");

  RunResults run;
  for (const auto& [key, g] : groups) {
    const auto& [steps, top_p, temperature, prompted] = key;
    const auto summary = summarize_scores(score_samples(model, g.samples, batch_size, device, g.given));
    const std::string name =
        prompted ? genppl_prompted_dataset(steps, top_p, temperature) : genppl_dataset(steps, top_p, temperature);
    std::printf("%-30s %6zu %9.3f ± %-5.3f %12.3f %9.4f ± %-5.3f %8lld\n", name.c_str(), g.samples.size(),
                summary.ppl.mean, summary.ppl.stderr_, summary.corpus_ppl, summary.entropy.mean,
                summary.entropy.stderr_, static_cast<long long>(summary.tokens));
    char protocol[512];
    std::snprintf(protocol, sizeof(protocol),
                  "judge %s; %zu %ssamples of %zu tokens; %lld steps, top-p %g, temperature %g; first token "
                  "unscored%s, float32, no BOS; ppl = mean ± stderr of per-sample exp(mean NLL), corpus = exp(Σ nats / "
                  "Σ tokens), entropy = mean unigram entropy of a sample (nats)",
                  judge.description.c_str(), g.samples.size(), prompted ? "prompted " : "", g.samples.front().size(),
                  static_cast<long long>(steps), top_p, temperature,
                  prompted ? ", the prompt's tokens are context, not scored" : "");
    const int64_t count = static_cast<int64_t>(g.samples.size());
    auto params = [&](const char* family) {  // the protocol as fields; `name` stays the key
      MetricParams p;
      p.family = family;
      p.steps = steps, p.top_p = top_p, p.temperature = temperature, p.prompted = prompted;
      return p;
    };
    run.metrics[name + "/genppl"] = {summary.ppl.mean, summary.ppl.stderr_, summary.ppl.n, false, false,
                                     protocol,         params("genppl")};
    run.metrics[name + "/genppl_corpus"] = {summary.corpus_ppl, std::nullopt,           count, false, false,
                                            protocol,           params("genppl_corpus")};
    run.metrics[name + "/entropy"] = {summary.entropy.mean, summary.entropy.stderr_, count, false, true, protocol,
                                      params("entropy")};
  }
  if (!task.run_dir.empty()) {
    const std::string& run_dir = task.run_dir;
    const std::string out = (fs::path(run_dir) / "results.json").string();
    for (const auto& [key, g] : groups)
      for (const auto& r : g.runs)
        if (r != run_name(run_dir))
          std::cerr << "warning: the samples say they come from run '" << r << "', recorded into '" << run_dir << "'\n";
    Results results;
    if (fs::exists(out)) results = Results::load(out);
    Results mine;  // the context of an earlier eval stays: the judge's device says little about the run
    if (results.context.empty()) mine.context = env_info(device.str(), "float32");
    mine.runs[run_name(run_dir)] = run;
    results.merge(mine);
    results.save(out);
    std::cout << "results: " << out << "\n";
  }
}

}  // namespace aobench
