// Implements: `aobench sample` (spec-ao-gpt §4): samples of a trained run through its plugin's
// sample(), written as JSONL, one line per sample: ids, decoded text (the run's tokenizer), the generation
// order (any-order plugins), the batch seed, steps, temperature, top-p, network calls and the settings.
// Knobs are the sample.* keys (metrics/generation.h); prompts come from a JSONL file (prefix prompts for
// every plugin, infilling for any-order and diffusion plugins). EMA weights are used when present
// (sample.ema), as in eval. The file is written atomically once every sample exists, never over another.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "core/config.h"
#include "core/config_types.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/plugin_api.h"
#include "core/safetensors.h"
#include "datasets/tokenizer.h"
#include "harness/cli.h"
#include "harness/tasks.h"
#include "harness/train/checkpoint.h"
#include "metrics/generation.h"

namespace aobench {
namespace fs = std::filesystem;

namespace {

// One progress line on stderr per batch (rewritten in place on a terminal).
struct Progress {
  std::string what;
  int64_t total;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  bool tty = isatty(STDERR_FILENO) != 0;
  void update(int64_t done) const {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "%s%s: %lld/%lld, %.1f s, %.2f/s%s", tty ? "\r" : "", what.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total), s, s > 0 ? done / s : 0.0,
                 tty && done < total ? "" : "\n");
    std::fflush(stderr);
  }
};

}  // namespace

std::string SampleTask::command_line() const {
  std::string line = "--run " + run_dir;
  if (!checkpoint.empty()) line += " --checkpoint " + checkpoint;
  if (!out.empty()) line += " --out " + out;
  line += overrides.command_line();
  return line + (prompt_file.empty() ? "" : " --prompt-file " + prompt_file) + (print ? " --print" : "");
}

