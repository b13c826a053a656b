// Implements: the results schema (see results.h): JSON round trip with type checks, merging, collection
// of run/experiment directories (config.resolved.json, metrics.jsonl, results.json) and the regression
// comparison behind `aobench compare`.
#include "reports/results.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <regex>
#include <sstream>

#include "core/config.h"
#include "core/env_info.h"
#include "core/errors.h"
#include "core/safetensors.h"

namespace aobench {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const json& need(const json& j, const char* key, const std::string& where, const std::string& origin) {
  if (!j.is_object() || !j.contains(key))
    throw DataError(origin + ": '" + where + "' lacks \"" + key + "\"",
                    "results files are written by `aobench eval`/`report`; regenerate it");
  return j.at(key);
}

std::string str_or(const json& j, const char* key, const std::string& fallback = "") {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}
int64_t int_or(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<int64_t>() : 0;
}

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot open '" + path + "'", "check the path");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return parse_json_limited(text.str(), "'" + path + "'", /*ignore_comments=*/false);
  } catch (const json::parse_error& e) {
    throw DataError("invalid JSON in '" + path + "': " + e.what(), "the file is damaged; regenerate it");
  } catch (const ConfigError& e) {  // nested too deep
    throw DataError(e.what(), "the file is damaged; regenerate it");
  }
}

// A metric field must hold a number (null stands for NaN, as nlohmann writes it); anything else is an
// error naming the file and key, never read as NaN and compared as if it were one.
double number_field(const json& mj, const char* key, const std::string& where, const std::string& origin) {
  const json& v = mj.at(key);
  if (v.is_null()) return std::nan("");
  if (!v.is_number())
    throw DataError(origin + ": '" + where + "." + key + "' must be a number, got " + brief(v),
                    "results files are written by `aobench eval`; regenerate it or fix the value");
  return v.get<double>();
}

// A metric's "params" object (see MetricParams): known keys with their types; anything else is an error
// naming the file and key.
MetricParams read_metric_params(const json& pj, const std::string& where, const std::string& origin) {
  const std::string hint = "results files are written by `aobench eval`, `genppl` and `speed`; regenerate it";
  if (!pj.is_object()) throw DataError(origin + ": '" + where + "' must be an object, got " + brief(pj), hint);
  MetricParams p;
  for (auto it = pj.begin(); it != pj.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    const bool is_string = k == "family" || k == "mode";
    const bool is_count = k == "orders" || k == "ensemble" || k == "positions" || k == "steps";
    if (k == "prompted") {
      if (!v.is_boolean())
        throw DataError(origin + ": '" + where + ".prompted' must be true or false, got " + brief(v), hint);
      p.prompted = v.get<bool>();
      continue;
    }
    if (!is_string && !is_count && k != "top_p" && k != "temperature")
      throw DataError(origin + ": unknown key '" + where + "." + k + "'",
                      "keys: family, mode, orders, ensemble, positions, steps, top_p, temperature, prompted");
    if (is_string ? !v.is_string() : is_count ? !v.is_number_integer() : !v.is_number())
      throw DataError(origin + ": '" + where + "." + k + "' must be " +
                          (is_string  ? "a string"
                           : is_count ? "an integer"
                                      : "a number") +
                          ", got " + brief(v),
                      hint);
    if (k == "family")
      p.family = v.get<std::string>();
    else if (k == "mode")
      p.mode = v.get<std::string>();
    else if (k == "orders")
      p.orders = v.get<int64_t>();
    else if (k == "ensemble")
      p.ensemble = v.get<int64_t>();
    else if (k == "positions")
      p.positions = v.get<int64_t>();
    else if (k == "steps")
      p.steps = v.get<int64_t>();
    else if (k == "top_p")
      p.top_p = v.get<double>();
    else
      p.temperature = v.get<double>();
  }
  return p;
}

// metrics.jsonl → curves. Lines are {"step": N, "loss/train": x, ...}; unparsable lines (a run killed
// mid-write) are skipped. Read: the losses, the validation loss's standard error ("loss/val_se"), the data's
// unigram level ("unigram/nats", one point) and the model's diagnostics ("diag/<name>", e.g. adaLN gates).
void read_curves(const std::string& path, RunResults& run) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number()) continue;
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& key = it.key();
      const bool wanted = key == "loss/train" || key == "loss/val" || key == "loss/val_se" || key == "unigram/nats" ||
                          key.rfind("diag/", 0) == 0;
      if (!wanted || !it.value().is_number()) continue;
      const double v = it.value().get<double>();
      if (std::isfinite(v)) run.curves[key].emplace_back(j["step"].get<double>(), v);
    }
  }
}

