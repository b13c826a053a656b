// Implements: the ONE results schema every number in aobench lands in (DESIGN.md §2
// reports/), and the renderers that read it. results.json:
//   {"schema": "aobench.results/1", "context": {git_commit, git_dirty, host, device, torch_version,
//    cuda_version, dtype, date, aobench_version},
//    "runs": {RUN: {"plugin", "flavour", "paradigm", "params", "steps", "tokens", "train_flops", "config": {...},
//      "metrics": {"<dataset>/<metric>": {"value", "stderr", "n", "is_bound", "higher_is_better", "protocol",
//                                         "params": {"family", "mode", "orders", ...}}},
//      "curves": {"loss/train": [[step, value], ...], "loss/val": [...]}}}}
// `aobench train` writes the run's record (plugin … train_flops) at every checkpoint, so a report needs no
// plugin to name a run's paradigm; evaluation commands add metrics with their measurement parameters.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace aobench {

inline constexpr const char* kResultsSchema = "aobench.results/1";

// What a metric measured, as fields: the metric's name ("ppl_k4", "gen_p0.95_t0.9_s64/genppl") is only its
// unique key (`aobench compare` matches it); renderers read these. JSON: the fields that are set, e.g.
// {"family": "ppl", "mode": "ensemble", "ensemble": 16, "positions": 256} or
// {"family": "genppl", "steps": 64, "top_p": 0.95, "temperature": 0.9}.
struct MetricParams {
  std::string family{};   // the quantity: nll, ppl, bpb, eval_tok_s (eval); genppl, genppl_corpus, entropy
                          // (genppl); gen_s, gen_tok_s (speed); "" when unknown (not in the headline)
  std::string mode{};     // likelihoods: eval.mode — "l2r" | "random" | "ensemble" | "elbo"; else ""
  int64_t orders = 0;     // random: K orders per sequence
  int64_t ensemble = 0;   // ensemble: M members
  int64_t positions = 0;  // ensemble: positions scored per sequence (0 = all)
  int64_t steps = 0;      // generation: sampling steps (genppl, speed)
  std::optional<double> top_p{}, temperature{};  // generation: sampling settings (genppl)
  bool prompted = false;                         // genppl: samples completing prompts (generated tokens scored)

  nlohmann::json to_json() const;
};

struct MetricValue {
  double value = 0;
  std::optional<double> stderr_;  // absent when not measured
  int64_t n = 0;                  // units behind the stderr (sequences, samples)
  bool is_bound = false;          // an upper bound (diffusion ELBO): rendered "≤"
  bool higher_is_better = false;
  std::string protocol;   // one line: how it was measured
  MetricParams params{};  // what was measured, as fields
};

using Curve = std::vector<std::pair<double, double>>;  // (step, value)

struct RunResults {
  std::string plugin, flavour, paradigm;
  int64_t params = 0, steps = 0, tokens = 0;  // parameter count, optimizer steps, tokens trained on
  double train_flops = 0;                     // forward+backward FLOPs of training (plugin flops_per_token ×
                                              // tokens); 0 when unknown (an older file, a Hugging Face model)
  nlohmann::json config = nlohmann::json::object();
  std::map<std::string, MetricValue> metrics;  // "<dataset>/<metric>"
  std::map<std::string, Curve> curves;         // "loss/train", "loss/val"
  // A few samples per samples file of the run folder (<run>/samples/<protocol>_seed<S>.jsonl → its first
  // kSamplesShown lines as text segments, prompt runs marked given): read by collect_results for the report's
  // samples section, never written to results.json.
  std::map<std::string, std::vector<std::vector<std::pair<bool, std::string>>>> samples;
};

inline constexpr size_t kSamplesShown = 3;

struct Results {
  nlohmann::json context = nlohmann::json::object();
  std::map<std::string, RunResults> runs;

  nlohmann::json to_json() const;
  // Validates the schema tag and field types; `origin` (a file name) is named in errors (DataError). Metrics
  // without "params" (files written before they existed) get them from their names, once, here
  // (metric_params_from_legacy_name).
  static Results from_json(const nlohmann::json& j, const std::string& origin = "results.json");
  static Results load(const std::string& path);  // DataError when unreadable or invalid
  void save(const std::string& path) const;      // atomic (write_file_atomic)
  // Adds `other`'s runs; metrics/curves of a run present in both are overwritten key by key, and the
  // newer context wins when `other` has one.
  void merge(const Results& other);
};