void run_sample(const SampleTask& task) {
  const CoutToStderr data_on_stdout(task.out == "-");
  const std::string& run_dir = task.run_dir;

  // Options are validated before the model loads, so a typo fails in milliseconds.
  const fs::path saved_path = fs::path(run_dir) / "config.resolved.json";
  if (!fs::exists(saved_path))
    throw ConfigError("'" + run_dir + "' is not a run directory (no config.resolved.json)",
                      "pass the out_dir of a finished `aobench train` / `aobench run` job");
  const nlohmann::json saved =
      generation_config(load_json_file(saved_path.string()), task.overrides, {"sample", "perf"}, "sample");
  SampleOptions opt(SampleConfig::from_json(saved));
  if (!task.prompt_file.empty()) check_prompt_file(task.prompt_file);
  const torch::Device device = select_device(TrainConfig::from_json(saved).device);
  const auto tokenizer = make_tokenizer(DataConfig::from_json(saved).tokenizer);

  const std::string ckpt = task.checkpoint.empty() ? run_dir : task.checkpoint;
  LoadedModel loaded = load_model_for_eval(ckpt, device, opt.ema);
  ModelPlugin& model = *loaded.model;
  const nlohmann::json config = generation_config(loaded.config, task.overrides, {"sample", "perf"}, "sample");
  PerfConfig::from_json(config).apply();
  opt = SampleOptions(SampleConfig::from_json(config));
  opt.length = generation_length(opt.length, model.block_size(), "sample.length");
  const PluginInfo info = model.info();
  if (model.vocab_size() > tokenizer->vocab_size())
    throw ConfigError("the model has " + std::to_string(model.vocab_size()) + " ids but data.tokenizer '" +
                          tokenizer->name() + "' only " + std::to_string(tokenizer->vocab_size()),
                      "the run's config.resolved.json names the wrong tokenizer");

  std::vector<Prompt> prompts;
  const std::string& prompt_file = task.prompt_file;
  if (!prompt_file.empty()) {
    prompts = read_prompt_file(prompt_file, *tokenizer, model.vocab_size(), opt.length);
    for (const auto& p : prompts) check_prompt_capabilities(p, info, "'" + prompt_file + "'");
  }

  const std::string protocol = genppl_dataset(opt.steps, opt.top_p, opt.temperature);
  const std::string out =
      !task.out.empty()
          ? task.out
          : (fs::path(run_dir) / "samples" / (protocol + "_seed" + std::to_string(opt.seed) + ".jsonl")).string();
  if (out != "-" && fs::exists(out))
    throw ConfigError("'" + out + "' exists; aobench sample never overwrites samples",
                      "remove it, or pass --out / another --set sample.seed=N");

  const bool bf16 = use_bf16_autocast(TrainConfig::from_json(config).dtype, device);
  std::cerr << "sample: " << run_dir << " step " << loaded.step << (loaded.ema_weights ? " (EMA weights)" : "") << ", "
            << info.name << " on " << device.str() << (bf16 ? " (bf16 autocast)" : "") << ", " << opt.num_samples
            << " sample(s)" << (prompts.empty() ? "" : " per prompt") << " × " << opt.length << " tokens, " << opt.steps
            << " steps, top-p " << opt.top_p << ", temperature " << opt.temperature << "\n";

  const nlohmann::json settings = opt.to_json();
  const std::vector<const Prompt*> rounds = prompts.empty() ? std::vector<const Prompt*>{nullptr} : [&] {
    std::vector<const Prompt*> r;
    for (const auto& p : prompts) r.push_back(&p);
    return r;
  }();
  Progress progress{"sample", opt.num_samples * static_cast<int64_t>(rounds.size())};
  std::ostringstream lines, printed;
  int64_t index = 0, batch = 0;
  AutocastScope autocast(bf16);
  for (const Prompt* prompt : rounds) {
    // The positions the prompt fixed: genppl scores only the others, under a key of their own.
    std::vector<int64_t> given;
    if (prompt)
      for (size_t i = 0; i < prompt->ids.size(); ++i)
        if (prompt->ids[i] >= 0) given.push_back(static_cast<int64_t>(i));
    for (int64_t first = 0; first < opt.num_samples; first += opt.batch_size, ++batch) {
      const int64_t rows = std::min(opt.batch_size, opt.num_samples - first);
      const uint64_t seed = opt.seed + static_cast<uint64_t>(batch);
      SampleRequest req = opt.request(rows, seed, device);
      if (prompt) req.prompt = prompt_rows(*prompt, rows);
      const SampleOutput s = model.sample(req);
      const auto tokens = s.tokens.to(torch::kCPU, torch::kLong).contiguous();
      const auto order = s.order.defined() ? s.order.to(torch::kCPU, torch::kLong).contiguous() : torch::Tensor();
      for (int64_t r = 0; r < rows; ++r, ++index) {
        const int64_t* p = tokens[r].data_ptr<int64_t>();
        std::vector<int64_t> ids(p, p + tokens.size(1));
        for (int64_t id : ids)
          if (id < 0 || id >= model.vocab_size())
            throw PluginError(info.name + ": sample() returned id " + std::to_string(id) + " outside [0, " +
                                  std::to_string(model.vocab_size()) + ")",
                              "a plugin bug; run its tests (test_plugin_" + info.name + ")");
        nlohmann::json j = {{"index", index}, {"seed", seed}, {"row", r}, {"ids", ids}};
        j["text"] = tokenizer->decode(std::vector<uint32_t>(ids.begin(), ids.end()));
        if (order.defined()) {
          const int64_t* o = order[r].data_ptr<int64_t>();
          j["order"] = std::vector<int64_t>(o, o + order.size(1));
        }
        j["prompt_line"] = prompt ? nlohmann::json(prompt->line) : nlohmann::json();
        j["given"] = given;
        j["tokenizer"] = tokenizer->name();
        // The text in prompt and generated runs, for reports and --print.
        const std::vector<TextSegment> segments =
            given.empty() && !task.print ? std::vector<TextSegment>{} : sample_segments(ids, given, *tokenizer);
        if (!given.empty()) {
          j["segments"] = nlohmann::json::array();
          for (const auto& seg : segments) j["segments"].push_back({{"given", seg.given}, {"text", seg.text}});
        }
        if (task.print)
          printed << "--- sample " << index << " (seed " << seed << ", row " << r
                  << (prompt ? ", prompt line " + std::to_string(prompt->line) : std::string()) << ")\n"
                  << printable_sample(segments) << "\n";
        j["steps"] = opt.steps;
        j["temperature"] = opt.temperature;
        j["top_p"] = opt.top_p;
        j["network_calls"] = s.network_calls;  // of the whole batch call
        j["run"] = run_name(run_dir);
        j["plugin"] = info.name;
        j["flavour"] = get_string(config, "model.flavour");
        j["checkpoint_step"] = loaded.step;
        j["ema_weights"] = loaded.ema_weights;
        j["settings"] = settings;
        // Byte-level tokens may split a UTF-8 character: invalid bytes become U+FFFD in the text field.
        lines << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      }
      progress.update(index);
    }
  }
  if (out == "-") {  // the JSONL on standard output (C stdio: std::cout goes to standard error meanwhile)
    std::fputs(lines.str().c_str(), stdout);
    std::fflush(stdout);
    if (task.print) std::cout << printed.str() << (prompts.empty() ? "" : "(«…»: the prompt's tokens)\n");
    std::cout << "samples: standard output (" << index << " lines)\n";
    return;
  }
  if (!fs::path(out).parent_path().empty()) fs::create_directories(fs::path(out).parent_path());
  write_new_file_atomic(out, lines.str());  // the check above can race another sample process; this cannot
  if (task.print) std::cout << printed.str() << (prompts.empty() ? "" : "(«…»: the prompt's tokens)\n");
  std::cout << "samples: " << out << " (" << index << " lines)\n";
}

}  // namespace aobench