// The first kSamplesShown records of every samples/*.jsonl: "segments" (prompted samples) or "text"; lines
// that are not sample records are skipped (the report shows what it can read), each text cut at 2 000 bytes.
void read_samples(const fs::path& folder, RunResults& run) {
  if (!fs::is_directory(folder)) return;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(folder))
    if (e.is_regular_file() && e.path().extension() == ".jsonl") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  auto cut = [](std::string s) {
    if (s.size() <= 2000) return s;
    size_t end = 2000;
    while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;  // not inside a character
    return s.substr(0, end) + " […]";
  };
  for (const auto& f : files) {
    std::ifstream in(f);
    auto& shown = run.samples[f.stem().string()];
    for (std::string line; shown.size() < kSamplesShown && std::getline(in, line);) {
      const json j = json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) continue;
      std::vector<std::pair<bool, std::string>> segments;
      if (j.contains("segments") && j["segments"].is_array()) {
        for (const auto& s : j["segments"])
          if (s.is_object() && s.contains("text") && s["text"].is_string())
            segments.emplace_back(s.value("given", false), cut(s["text"].get<std::string>()));
      } else if (j.contains("text") && j["text"].is_string()) {
        segments.emplace_back(false, cut(j["text"].get<std::string>()));
      }
      if (!segments.empty()) shown.push_back(std::move(segments));
    }
    if (shown.empty()) run.samples.erase(f.stem().string());
  }
}

RunResults collect_run(const fs::path& dir, json& context) {
  RunResults run;
  const fs::path results = dir / "results.json";
  if (fs::exists(results)) {
    // Every entry of a run directory's own results.json describes that run: a copied or renamed run keeps the
    // entry under its old name beside the one written since. Merge them, the entry under the current name last.
    const Results r = Results::load(results.string());
    const std::string name = dir.filename().string();
    Results merged;
    for (const auto& [key, entry] : r.runs)
      if (key != name) merged.merge(Results{{}, {{name, entry}}});
    if (r.runs.count(name)) merged.merge(Results{{}, {{name, r.runs.at(name)}}});
    if (merged.runs.count(name)) run = merged.runs.at(name);
    if (!r.context.empty()) context = r.context;
  }
  run.config = read_json((dir / "config.resolved.json").string());
  if (run.config.contains("model")) {
    run.plugin = str_or(run.config["model"], "plugin", run.plugin);
    run.flavour = str_or(run.config["model"], "flavour", run.flavour);
  }
  run.curves.clear();
  if (fs::exists(dir / "metrics.jsonl")) read_curves((dir / "metrics.jsonl").string(), run);
  read_samples(dir / "samples", run);
  if (run.steps == 0 && run.curves.count("loss/train") && !run.curves["loss/train"].empty())
    run.steps = static_cast<int64_t>(run.curves["loss/train"].back().first);
  return run;
}

}  // namespace