// "<dataset>/<metric>" split at the LAST '/' (dataset names may not contain '/').
std::pair<std::string, std::string> split_metric_key(const std::string& key);

// The parameters an older aobench encoded into a metric's key: "<dataset>/<family><suffix>" with suffix
// "" (l2r), "_k<K>" (random orders), "_m<M>[_p<P>]" (ensemble) or "_elbo" for nll/ppl/bpb/eval_tok_s;
// genppl metrics under "gen_p<top_p>_t<T>_s<steps>", speed metrics under "speed_s<steps>". Any other
// name: family = the metric name. The one place that reads parameters out of names (Results::from_json).
MetricParams metric_params_from_legacy_name(const std::string& key);

// Collects a run directory (has config.resolved.json) or an experiment directory (its subdirectories
// that are runs): config, metrics.jsonl curves ("loss/train", "loss/val") and results.json metrics.
Results collect_results(const std::string& dir);

// The headline table every report leads with (the paper's main metric, zero-shot perplexity): rows = runs,
// columns = datasets, one perplexity family per row chosen by paradigm — autoregressive: exact L2R `ppl`;
// any_order: exact any-order `ppl_k<K>` (largest K); masked_diffusion_encoder: the ELBO bound `ppl_elbo` —
// falling back along ppl_k<K> → ppl → ppl_elbo when the preferred one was not evaluated (a footnote says
// so). Each row carries its protocol (exact or bound, order, first token, windows) and the windows
// evaluated ("all" or a footnote listing the subsets); footnotes are numbered across rows.
struct HeadlineRow {
  std::string run, metric;  // metric family shown, e.g. "ppl_k1"
  std::string protocol;     // how the cells were measured: "l2r exact", "ELBO upper bound, 16 MC steps"
  std::string details;      // the rest of the protocol ("first token skipped; 1024-token windows; ...")
  std::string windows;      // "all" | "subset"
  std::map<std::string, const MetricValue*> cells;  // dataset → value
  std::vector<std::pair<int, std::string>> notes;   // (footnote number, text)
  std::string label() const;                        // "sedd [1, 2]": the run with the numbers of its footnotes
};
struct Headline {
  std::vector<std::string> datasets;
  std::vector<HeadlineRow> rows;  // empty when no run has a perplexity
  std::string shared_details;     // the rows' details when they all agree (printed once), else ""
};
Headline headline_table(const Results& r);  // points into `r`: keep it alive
// The headline as fixed-width text for the terminal (`aobench run` ends with it); "" when empty.
std::string render_headline_text(const Results& r);

// Training FLOPs for the run tables: "1.23e+15"; "" when unknown (0).
std::string flops_text(double flops);
// One context entry as text: strings as they are, the experiment record as its file and findings (its
// description and deviations lead the report already), anything else as JSON.
std::string context_text(const std::string& key, const nlohmann::json& value);

// Renderers: Markdown (one table per metric family, rows = runs, columns = datasets, "≤" for bounds,
// "± stderr", protocol notes under each table), flat CSV, LaTeX (booktabs, one table per family).
std::string render_markdown(const Results& r);  // leads with the headline table
std::string render_csv(const Results& r);
std::string render_latex(const Results& r);
// Writes <out_dir>/<name>.dat + .gp and runs gnuplot for loss_val / loss_train and gen_speed (aobench speed,
// log-log seconds vs steps) as PNG (pngcairo) and SVG.
// Returns the image files written; when gnuplot is missing or fails, prints a warning and returns what
// exists — never throws for plotting problems.
std::vector<std::string> render_plots(const Results& r, const std::string& out_dir);
// Self-contained page: inline CSS, tables, <img> for `images`, links to the text renderings, context.
std::string render_html(const Results& r, const std::vector<std::string>& images);
// All of the above into out_dir: results.json summary.md results.csv results.tex loss_*.{png,svg} index.html.
void write_report(const Results& r, const std::string& out_dir);

// Report order for names with numbers: digit runs compare as numbers ("gen_p1_t1_s64" before "…_s256").
struct NaturalLess {
  bool operator()(const std::string& a, const std::string& b) const;
};

// Columns on a terminal: the code points of a UTF-8 string ("±", "≤", "→" count one each).
size_t display_width(const std::string& s);

