// Implements: generation options, prompt files, generative perplexity and generation timing (see
// generation.h; spec-ao-gpt §4.5–4.6).
#include "metrics/generation.h"

#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/config.h"
#include "core/device.h"
#include "core/errors.h"
#include "datasets/tokenizer.h"
#include "metrics/likelihood.h"

namespace aobench {

SampleRequest SampleOptions::request(int64_t rows, uint64_t batch_seed, torch::Device device) const {
  SampleRequest r;
  r.batch_size = rows;
  r.length = length;
  r.steps = steps;
  r.temperature = temperature;
  r.top_p = top_p;
  r.seed = batch_seed;
  r.float64_sampling = float64;
  r.schedule = schedule;
  r.counts = counts;
  r.device = device;
  return r;
}

void complete_from_base(nlohmann::json& saved, const std::vector<std::string>& sections) {
  for (const auto& section : sections) {
    nlohmann::json merged = base_config().at(section);
    if (saved.contains(section) && saved[section].is_object()) merged.update(saved[section]);
    saved[section] = merged;
  }
}

nlohmann::json generation_config(nlohmann::json saved, const Overrides& overrides,
                                 const std::vector<std::string>& allowed, const std::string& command) {
  complete_from_base(saved, {"sample", "speed", "genppl", "perf"});
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a + (a.find('.') == std::string::npos ? ".*" : "");
  overrides.require_within(allowed, "aobench " + command + " takes only " + list + " overrides here",
                           "the model and training keys come from the run's checkpoint");
  overrides.apply_to(saved);
  return saved;
}

std::string run_name(const std::string& run_dir) {
  const std::filesystem::path p = std::filesystem::path(run_dir).lexically_normal();
  const std::string name = p.filename().string();
  return name.empty() ? p.parent_path().filename().string() : name;
}

void check_prompt_file(const std::string& path) {
  if (const std::string kind = special_file_kind(path); !kind.empty())
    throw DataError("prompt file '" + path + "' is " + kind + ", not a regular file",
                    "write the prompts to a .jsonl file and pass its path: a FIFO or device would block or never end");
}

std::vector<Prompt> read_prompt_file(const std::string& path, const Tokenizer& tokenizer, int64_t vocab,
                                     int64_t length) {
  check_prompt_file(path);
  std::ifstream in(path);
  if (!in) throw DataError("cannot open prompt file '" + path + "'", "check the --prompt-file path");
  std::vector<Prompt> prompts;
  int64_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "'" + path + "' line " + std::to_string(line_no);
    const std::string hint = "each line is {\"ids\": [id or -1 or null, ...]} or {\"text\": \"...\"}";
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw DataError(where + " is not a JSON object", hint);
    if (j.contains("ids") == j.contains("text"))
      throw DataError(where + " needs exactly one of \"ids\" and \"text\"", hint);
    Prompt p;
    p.line = line_no;
    if (j.contains("text")) {
      if (!j["text"].is_string()) throw DataError(where + ": \"text\" must be a string", hint);
      for (uint32_t id : tokenizer.encode(j["text"].get<std::string>())) p.ids.push_back(id);
    } else {
      if (!j["ids"].is_array()) throw DataError(where + ": \"ids\" must be a list", hint);
      for (const auto& v : j["ids"]) {
        if (v.is_null() || (v.is_number_integer() && v.get<int64_t>() == -1)) {
          p.ids.push_back(-1);
        } else if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < vocab) {
          p.ids.push_back(v.get<int64_t>());
        } else {
          throw DataError(
              where + ": id " + v.dump() + " is outside the model's vocabulary [0, " + std::to_string(vocab) + ")",
              "free positions are -1 or null; ids come from the run's tokenizer");
        }
      }
    }
    if (static_cast<int64_t>(p.ids.size()) > length)
      throw DataError(where + ": the prompt has " + std::to_string(p.ids.size()) +
                          " tokens, more than sample.length = " + std::to_string(length),
                      "shorten the prompt or raise sample.length (at most the model's block_size)");
    p.ids.resize(length, -1);
    prompts.push_back(std::move(p));
  }
  if (prompts.empty()) throw DataError("prompt file '" + path + "' holds no prompt", "write one JSON object per line");
  return prompts;
}