std::pair<std::string, std::string> split_metric_key(const std::string& key) {
  const auto slash = key.rfind('/');
  if (slash == std::string::npos) return {"", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

json MetricParams::to_json() const {
  json j = json::object();
  if (!family.empty()) j["family"] = family;
  if (!mode.empty()) j["mode"] = mode;
  if (orders) j["orders"] = orders;
  if (ensemble) j["ensemble"] = ensemble;
  if (positions) j["positions"] = positions;
  if (steps) j["steps"] = steps;
  if (top_p) j["top_p"] = *top_p;
  if (temperature) j["temperature"] = *temperature;
  if (prompted) j["prompted"] = true;
  return j;
}

MetricParams metric_params_from_legacy_name(const std::string& key) {
  const auto [dataset, metric] = split_metric_key(key);
  // The names `aobench eval` (likelihoods), `genppl` and `speed` wrote (harness/tasks/eval.cpp metric_suffix,
  // metrics/generation.cpp genppl_dataset / speed_dataset).
  static const std::regex likelihood(R"((nll|ppl|bpb|eval_tok_s)(?:_k(\d{1,9})|_m(\d{1,9})(?:_p(\d{1,9}))?|(_elbo))?)");
  static const std::regex genppl_protocol(R"(gen_p([^_]+)_t([^_]+)_s(\d{1,9}))");
  static const std::regex speed_protocol(R"(speed_s(\d{1,9}))");
  MetricParams p;
  std::smatch m;
  if (std::regex_match(metric, m, likelihood)) {
    p.family = m[1];
    if (m[2].matched)
      p.mode = "random", p.orders = std::stoll(m[2]);
    else if (m[3].matched)
      p.mode = "ensemble", p.ensemble = std::stoll(m[3]), p.positions = m[4].matched ? std::stoll(m[4]) : 0;
    else if (m[5].matched)
      p.mode = "elbo";
    else
      p.mode = "l2r";
    return p;
  }
  p.family = metric;
  if ((metric == "genppl" || metric == "genppl_corpus" || metric == "entropy") &&
      std::regex_match(dataset, m, genppl_protocol)) {
    char* end = nullptr;
    const std::string top_p = m[1], temperature = m[2];
    const double tp = std::strtod(top_p.c_str(), &end);
    const bool tp_ok = end == top_p.c_str() + top_p.size();
    const double t = std::strtod(temperature.c_str(), &end);
    if (tp_ok && end == temperature.c_str() + temperature.size())
      p.top_p = tp, p.temperature = t, p.steps = std::stoll(m[3]);
  } else if ((metric == "gen_s" || metric == "gen_tok_s") && std::regex_match(dataset, m, speed_protocol)) {
    p.steps = std::stoll(m[1]);
  }
  return p;
}

json Results::to_json() const {
  json runs_j = json::object();
  for (const auto& [name, run] : runs) {
    json metrics = json::object();
    for (const auto& [key, m] : run.metrics) {
      json mj = {{"value", m.value},       {"n", m.n},
                 {"is_bound", m.is_bound}, {"higher_is_better", m.higher_is_better},
                 {"protocol", m.protocol}, {"params", m.params.to_json()}};
      mj["stderr"] = m.stderr_ ? json(*m.stderr_) : json();
      metrics[key] = mj;
    }
    json curves = json::object();
    for (const auto& [key, c] : run.curves) {
      json pts = json::array();
      for (const auto& [s, v] : c) pts.push_back({s, v});
      curves[key] = pts;
    }
    runs_j[name] = {
        {"plugin", run.plugin}, {"flavour", run.flavour}, {"paradigm", run.paradigm},       {"params", run.params},
        {"steps", run.steps},   {"tokens", run.tokens},   {"train_flops", run.train_flops}, {"config", run.config},
        {"metrics", metrics},   {"curves", curves}};
  }
  return {{"schema", kResultsSchema}, {"context", context}, {"runs", runs_j}};
}

Results Results::from_json(const json& j, const std::string& origin) {
  if (!j.is_object() || str_or(j, "schema") != kResultsSchema)
    throw DataError(origin + ": not an aobench results file (\"schema\" must be \"" + kResultsSchema + "\")",
                    "compare/report read results.json files written by aobench eval or report");
  Results r;
  if (j.contains("context") && j["context"].is_object()) r.context = j["context"];
  const json& runs = need(j, "runs", "<root>", origin);
  if (!runs.is_object()) throw DataError(origin + ": \"runs\" must be an object");
  for (auto it = runs.begin(); it != runs.end(); ++it) {
    const json& rj = it.value();
    const std::string where = "runs." + it.key();
    RunResults run;
    run.plugin = str_or(rj, "plugin");
    run.flavour = str_or(rj, "flavour");
    run.paradigm = str_or(rj, "paradigm");
    run.params = int_or(rj, "params");
    run.steps = int_or(rj, "steps");
    run.tokens = int_or(rj, "tokens");
    if (rj.contains("train_flops")) {
      if (!rj["train_flops"].is_number())
        throw DataError(origin + ": '" + where + ".train_flops' must be a number, got " + brief(rj["train_flops"]),
                        "results files are written by `aobench train` and `eval`; regenerate it or fix the value");
      run.train_flops = rj["train_flops"].get<double>();
    }
    if (rj.contains("config")) run.config = rj["config"];
    const json& metrics = need(rj, "metrics", where, origin);
    for (auto m = metrics.begin(); m != metrics.end(); ++m) {
      const json& mj = m.value();
      const std::string mwhere = where + ".metrics." + m.key();
      need(mj, "value", mwhere, origin);
      MetricValue mv;
      mv.value = number_field(mj, "value", mwhere, origin);  // null (NaN when written) reads back as NaN
      if (mj.contains("stderr") && !mj["stderr"].is_null()) mv.stderr_ = number_field(mj, "stderr", mwhere, origin);
      mv.n = int_or(mj, "n");
      for (const char* flag : {"is_bound", "higher_is_better"})
        if (mj.contains(flag) && !mj[flag].is_boolean())
          throw DataError(origin + ": '" + mwhere + "." + flag + "' must be true or false, got " + brief(mj[flag]),
                          "results files are written by `aobench eval`; regenerate it or fix the value");
      mv.is_bound = mj.value("is_bound", false);
      mv.higher_is_better = mj.value("higher_is_better", false);
      mv.protocol = str_or(mj, "protocol");
      mv.params = mj.contains("params") ? read_metric_params(mj["params"], mwhere + ".params", origin)
                                        : metric_params_from_legacy_name(m.key());
      run.metrics[m.key()] = mv;
    }
    if (rj.contains("curves") && rj["curves"].is_object())
      for (auto c = rj["curves"].begin(); c != rj["curves"].end(); ++c)
        for (const auto& pt : c.value())
          if (pt.is_array() && pt.size() == 2 && pt[0].is_number() && pt[1].is_number())
            run.curves[c.key()].emplace_back(pt[0].get<double>(), pt[1].get<double>());
    r.runs[it.key()] = std::move(run);
  }
  return r;
}

Results Results::load(const std::string& path) {
  const json j = read_json(path);
  try {
    return from_json(j, path);
  } catch (const json::exception& e) {  // a field of an unexpected type somewhere else
    throw DataError(path + ": unexpected content (" + e.what() + ")", "the file is damaged; regenerate it");
  }
}

void Results::save(const std::string& path) const { write_file_atomic(path, to_json().dump(2) + "\n"); }

void Results::merge(const Results& other) {
  if (!other.context.empty()) context = other.context;
  for (const auto& [name, run] : other.runs) {
    auto it = runs.find(name);
    if (it == runs.end()) {
      runs[name] = run;
      continue;
    }
    RunResults& mine = it->second;
    for (const auto& [k, m] : run.metrics) mine.metrics[k] = m;
    for (const auto& [k, c] : run.curves) mine.curves[k] = c;
    if (!run.plugin.empty()) mine.plugin = run.plugin;
    if (!run.flavour.empty()) mine.flavour = run.flavour;
    if (!run.paradigm.empty()) mine.paradigm = run.paradigm;
    if (run.params) mine.params = run.params;
    if (run.steps) mine.steps = run.steps;
    if (run.tokens) mine.tokens = run.tokens;
    if (run.train_flops) mine.train_flops = run.train_flops;
    if (!run.config.empty()) mine.config = run.config;
  }
}

Results collect_results(const std::string& dir) {
  const fs::path root(dir);
  if (!fs::is_directory(root))
    throw DataError("'" + dir + "' is not a directory", "pass a run directory or an experiment directory");
  Results r;
  json context;
  if (fs::exists(root / "config.resolved.json")) {
    r.runs[root.filename().string()] = collect_run(root, context);
  } else {
    std::vector<fs::path> subdirs;
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory() && fs::exists(e.path() / "config.resolved.json")) subdirs.push_back(e.path());
    std::sort(subdirs.begin(), subdirs.end());
    for (const auto& d : subdirs) r.runs[d.filename().string()] = collect_run(d, context);
  }
  if (r.runs.empty())
    throw DataError("'" + dir + "' holds no run (no config.resolved.json in it or its subdirectories)",
                    "train first (`aobench train` or `aobench run`), then report the run/experiment directory");
  r.context = context.is_object() && !context.empty() ? context : env_info();
  return r;
}

bool is_timing_metric(const std::string& key) {
  const std::string metric = split_metric_key(key).second;
  auto ends_with = [&](const char* tail) {
    const std::string t = tail;
    return metric.size() >= t.size() && metric.compare(metric.size() - t.size(), t.size(), t) == 0;
  };
  return metric.find("tok_s") != std::string::npos || metric.rfind("throughput", 0) == 0 ||
         key.rfind("throughput/", 0) == 0 || metric == "mfu" || ends_with("_mfu") || ends_with("_s") ||
         ends_with("_ms") || metric.rfind("fill_ms_", 0) == 0 || metric.find("floor") != std::string::npos;
}

bool metric_matches(const std::string& key, const std::string& pattern) {
  if (pattern == "all") return true;
  // Glob with '*' only: iterative match with one backtrack point.
  auto glob = [](const std::string& s, const std::string& p) {
    size_t i = 0, j = 0, star = std::string::npos, mark = 0;
    while (i < s.size()) {
      if (j < p.size() && p[j] == '*')
        star = j++, mark = i;
      else if (j < p.size() && p[j] == s[i])
        ++i, ++j;
      else if (star != std::string::npos)
        j = star + 1, i = ++mark;
      else
        return false;
    }
    while (j < p.size() && p[j] == '*') ++j;
    return j == p.size();
  };
  return glob(split_metric_key(key).second, pattern) || glob(key, pattern);
}

bool NaturalLess::operator()(const std::string& a, const std::string& b) const {
  size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ei = i, ej = j;
      while (ei < a.size() && digit(a[ei])) ++ei;
      while (ej < b.size() && digit(b[ej])) ++ej;
      // Without leading zeros, the longer run is the larger number; equal lengths compare as text.
      std::string x = a.substr(i, ei - i), y = b.substr(j, ej - j);
      x.erase(0, std::min(x.find_first_not_of('0'), x.size() - 1));
      y.erase(0, std::min(y.find_first_not_of('0'), y.size() - 1));
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = ei, j = ej;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
    }
  }
  if (a.size() - i != b.size() - j) return a.size() - i < b.size() - j;
  return a < b;  // "s064" and "s64": a total order all the same
}

