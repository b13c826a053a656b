// Implements: the text renderers of the results schema (one schema, many
// renderers): Markdown summary (lm-eval make_table / llama-bench md), flat CSV and a LaTeX booktabs
// table. The metric tables come from reports/metric_tables.h (one per family, columns dataset × measure).
// Replicates (reports/replicates.h): the seeds of one job are ONE row, "<job> (n seeds)", cells mean ± sd over
// seeds (PooledCell); the run tables list every run. The CSV keeps one row per run and metric and adds, after
// them, one row per group and metric: run "<job> (n seeds)", value = mean, stderr = sd/√n over the seeds.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "core/config.h"
#include "metrics/conditionals.h"
#include "reports/metric_tables.h"
#include "reports/replicates.h"
#include "reports/results.h"

namespace aobench {
namespace {

std::string fmt(double v) {
  if (!std::isfinite(v)) return "nan";
  char buf[64];
  if (std::abs(v) >= 1e4)
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  else
    std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

const MetricValue* find_metric(const RunResults& run, const std::string& dataset, const std::string& metric) {
  auto it = run.metrics.find(dataset.empty() ? metric : dataset + "/" + metric);
  return it == run.metrics.end() ? nullptr : &it->second;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string tex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '_':
        out += "\\_";
        break;
      case '%':
        out += "\\%";
        break;
      case '&':
        out += "\\&";
        break;
      case '#':
        out += "\\#";
        break;
      case '$':
        out += "\\$";
        break;
      case '{':
        out += "\\{";
        break;
      case '}':
        out += "\\}";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The perplexities a headline row may show, by the eval mode that measured them (MetricParams::mode).
struct PerplexityKind {
  const char* mode;
  const char* name;  // for the footnote of a row that falls back to another kind
};
constexpr PerplexityKind kL2R{"l2r", "exact L2R perplexity (ppl)"};
constexpr PerplexityKind kAnyOrder{"random", "exact any-order perplexity (ppl_k<K>)"};
constexpr PerplexityKind kElbo{"elbo", "ELBO bound (ppl_elbo)"};

// A row's cell from its members' values in member order (nullptr: that member lacks the metric).
PooledCell pool(const std::vector<const MetricValue*>& values) {
  PooledCell c;
  c.of = static_cast<int>(values.size());
  std::vector<double> xs;
  const MetricValue* one = nullptr;
  for (const MetricValue* v : values) {
    // A seed that diverged (NaN) counts as missing; a lone run's value is shown whatever it is, as before.
    if (!v || (values.size() > 1 && !std::isfinite(v->value))) continue;
    xs.push_back(v->value);
    c.is_bound |= v->is_bound;
    one = v;
  }
  c.have = static_cast<int>(xs.size());
  if (xs.size() == 1) {  // one value: its own measurement error
    c.value = one->value;
    if (one->stderr_ && std::isfinite(*one->stderr_) && *one->stderr_ > 0) c.pm = *one->stderr_;
  } else if (xs.size() >= 2) {
    const Estimate e = estimate_over_replicates(xs, {});
    c.value = e.mean;
    c.pm = e.sd;
  }
  return c;
}

// The footnote of a cell some seeds lack: which, and what the cell shows instead; "" when every seed has it.
std::string missing_note(const RunGroup& g, const std::vector<const MetricValue*>& values, const PooledCell& c,
                         const std::string& what) {
  if (c.have == 0 || c.have == c.of) return "";
  std::vector<std::string> missing;
  for (size_t i = 0; i < values.size(); ++i)
    if (!values[i] || !std::isfinite(values[i]->value)) missing.push_back(g.runs[i]);
  return seeds_label(g) + ", " + what + ": " + std::to_string(c.have) + "/" + std::to_string(c.of) +
         " seeds, no value from " + joined(missing, ", ") + "; the cell is " +
         (c.have >= 2 ? "the mean ± sd over the others" : "the one seed's value ± its evaluation stderr");
}

// " [1, 3]": a Markdown cell's footnote numbers; "" without any.
std::string note_marks(const std::vector<int>& notes) {
  return notes.empty() ? "" : " [" + note_numbers(notes, ", ") + "]";
}

}  // namespace

std::string flops_text(double flops) {
  if (!(flops > 0)) return "";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", flops);
  return buf;
}

std::pair<std::string, std::string> rounded_to_error(double value, double error) {
  if (!std::isfinite(value) || !std::isfinite(error) || !(error > 0)) return {fmt(value), fmt(error)};
  // The Particle Data Group's rule: the error's three leading digits 100–354 keep two significant digits,
  // 355–949 one, 950–999 round up to 1000 (two); the value is rounded to the same decimal place.
  int exponent = static_cast<int>(std::floor(std::log10(error)));
  const double leading = std::floor(error / std::pow(10.0, exponent - 2));  // 100 … 999
  int sig = leading < 355 ? 2 : leading < 950 ? 1 : 2;
  if (leading >= 950) error = std::pow(10.0, ++exponent);
  const int decimals = sig - 1 - exponent;
  char v[64], e[64];
  if (decimals >= 0) {
    std::snprintf(v, sizeof(v), "%.*f", std::min(decimals, 15), value);
    std::snprintf(e, sizeof(e), "%.*f", std::min(decimals, 15), error);
  } else {  // an error ≥ 100: whole numbers rounded to its last significant place
    const double unit = std::pow(10.0, -decimals);
    std::snprintf(v, sizeof(v), "%.0f", std::round(value / unit) * unit);
    std::snprintf(e, sizeof(e), "%.0f", std::round(error / unit) * unit);
  }
  return {v, e};
}

std::string PooledCell::text(const std::string& le, const std::string& pm_mark) const {
  if (have == 0) return "";
  std::string s = (is_bound ? le : "");
  if (pm) {
    const auto [v, e] = rounded_to_error(value, *pm);
    s += v + pm_mark + e;
  } else {
    s += fmt(value);
  }
  if (have < of) s += " (" + std::to_string(have) + "/" + std::to_string(of) + " seeds)";
  return s;
}

std::string seeds_label(const RunGroup& g) {
  // A lone run keeps its name, so results without seeds render as they did before.
  return g.runs.size() < 2 ? g.name : g.name + " (" + std::to_string(g.runs.size()) + " seeds)";
}

PooledCell pooled_cell(const RunGroup& g, const std::string& key, std::string* note) {
  const auto [dataset, metric] = split_metric_key(key);
  std::vector<const MetricValue*> values;
  for (const RunResults* m : g.members) values.push_back(find_metric(*m, dataset, metric));
  const PooledCell c = pool(values);
  if (note) *note = missing_note(g, values, c, key);
  return c;
}

std::string HeadlineRow::label() const {
  if (notes.empty()) return run;
  std::vector<std::string> nums;
  for (const auto& n : notes) nums.push_back(std::to_string(n.first));
  return run + " [" + joined(nums, ", ") + "]";
}

namespace {

// One run's headline row with its notes numbered from `next_note` and naming the run as `name`; nullopt when the
// run has no perplexity.
std::optional<HeadlineRow> headline_row(const std::string& name, const RunResults& run, int& next_note) {
  int64_t max_k = 0;  // any-order: the largest K evaluated
  for (const auto& [key, m] : run.metrics)
    if (m.params.family == "ppl" && m.params.mode == kAnyOrder.mode) max_k = std::max(max_k, m.params.orders);
  auto measures = [&](const MetricParams& p, const PerplexityKind* kind) {
    return p.family == "ppl" && p.mode == kind->mode && (kind != &kAnyOrder || p.orders == max_k);
  };
  std::vector<const PerplexityKind*> prefs = {&kL2R, &kAnyOrder, &kElbo};
  if (run.paradigm == "any_order") prefs = {&kAnyOrder, &kL2R, &kElbo};
  if (run.paradigm == "masked_diffusion_encoder") prefs = {&kElbo, &kAnyOrder, &kL2R};
  const PerplexityKind* chosen = nullptr;
  std::string chosen_metric;
  for (const PerplexityKind* kind : prefs) {
    for (const auto& [key, m] : run.metrics)
      if (measures(m.params, kind)) {
        chosen = kind;
        chosen_metric = split_metric_key(key).second;
        break;
      }
    if (chosen) break;
  }
  if (!chosen) return std::nullopt;  // no perplexity evaluated: not in the headline
  HeadlineRow row;
  row.run = name;
  row.metric = chosen_metric;
  std::map<std::string, std::string> protocols;  // dataset → protocol without per-dataset parts
  std::vector<std::string> windows;
  bool subset = false;
  for (const auto& [key, m] : run.metrics) {
    if (!measures(m.params, chosen)) continue;
    const std::string dataset = split_metric_key(key).first;
    row.cells[dataset] = &m;
    std::vector<std::string> kept;
    std::string sub;
    for (const auto& part : protocol_parts(m.protocol)) {
      if (!window_subset(part).empty())
        sub = window_subset(part);
      else if (part.rfind("bytes pro-rated", 0) != 0)
        kept.push_back(part);
    }
    protocols[dataset] = joined(kept, "; ");
    subset |= !sub.empty();
    windows.push_back((dataset.empty() ? "" : dataset + " ") + (sub.empty() ? std::to_string(m.n) + " (all)" : sub));
  }
  const auto parts = protocol_parts(protocols.begin()->second);
  row.protocol = parts.empty() ? "" : parts.front();
  row.details = parts.size() > 1 ? joined({parts.begin() + 1, parts.end()}, "; ") : "";
  row.windows = subset ? "subset" : "all";
  if (chosen != prefs.front())
    row.notes.emplace_back(next_note++, name + " (" + run.paradigm + "): no " + prefs.front()->name +
                                            " evaluated; the row shows " + row.metric);
  if (subset) row.notes.emplace_back(next_note++, name + ": windows evaluated: " + joined(windows, ", "));
  for (const auto& [dataset, p] : protocols)
    if (p != protocols.begin()->second) row.notes.emplace_back(next_note++, name + " on " + dataset + ": " + p);
  return row;
}

// The rows' shared details: printed once when every row agrees.
void share_details(Headline& h) {
  if (!h.rows.empty() && std::all_of(h.rows.begin(), h.rows.end(),
                                     [&](const HeadlineRow& row) { return row.details == h.rows[0].details; }))
    h.shared_details = h.rows[0].details;
}

}  // namespace

Headline headline_table(const Results& r) {
  Headline h;
  std::set<std::string, NaturalLess> datasets;
  int next_note = 1;
  for (const auto& [name, run] : r.runs) {
    auto row = headline_row(name, run, next_note);
    if (!row) continue;
    for (const auto& [dataset, m] : row->cells) datasets.insert(dataset);
    h.rows.push_back(std::move(*row));
  }
  h.datasets.assign(datasets.begin(), datasets.end());
  share_details(h);
  return h;
}

PooledHeadline pooled_headline(const Results& r) {
  PooledHeadline out;
  Headline& h = out.table;
  std::set<std::string, NaturalLess> datasets;
  int next_note = 1;
  for (const RunGroup& g : replicate_groups(r)) {
    // Every member's row, its notes numbered later (once the group's row is chosen).
    std::vector<std::optional<HeadlineRow>> rows;
    std::map<std::string, int> votes;  // metric shown → members showing it
    for (const RunResults* m : g.members) {
      int unnumbered = 0;
      rows.push_back(headline_row(g.name, *m, unnumbered));
      if (rows.back()) ++votes[rows.back()->metric];
    }
    if (votes.empty()) continue;
    // The group shows the metric most of its seeds show (ties: the earliest member's); a member that fell back to
    // another perplexity lacks this one, and its cells are marked as missing rather than mixed in.
    const std::optional<HeadlineRow>* rep = nullptr;
    for (const auto& row : rows)
      if (row && (!rep || votes[row->metric] > votes[(*rep)->metric])) rep = &row;
    HeadlineRow row = **rep;
    row.run = seeds_label(g);
    for (auto& note : row.notes) note.first = next_note++;
    std::map<std::string, PooledCell> cells;
    std::set<std::string> row_datasets;
    for (const auto& m : rows)
      if (m && m->metric == row.metric)
        for (const auto& [dataset, v] : m->cells) row_datasets.insert(dataset);
    for (const auto& dataset : row_datasets) {
      std::vector<const MetricValue*> values;
      for (const auto& m : rows) {
        const bool has = m && m->metric == row.metric && m->cells.count(dataset);
        values.push_back(has ? m->cells.at(dataset) : nullptr);
      }
      cells[dataset] = pool(values);
      datasets.insert(dataset);
      const std::string note =
          missing_note(g, values, cells[dataset], (dataset.empty() ? "" : dataset + " ") + row.metric);
      if (!note.empty()) row.notes.emplace_back(next_note++, note);
    }
    out.any_group |= g.members.size() >= 2;
    h.rows.push_back(std::move(row));
    out.cells.push_back(std::move(cells));
  }
  h.datasets.assign(datasets.begin(), datasets.end());
  share_details(h);
  return out;
}

std::string render_headline_text(const Results& r) {
  const PooledHeadline pooled = pooled_headline(r);
  const Headline& h = pooled.table;
  if (h.rows.empty()) return "";
  std::vector<std::vector<std::string>> table = {{"run", "protocol", "windows"}};
  for (const auto& d : h.datasets) table[0].push_back(d.empty() ? "-" : d);
  for (size_t i = 0; i < h.rows.size(); ++i) {
    const HeadlineRow& row = h.rows[i];
    std::vector<std::string> line = {row.label(), row.protocol, row.windows};
    for (const auto& d : h.datasets) {
      auto it = pooled.cells[i].find(d);
      line.push_back(it == pooled.cells[i].end() ? "" : it->second.text("≤ ", " ± "));
    }
    table.push_back(line);
  }
  std::vector<size_t> width(table[0].size(), 0);
  for (const auto& line : table)
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], display_width(line[c]));
  std::ostringstream out;
  out << "perplexity (lower is better; ≤ marks an upper bound)\n";
  for (const auto& line : table) {
    for (size_t c = 0; c < line.size(); ++c) {
      const std::string pad(width[c] - display_width(line[c]), ' ');
      out << (c ? "  " : "") << (c < 3 ? line[c] + pad : pad + line[c]);
    }
    out << "\n";
  }
  if (!h.shared_details.empty()) out << "all rows: " << h.shared_details << "\n";
  if (pooled.any_group) out << kSeedsNote << "\n";
  for (const auto& row : h.rows) {
    if (h.shared_details.empty() && !row.details.empty()) out << row.run << ": " << row.details << "\n";
    for (const auto& [n, text] : row.notes) out << "[" << n << "] " << text << "\n";
  }
  return out.str();
}

std::string render_markdown(const Results& r) {
  std::ostringstream md;
  md << "# aobench results\n\n";
  const PooledHeadline pooled = pooled_headline(r);
  const Headline& h = pooled.table;
  if (!h.rows.empty()) {
    md << "## Headline: perplexity (lower is better; ≤ marks an upper bound)\n\n| run | protocol | windows |";
    for (const auto& d : h.datasets) md << " " << (d.empty() ? "-" : d) << " |";
    md << "\n|---|---|---|";
    for (size_t i = 0; i < h.datasets.size(); ++i) md << "---:|";
    md << "\n";
    for (size_t i = 0; i < h.rows.size(); ++i) {
      const HeadlineRow& row = h.rows[i];
      md << "| " << row.label() << " | " << row.protocol << " | " << row.windows << " |";
      for (const auto& d : h.datasets) {
        auto it = pooled.cells[i].find(d);
        md << " " << (it == pooled.cells[i].end() ? "" : it->second.text("≤ ", " ± ")) << " |";
      }
      md << "\n";
    }
    md << "\n";
    if (!h.shared_details.empty()) md << "All rows: " << h.shared_details << ".\n";
    if (pooled.any_group) md << "The " << kSeedsNote << ".\n";
    for (const auto& row : h.rows)
      if (h.shared_details.empty() && !row.details.empty()) md << "- " << row.run << ": " << row.details << "\n";
    for (const auto& row : h.rows)
      for (const auto& [n, text] : row.notes) md << "\n" << n << ". " << text;
    md << "\n\n## Runs\n\n";
  }
  md << "| run | plugin | flavour | paradigm | params | steps | tokens | train FLOPs |\n"
     << "|---|---|---|---|---:|---:|---:|---:|\n";
  for (const auto& [name, run] : r.runs)
    md << "| " << name << " | " << run.plugin << " | " << run.flavour << " | " << run.paradigm << " | " << run.params
       << " | " << run.steps << " | " << run.tokens << " | " << flops_text(run.train_flops) << " |\n";
  for (const MetricTable& t : metric_tables(r)) {
    md << "\n## " << t.title() << "\n\n| run |";
    for (const auto& c : t.columns) md << " " << c.text << note_marks(c.notes) << " |";
    md << "\n|---|";
    for (size_t i = 0; i < t.columns.size(); ++i) md << "---:|";
    md << "\n";
    for (const auto& row : t.rows) {
      md << "| " << row.label << " |";
      for (const auto& c : row.cells) md << " " << c.text << note_marks(c.notes) << " |";
      md << "\n";
    }
    for (const auto& line : t.shared) md << "\n" << line << ".\n";
    if (!t.notes.empty()) md << "\n";
    for (size_t n = 0; n < t.notes.size(); ++n) md << n + 1 << ". " << t.notes[n] << "\n";
  }
  // Finding 5 (AO-GPT paper): an any-order model must learn order-dependent conditionals, far more than
  // the order-invariant ones a masked-diffusion encoder needs.
  const bool any_order = std::any_of(r.runs.begin(), r.runs.end(), [](const auto& kv) {
    return kv.second.paradigm == "any_order" || kv.second.paradigm == "masked_diffusion_encoder";
  });
  if (any_order)
    md << "\n## Univariate conditionals over n positions (finding 5)\n\n"
       << "Order-invariant: n·2^(n−1) (target, context set); order-dependent: n!·Σ_{i<n} 1/i! (target, "
          "context sequence).\n\n"
       << conditionals_table_markdown() << "\n";
  md << "\n## Context\n\n";
  for (auto it = r.context.begin(); it != r.context.end(); ++it)
    md << "- " << it.key() << ": " << context_text(it.key(), it.value()) << "\n";
  return md.str();
}

std::string context_text(const std::string& key, const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (key == "experiment" && value.is_object() && value.contains("file") && value["file"].is_string()) {
    std::string text = value["file"].get<std::string>();
    if (value.contains("findings") && value["findings"].is_array() && !value["findings"].empty()) {
      std::vector<std::string> findings;
      for (const auto& f : value["findings"]) findings.push_back(f.is_string() ? f.get<std::string>() : f.dump());
      text += " (findings " + join_names(findings) + ")";
    }
    return text;
  }
  return value.dump();
}

std::string render_csv(const Results& r) {
  std::ostringstream csv;
  csv << "run,plugin,flavour,paradigm,dataset,metric,value,stderr,n,is_bound,higher_is_better,protocol\n";
  for (const auto& [name, run] : r.runs)
    for (const auto& [key, m] : run.metrics) {
      auto [dataset, metric] = split_metric_key(key);
      char value[64];
      std::snprintf(value, sizeof(value), "%.10g", m.value);
      std::string se;
      if (m.stderr_) {
        char b[64];
        std::snprintf(b, sizeof(b), "%.10g", *m.stderr_);
        se = b;
      }
      csv << csv_field(name) << "," << csv_field(run.plugin) << "," << csv_field(run.flavour) << ","
          << csv_field(run.paradigm) << "," << csv_field(dataset) << "," << csv_field(metric) << "," << value << ","
          << se << "," << m.n << "," << (m.is_bound ? "true" : "false") << ","
          << (m.higher_is_better ? "true" : "false") << "," << csv_field(m.protocol) << "\n";
    }
  // A replicate group of ≥ 2 seeds adds one row per metric after the runs' own: the mean over the seeds that have
  // it, stderr = sd/√k over those k seeds (n = k), so the columns keep their meaning.
  for (const RunGroup& g : replicate_groups(r)) {
    if (g.runs.size() < 2) continue;
    std::map<std::string, const MetricValue*> keys;  // key → the first member's value (flags, protocol)
    for (const RunResults* m : g.members)
      for (const auto& [key, v] : m->metrics) keys.emplace(key, &v);
    const RunResults& first = *g.members.front();
    for (const auto& [key, m] : keys) {
      std::vector<std::string> missing;
      const Estimate e = metric_over_seeds(g, key, &missing);
      if (e.n == 0) continue;
      auto [dataset, metric] = split_metric_key(key);
      char value[64], se[64] = "";
      std::snprintf(value, sizeof(value), "%.10g", e.mean);
      if (std::isfinite(e.se)) std::snprintf(se, sizeof(se), "%.10g", e.se);
      const std::string over = "over seeds: " + std::to_string(e.n) + "/" + std::to_string(g.runs.size()) +
                               (missing.empty() ? "" : " (no value from " + joined(missing, ", ") + ")") +
                               (e.n >= 2 ? ", stderr = sd/sqrt(n) over seeds" : ", stderr of the one seed") + "; ";
      csv << csv_field(seeds_label(g)) << "," << csv_field(first.plugin) << "," << csv_field(first.flavour) << ","
          << csv_field(first.paradigm) << "," << csv_field(dataset) << "," << csv_field(metric) << "," << value << ","
          << se << "," << e.n << "," << (m->is_bound ? "true" : "false") << ","
          << (m->higher_is_better ? "true" : "false") << "," << csv_field(over + m->protocol) << "\n";
    }
  }
  return csv.str();
}

std::string render_latex(const Results& r) {
  std::ostringstream tex;
  tex << "% aobench results (needs \\usepackage{booktabs}); $\\le$ marks upper bounds.\n";
  // Inside a caption: "±" and "≤" of the notes as math, "…" quotes as ``…''.
  auto tex_note = [](const std::string& s) {
    std::string out;
    bool open = false;
    for (char c : tex_escape(s)) out += c != '"' ? std::string(1, c) : (open = !open) ? "``" : "''";
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"±", "$\\pm$"}, {"≤", "$\\le$"}})
      for (size_t pos = 0; (pos = out.find(from, pos)) != std::string::npos; pos += to.size())
        out.replace(pos, from.size(), to);
    return out;
  };
  for (const MetricTable& t : metric_tables(r)) {
    auto marks = [](const std::vector<int>& notes) {
      return notes.empty() ? std::string() : "\\textsuperscript{" + note_numbers(notes, ",") + "}";
    };
    tex << "\\begin{table}[t]\n\\centering\n\\begin{tabular}{l" << std::string(t.columns.size(), 'r')
        << "}\n\\toprule\nrun";
    for (const auto& c : t.columns) tex << " & " << tex_escape(c.text) << marks(c.notes);
    tex << " \\\\\n\\midrule\n";
    for (const auto& row : t.rows) {
      tex << tex_escape(row.label);
      for (const auto& c : row.cells) tex << " & " << tex_note(c.text) << marks(c.notes);
      tex << " \\\\\n";
    }
    tex << "\\bottomrule\n\\end{tabular}\n\\caption{" << tex_escape(t.title()) << ".";
    for (const auto& line : t.shared) tex << " " << tex_note(line) << ".";
    for (size_t n = 0; n < t.notes.size(); ++n) tex << " (" << n + 1 << ") " << tex_note(t.notes[n]) << ".";
    tex << "}\n\\end{table}\n";
  }
  return tex.str();
}

}  // namespace aobench