void check_prompt_capabilities(const Prompt& prompt, const PluginInfo& info, const std::string& origin) {
  const Capabilities& c = info.capabilities;
  if (c.infill) return;
  bool seen_free = false;
  for (size_t i = 0; i < prompt.ids.size(); ++i) {
    if (prompt.ids[i] < 0) {
      seen_free = true;
    } else if (!c.prefix_prompt) {
      throw ConfigError(
          origin + " line " + std::to_string(prompt.line) + ": plugin '" + info.name + "' takes no prompt",
          "sample it without --prompt-file");
    } else if (seen_free) {
      throw ConfigError(origin + " line " + std::to_string(prompt.line) + ": position " + std::to_string(i) +
                            " is given after a free position: infilling needs an any-order or diffusion model",
                        "a left-to-right model takes prefix prompts only (given ids first, then -1s)");
    }
  }
}

torch::Tensor prompt_rows(const Prompt& prompt, int64_t rows) {
  auto row = torch::tensor(prompt.ids, torch::kLong).view({1, -1});
  return row.expand({rows, row.size(1)}).contiguous();
}

double SampleScore::ppl() const { return tokens > 0 ? std::exp(nll_sum / tokens) : std::nan(""); }

double unigram_entropy(const std::vector<int64_t>& ids) {
  if (ids.empty()) return 0;
  std::map<int64_t, int64_t> counts;
  for (int64_t id : ids) ++counts[id];
  double h = 0;
  const double n = static_cast<double>(ids.size());
  for (const auto& [id, c] : counts) h -= c / n * std::log(c / n);
  return h;
}

std::vector<SampleScore> score_samples(ModelPlugin& judge, const std::vector<std::vector<int64_t>>& samples,
                                       int64_t batch_size, torch::Device device,
                                       const std::vector<std::vector<int64_t>>& given) {
  std::vector<SampleScore> scores(samples.size());
  torch::NoGradGuard no_grad;
  judge.module().eval();
  at::Generator gen = at::detail::createCPUGenerator(0);  // log_prob of a decoder draws nothing
  size_t i = 0;
  while (i < samples.size()) {
    // A batch: up to batch_size consecutive samples of the same length.
    const size_t L = samples[i].size();
    size_t j = i;
    std::vector<int64_t> flat;
    while (j < samples.size() && j - i < static_cast<size_t>(batch_size) && samples[j].size() == L) {
      flat.insert(flat.end(), samples[j].begin(), samples[j].end());
      ++j;
    }
    const int64_t B = static_cast<int64_t>(j - i), T = static_cast<int64_t>(L);
    if (T >= 2) {
      auto tokens = torch::tensor(flat, torch::kLong).view({B, T}).to(device);
      auto order = torch::arange(T, torch::dtype(torch::kLong).device(device)).expand({B, T}).contiguous();
      NllOutput out = judge.log_prob(tokens, order, gen);
      auto scored = out.scored;
      if (!given.empty()) {          // (B, T): the prompt's positions are not the model's tokens
        std::vector<uint8_t> fixed;  // row-major B × T
        for (int64_t b = 0; b < B; ++b)
          for (bool f : given_mask(L, given[i + b])) fixed.push_back(f);
        const auto mask = torch::tensor(fixed, torch::kUInt8).view({B, T}).to(torch::kBool);
        scored = scored.logical_and(mask.to(scored.device()).logical_not());
      }
      const auto rows = nll_row_sums(out.nll, scored, /*skip_first=*/true, /*require_first=*/false);
      for (int64_t b = 0; b < B; ++b) {
        scores[i + b].nll_sum = rows[b].first;
        scores[i + b].tokens = rows[b].second;
      }
    }
    for (size_t k = i; k < j; ++k) {
      if (given.empty() || given[k].empty()) {
        scores[k].entropy = unigram_entropy(samples[k]);
        continue;
      }
      const std::vector<bool> fixed = given_mask(samples[k].size(), given[k]);
      std::vector<int64_t> generated;
      for (size_t pos = 0; pos < samples[k].size(); ++pos)
        if (!fixed[pos]) generated.push_back(samples[k][pos]);
      scores[k].entropy = unigram_entropy(generated);
    }
    i = j;
  }
  return scores;
}

GenPplSummary summarize_scores(const std::vector<SampleScore>& scores) {
  GenPplSummary s;
  std::vector<double> ppl, ent;
  double nats = 0;
  for (const auto& sc : scores) {
    if (sc.tokens > 0) ppl.push_back(sc.ppl());
    ent.push_back(sc.entropy);
    nats += sc.nll_sum;
    s.tokens += sc.tokens;
  }
  s.ppl = mean_stderr(ppl);
  s.entropy = mean_stderr(ent);
  s.corpus_nll = s.tokens > 0 ? nats / s.tokens : std::nan("");
  s.corpus_ppl = std::exp(s.corpus_nll);
  return s;
}

std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