size_t display_width(const std::string& s) {
  return std::count_if(s.begin(), s.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; });
}

size_t Comparison::worse() const {
  return std::count_if(rows.begin(), rows.end(), [](const CompareRow& r) { return r.worse; });
}

size_t Comparison::missing() const {
  return std::count_if(rows.begin(), rows.end(), [](const CompareRow& r) { return r.missing; });
}

Comparison compare_results(const Results& base, const Results& current, double threshold,
                           const std::vector<std::string>& metrics) {
  Comparison c;
  auto selected = [&](const std::string& key) {
    if (metrics.empty()) return !is_timing_metric(key);
    return std::any_of(metrics.begin(), metrics.end(), [&](const std::string& p) { return metric_matches(key, p); });
  };
  // Every selected metric of BASE gets a row: compared, or missing when NEW lacks the run or the metric.
  auto compare_run = [&](const std::string& name, const RunResults& b, const RunResults* cur) {
    for (const auto& [key, mb] : b.metrics) {
      if (!selected(key)) {
        c.timing_skipped += metrics.empty();
        continue;
      }
      CompareRow row;
      row.run = name;
      row.metric = key;
      row.base = mb.value;
      row.higher_is_better = mb.higher_is_better;
      const auto it = cur ? cur->metrics.find(key) : b.metrics.end();
      if (!cur || it == cur->metrics.end()) {
        row.missing = true;
        row.current = std::nan("");
        row.rel_delta = std::nan("");
        c.rows.push_back(row);
        continue;
      }
      row.current = it->second.value;
      row.rel_delta = (row.current - row.base) / std::max(std::abs(row.base), 1e-12);
      // A metric that turned NaN is worse; otherwise the sign says which way is worse.
      row.worse = !std::isfinite(row.current) && std::isfinite(row.base);
      if (std::isfinite(row.rel_delta))
        row.worse = row.higher_is_better ? row.rel_delta < -threshold : row.rel_delta > threshold;
      c.rows.push_back(row);
    }
  };
  // Same-name runs are compared; a single run on each side is compared whatever the names.
  if (base.runs.size() == 1 && current.runs.size() == 1 && !current.runs.count(base.runs.begin()->first)) {
    compare_run(base.runs.begin()->first + " → " + current.runs.begin()->first, base.runs.begin()->second,
                &current.runs.begin()->second);
  } else {
    for (const auto& [name, b] : base.runs) {
      auto it = current.runs.find(name);
      compare_run(name, b, it == current.runs.end() ? nullptr : &it->second);
    }
  }
  return c;
}