// Regression check of NEW against BASE (`aobench compare`): relative delta per selected metric of BASE.
struct CompareRow {
  std::string run, metric;
  double base = 0, current = 0, rel_delta = 0;  // (current − base) / |base|
  bool higher_is_better = false;
  bool worse = false;    // got worse by more than the threshold
  bool missing = false;  // in BASE, not in NEW (the run or the metric): current and rel_delta are meaningless
};
struct Comparison {
  std::vector<CompareRow> rows;  // BASE's order: run, then metric
  size_t timing_skipped = 0;     // timing metrics of BASE left out because no pattern asked for them
  size_t worse() const;
  size_t missing() const;
  // The gate: nothing worse and, unless allowed, nothing missing.
  bool passed(bool allow_missing) const { return worse() == 0 && (allow_missing || missing() == 0); }
};
// `metrics` selects what is compared: patterns ('*' matches any run of characters) tried against the
// metric name ("ppl_k4", "eval_tok_s") and the full key ("wikitext2/ppl"); "all" takes everything. Empty:
// every quality metric, none of the timing ones (is_timing_metric), which a shared or busy machine moves by
// more than any threshold: they are compared only when a pattern names them.
Comparison compare_results(const Results& base, const Results& current, double threshold,
                           const std::vector<std::string>& metrics = {});
// Throughput and durations: "*tok_s*", "throughput*", "mfu", "*_s" (gen_s), "*_ms" (Google Benchmark time_ms,
// cpu_ms, step_ms), "fill_ms_*" (infilling's time per filled token), "*floor*" (a timing against the hardware floor).
bool is_timing_metric(const std::string& key);
// Does `key` ("dataset/metric") match one --metrics pattern (see compare_results)?
bool metric_matches(const std::string& key, const std::string& pattern);
// The table (columns sized to their contents; only WORSE / MISSING rows with only_failures) and a last line
// "PASS: …" or "FAIL: …".
std::string render_compare(const Comparison& c, double threshold, bool allow_missing, bool only_failures = false);
nlohmann::json compare_to_json(const Comparison& c, double threshold, bool allow_missing);

// Replicate groups in the tables (render_tables.cpp; the groups: reports/replicates.h). A group of ≥ 2 runs (one
// job under several seeds) is ONE row, "<name> (n seeds)", each cell the mean ± sd over the seeds that have the
// value; when some lack it, the mean over the others, marked "(k/n seeds)" and footnoted. A lone run keeps its row.
// "value ± error" as text rounded to the error's significance (the Particle Data Group's rule: two significant
// digits of the error when its leading digits are 100–354, else one; the value to the same decimal place):
// (327.6, 16.02) → ("328", "16"), (1.8141, 0.01523) → ("1.814", "0.015"), (105, 7.071) → ("105", "7").
std::pair<std::string, std::string> rounded_to_error(double value, double error);

struct PooledCell {
  double value = 0;
  std::optional<double> pm;  // a lone run: its stderr (when > 0); a group: the sd over seeds
  bool is_bound = false;     // any member's value is an upper bound
  int have = 0, of = 1;      // members with the value / members of the row; have = 0: an empty cell
  // "≤ 23.41 ± 0.12" with the renderer's marks, " (2/3 seeds)" appended when have < of; "" when have = 0.
  std::string text(const std::string& le, const std::string& pm_mark) const;
};
struct RunGroup;  // reports/replicates.h
// Group g's cell for the metric `key` ("<dataset>/<metric>"); `note` gets the footnote of a marked cell (the seeds
// without a value and what the cell shows instead), "" otherwise.
PooledCell pooled_cell(const RunGroup& g, const std::string& key, std::string* note = nullptr);
std::string seeds_label(const RunGroup& g);  // "<name> (n seeds)" for ≥ 2 runs, else the run's name
// What "±" means under a table with a row over seeds.
inline constexpr const char* kSeedsNote =
    "rows \"(n seeds)\": mean ± sd over seeds; other rows: ± the evaluation's stderr";
// headline_table with each group's rows pooled: table.rows[i] is the group's row (run = "<name> (n seeds)"; the
// protocol, windows and notes of its first member showing the group's metric, notes renumbered, plus one per marked
// cell; cells: that member's), cells[i] its pooled cells by dataset. Points into `r`: keep it alive.
struct PooledHeadline {
  Headline table;
  std::vector<std::map<std::string, PooledCell>> cells;
  bool any_group = false;  // a row pools ≥ 2 seeds: the renderers say what "±" means
};
PooledHeadline pooled_headline(const Results& r);

}  // namespace aobench