int64_t generation_length(int64_t length, int64_t block_size, const std::string& key, const std::string& hint_tail) {
  if (length == 0) return block_size;  // the default: as long as the model reads
  if (length > block_size)
    throw ConfigError(
        key + " = " + std::to_string(length) + " exceeds the model's block_size " + std::to_string(block_size),
        "set " + key + " ≤ " + std::to_string(block_size) + hint_tail);
  return length;
}

std::vector<bool> given_mask(size_t length, const std::vector<int64_t>& given) {
  std::vector<bool> fixed(length, false);
  for (int64_t pos : given)
    if (pos >= 0 && pos < static_cast<int64_t>(length)) fixed[pos] = true;
  return fixed;
}

std::vector<TextSegment> sample_segments(const std::vector<int64_t>& ids, const std::vector<int64_t>& given,
                                         const Tokenizer& tokenizer) {
  const std::vector<bool> fixed = given_mask(ids.size(), given);
  std::vector<TextSegment> out;
  for (size_t start = 0; start < ids.size();) {
    size_t end = start;
    while (end < ids.size() && fixed[end] == fixed[start]) ++end;
    out.push_back({fixed[start], tokenizer.decode(std::vector<uint32_t>(ids.begin() + start, ids.begin() + end))});
    start = end;
  }
  return out;
}

std::string printable_sample(const std::vector<TextSegment>& segments) {
  std::string raw;
  for (const auto& s : segments) raw += s.given ? "«" + s.text + "»" : s.text;
  // Through the JSON serializer's replacement of invalid UTF-8, then control characters escaped.
  const std::string valid =
      nlohmann::json(raw).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // "\"...\""
  const std::string text = nlohmann::json::parse(valid).get<std::string>();
  std::string out;
  for (unsigned char ch : text) {
    if ((ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out;
}

std::string genppl_dataset(int64_t steps, double top_p, double temperature) {
  return "gen_p" + short_number(top_p) + "_t" + short_number(temperature) + "_s" + std::to_string(steps);
}

std::string genppl_prompted_dataset(int64_t steps, double top_p, double temperature) {
  return "gen_prompted_p" + short_number(top_p) + "_t" + short_number(temperature) + "_s" + std::to_string(steps);
}

std::string speed_dataset(int64_t steps) { return "speed_s" + std::to_string(steps); }

GenerationTiming time_generation(ModelPlugin& model, const SampleRequest& request, int64_t warmup, int64_t repeats) {
  GenerationTiming t;
  const torch::Device dev = request.device;
  for (int64_t i = 0; i < warmup; ++i) model.sample(request);
  for (int64_t i = 0; i < repeats; ++i) {
    synchronize_device(dev);
    if (dev.is_cuda()) {
      // CUDA events on the current stream: the GPU's own clock, from the first kernel to the last.
      c10::Event start(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
      c10::Event stop(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
      const c10::Device cuda(c10::DeviceType::CUDA, dev.has_index() ? dev.index() : 0);
      const c10::Stream stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(cuda);
      start.record(stream);
      t.network_calls = model.sample(request).network_calls;
      stop.record(stream);
      stop.synchronize();
      t.seconds.push_back(start.elapsedTime(stop) / 1000.0);
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      t.network_calls = model.sample(request).network_calls;
      t.seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    synchronize_device(dev);
  }
  const auto ms = mean_stderr(t.seconds);
  t.mean = ms.mean;
  t.sd = ms.stderr_ * std::sqrt(static_cast<double>(t.seconds.size()));
  return t;
}

GenerationFloor generation_floor(const GenerationShape& s, double bandwidth, double peak_flops) {
  GenerationFloor f;
  const int64_t calls = std::max<int64_t>(1, s.calls);
  const double B = static_cast<double>(s.batch), L = static_cast<double>(s.length);
  const double attention = 4.0 * static_cast<double>(s.n_layer * s.n_embd);  // FLOPs per token per context token
  const double kv_per_token = 2.0 * static_cast<double>(s.n_layer * s.n_embd) * s.activation_bytes;
  for (int64_t c = 0; c < calls; ++c) {
    // Tokens placed before this call and by it.
    const double before = static_cast<double>(s.length * c / calls);
    const double placed = static_cast<double>(s.length * (c + 1) / calls) - before;
    double bytes = s.matmul_params * s.weight_bytes, flops = 0;
    if (s.kv_cache) {
      bytes += B * before * kv_per_token;
      flops = B * placed * (2.0 * s.matmul_params + attention * (before + placed / 2));
    } else {
      flops = B * L * (2.0 * s.matmul_params + attention * L);
    }
    f.bytes += bytes;
    f.flops += flops;
    if (bandwidth > 0 && peak_flops > 0) f.seconds += std::max(bytes / bandwidth, flops / peak_flops);
  }
  return f;
}

}  // namespace aobench