namespace {

std::string compare_verdict(const CompareRow& r, bool allow_missing) {
  if (r.missing) return allow_missing ? "missing in NEW (allowed)" : "MISSING in NEW";
  return std::string(r.worse ? "WORSE" : "ok") + (r.higher_is_better ? " (higher is better)" : "");
}

std::string compare_summary(const Comparison& c, double threshold, bool allow_missing) {
  std::ostringstream out;
  const size_t compared = c.rows.size() - c.missing();
  out << (c.passed(allow_missing) ? "PASS: " : "FAIL: ") << c.worse() << " of " << compared
      << " metric(s) worse by more than " << 100 * threshold << "%";
  if (c.missing() > 0)
    out << "; " << c.missing() << " in BASE missing in NEW" << (allow_missing ? " (allowed by --allow-missing)" : "");
  if (c.timing_skipped > 0)
    out << "; " << c.timing_skipped << " timing metric(s) not compared (name them with --metrics)";
  return out.str();
}

}  // namespace

std::string render_compare(const Comparison& c, double threshold, bool allow_missing, bool only_failures) {
  struct Line {
    std::string run, metric, base, current, delta, verdict;
  };
  auto number = [](double v) {
    std::ostringstream s;
    s << std::setprecision(6) << v;
    return s.str();
  };
  std::vector<Line> lines = {{"run", "metric", "base", "new", "delta", "verdict"}};
  for (const auto& r : c.rows) {
    if (only_failures && !r.worse && !(r.missing && !allow_missing)) continue;
    std::ostringstream delta;
    if (!r.missing) delta << std::showpos << std::fixed << std::setprecision(2) << 100 * r.rel_delta << "%";
    lines.push_back({r.run, r.metric, number(r.base), r.missing ? "-" : number(r.current),
                     r.missing ? "-" : delta.str(), compare_verdict(r, allow_missing)});
  }
  // Column widths from the contents (in code points: the run column may hold "→").
  const auto width = display_width;
  std::vector<size_t> w(5, 0);
  for (const auto& l : lines) {
    const std::string* cells[] = {&l.run, &l.metric, &l.base, &l.current, &l.delta};
    for (size_t i = 0; i < 5; ++i) w[i] = std::max<size_t>(w[i], width(*cells[i]));
  }
  auto pad = [&](const std::string& s, size_t n, bool right) {
    const std::string fill(n - width(s), ' ');
    return right ? fill + s : s + fill;
  };
  std::ostringstream out;
  for (const auto& l : lines)
    out << pad(l.run, w[0], false) << "  " << pad(l.metric, w[1], false) << "  " << pad(l.base, w[2], true) << "  "
        << pad(l.current, w[3], true) << "  " << pad(l.delta, w[4], true) << "  " << l.verdict << "\n";
  out << compare_summary(c, threshold, allow_missing) << "\n";
  return out.str();
}

nlohmann::json compare_to_json(const Comparison& c, double threshold, bool allow_missing) {
  json rows = json::array();
  for (const auto& r : c.rows) {
    json row = {{"run", r.run}, {"metric", r.metric}, {"base", r.base}, {"higher_is_better", r.higher_is_better}};
    row["new"] = r.missing ? json(nullptr) : json(r.current);
    row["rel_delta"] = r.missing || !std::isfinite(r.rel_delta) ? json(nullptr) : json(r.rel_delta);
    row["verdict"] = r.missing ? "missing" : r.worse ? "worse" : "ok";
    rows.push_back(row);
  }
  return {{"threshold", threshold},
          {"allow_missing", allow_missing},
          {"passed", c.passed(allow_missing)},
          {"worse", c.worse()},
          {"missing", c.missing()},
          {"timing_not_compared", c.timing_skipped},
          {"summary", compare_summary(c, threshold, allow_missing)},
          {"rows", rows}};
}

}  // namespace aobench
