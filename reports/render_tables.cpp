// Implements: the text renderers of the results schema (one schema, many
// renderers): Markdown summary (lm-eval make_table / llama-bench md), flat CSV and a LaTeX booktabs
// table. Tables are grouped by metric family (the part after the last '/'), rows = runs, columns = datasets.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "core/config.h"
#include "metrics/conditionals.h"
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

// Datasets of a family in sweep order: generation protocols by their fields (top-p, temperature, steps), so
// "speed_s64" comes before "speed_s128"; then by name.
struct DatasetKey {
  double top_p = 0, temperature = 0;
  int64_t steps = 0;
  std::string name;
  bool operator<(const DatasetKey& o) const {
    return std::tie(top_p, temperature, steps, name) < std::tie(o.top_p, o.temperature, o.steps, o.name);
  }
};
DatasetKey dataset_key(const std::string& dataset, const MetricParams& p) {
  return {p.top_p.value_or(0), p.temperature.value_or(0), p.steps, dataset};
}

// One table per metric name (the part after the last '/'): its datasets in sweep order, protocol notes and
// the parameters of its metrics (those that do not vary by dataset: family, mode, orders, ensemble).
struct Family {
  std::vector<std::string> datasets;
  std::set<DatasetKey> keys;
  std::set<std::string> protocols;
  bool higher_is_better = false;
  MetricParams params;
};

std::map<std::string, Family> families(const Results& r) {
  std::map<std::string, Family> out;
  for (const auto& [run, rr] : r.runs)
    for (const auto& [key, m] : rr.metrics) {
      auto [dataset, metric] = split_metric_key(key);
      Family& f = out[metric];
      f.keys.insert(dataset_key(dataset, m.params));
      if (!m.protocol.empty()) f.protocols.insert((dataset.empty() ? "" : dataset + ": ") + m.protocol);
      f.higher_is_better = m.higher_is_better;
      f.params = m.params;
    }
  for (auto& [metric, f] : out) {
    std::set<std::string> seen;
    for (const auto& k : f.keys)
      if (seen.insert(k.name).second) f.datasets.push_back(k.name);
  }
  return out;
}

const MetricValue* find_metric(const RunResults& run, const std::string& dataset, const std::string& metric) {
  auto it = run.metrics.find(dataset.empty() ? metric : dataset + "/" + metric);
  return it == run.metrics.end() ? nullptr : &it->second;
}

// "≤ 23.41 ± 0.12" (the bound mark and the stderr only when they apply).
std::string cell(const MetricValue& m, const std::string& le, const std::string& pm) {
  std::string s = (m.is_bound ? le : "") + fmt(m.value);
  if (m.stderr_ && std::isfinite(*m.stderr_) && *m.stderr_ > 0) s += pm + fmt(*m.stderr_);
  return s;
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

// A context-order ensemble member over all positions: its table puts the ensemble sizes side by side.
// (Ensembles scored on a subset of positions keep a table of their own.)
bool is_ensemble_member(const MetricParams& p) { return p.mode == "ensemble" && p.ensemble > 0 && p.positions == 0; }

std::vector<std::string> split_protocol(const std::string& p) {
  std::vector<std::string> parts;
  for (size_t pos = 0; pos <= p.size();) {
    const size_t end = std::min(p.find("; ", pos), p.size());
    if (end > pos) parts.push_back(p.substr(pos, end - pos));
    pos = end + 2;
  }
  return parts;
}

// "16/86 windows" → "16 of 86": a window subset named in a protocol; "" when the whole file was evaluated.
std::string window_subset(const std::string& part) {
  const auto slash = part.find('/'), sp = part.find(" windows");
  if (slash == std::string::npos || sp == std::string::npos || sp < slash || sp + 8 != part.size()) return "";
  const std::string used = part.substr(0, slash), total = part.substr(slash + 1, sp - slash - 1);
  auto digits = [](const std::string& x) {
    return !x.empty() && std::all_of(x.begin(), x.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  return digits(used) && digits(total) ? used + " of " + total : "";
}

// The perplexities a headline row may show, by the eval mode that measured them (MetricParams::mode).
struct PerplexityKind {
  const char* mode;
  const char* name;  // for the footnote of a row that falls back to another kind
};
constexpr PerplexityKind kL2R{"l2r", "exact L2R perplexity (ppl)"};
constexpr PerplexityKind kAnyOrder{"random", "exact any-order perplexity (ppl_k<K>)"};
constexpr PerplexityKind kElbo{"elbo", "ELBO bound (ppl_elbo)"};

std::string joined(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : sep) + x;
  return out;
}

}  // namespace

std::string flops_text(double flops) {
  if (!(flops > 0)) return "";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", flops);
  return buf;
}

std::string HeadlineRow::label() const {
  if (notes.empty()) return run;
  std::vector<std::string> nums;
  for (const auto& n : notes) nums.push_back(std::to_string(n.first));
  return run + " [" + joined(nums, ", ") + "]";
}

Headline headline_table(const Results& r) {
  Headline h;
  std::set<std::string> datasets;
  int next_note = 1;
  for (const auto& [name, run] : r.runs) {
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
    if (!chosen) continue;  // no perplexity evaluated: not in the headline
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
      datasets.insert(dataset);
      std::vector<std::string> kept;
      std::string sub;
      for (const auto& part : split_protocol(m.protocol)) {
        if (!window_subset(part).empty())
          sub = window_subset(part);
        else if (part.rfind("bytes pro-rated", 0) != 0)
          kept.push_back(part);
      }
      protocols[dataset] = joined(kept, "; ");
      subset |= !sub.empty();
      windows.push_back((dataset.empty() ? "" : dataset + " ") + (sub.empty() ? std::to_string(m.n) + " (all)" : sub));
    }
    const auto parts = split_protocol(protocols.begin()->second);
    row.protocol = parts.empty() ? "" : parts.front();
    row.details = parts.size() > 1 ? joined({parts.begin() + 1, parts.end()}, "; ") : "";
    row.windows = subset ? "subset" : "all";
    if (chosen != prefs.front())
      row.notes.emplace_back(next_note++, name + " (" + run.paradigm + "): no " + prefs.front()->name +
                                              " evaluated; the row shows " + row.metric);
    if (subset) row.notes.emplace_back(next_note++, name + ": windows evaluated: " + joined(windows, ", "));
    for (const auto& [dataset, p] : protocols)
      if (p != protocols.begin()->second) row.notes.emplace_back(next_note++, name + " on " + dataset + ": " + p);
    h.rows.push_back(std::move(row));
  }
  h.datasets.assign(datasets.begin(), datasets.end());
  if (!h.rows.empty() && std::all_of(h.rows.begin(), h.rows.end(),
                                     [&](const HeadlineRow& row) { return row.details == h.rows[0].details; }))
    h.shared_details = h.rows[0].details;
  return h;
}

std::string render_headline_text(const Results& r) {
  const Headline h = headline_table(r);
  if (h.rows.empty()) return "";
  std::vector<std::vector<std::string>> table = {{"run", "protocol", "windows"}};
  for (const auto& d : h.datasets) table[0].push_back(d.empty() ? "-" : d);
  for (const auto& row : h.rows) {
    std::vector<std::string> line = {row.label(), row.protocol, row.windows};
    for (const auto& d : h.datasets) {
      auto it = row.cells.find(d);
      line.push_back(it == row.cells.end() ? "" : cell(*it->second, "<= ", " +- "));
    }
    table.push_back(line);
  }
  std::vector<size_t> width(table[0].size(), 0);
  for (const auto& line : table)
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  std::ostringstream out;
  out << "perplexity (lower is better; <= marks an upper bound)\n";
  for (const auto& line : table) {
    for (size_t c = 0; c < line.size(); ++c) {
      const std::string pad(width[c] - line[c].size(), ' ');
      out << (c ? "  " : "") << (c < 3 ? line[c] + pad : pad + line[c]);
    }
    out << "\n";
  }
  if (!h.shared_details.empty()) out << "all rows: " << h.shared_details << "\n";
  for (const auto& row : h.rows) {
    if (h.shared_details.empty() && !row.details.empty()) out << row.run << ": " << row.details << "\n";
    for (const auto& [n, text] : row.notes) out << "[" << n << "] " << text << "\n";
  }
  return out.str();
}

std::string render_markdown(const Results& r) {
  std::ostringstream md;
  md << "# aobench results\n\n";
  const Headline h = headline_table(r);
  if (!h.rows.empty()) {
    md << "## Headline: perplexity (lower is better; ≤ marks an upper bound)\n\n| run | protocol | windows |";
    for (const auto& d : h.datasets) md << " " << (d.empty() ? "-" : d) << " |";
    md << "\n|---|---|---|";
    for (size_t i = 0; i < h.datasets.size(); ++i) md << "---:|";
    md << "\n";
    for (const auto& row : h.rows) {
      md << "| " << row.label() << " | " << row.protocol << " | " << row.windows << " |";
      for (const auto& d : h.datasets) {
        auto it = row.cells.find(d);
        md << " " << (it == row.cells.end() ? "" : cell(*it->second, "≤ ", " ± ")) << " |";
      }
      md << "\n";
    }
    md << "\n";
    if (!h.shared_details.empty()) md << "All rows: " << h.shared_details << ".\n";
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
  const auto fams = families(r);
  // Ensemble sizes of one quantity side by side: family (ppl, nll, …) → M → (metric name, its table).
  std::map<std::string, std::map<int64_t, std::pair<std::string, const Family*>>> ensembles;
  for (const auto& [metric, fam] : fams)
    if (is_ensemble_member(fam.params)) ensembles[fam.params.family][fam.params.ensemble] = {metric, &fam};
  std::ostringstream ens;  // rendered after the single-size tables
  for (const auto& [base, members] : ensembles) {
    const bool higher = members.begin()->second.second->higher_is_better;
    std::set<std::string> datasets, protocols;
    for (const auto& [m, member] : members) {
      const Family* fam = member.second;
      datasets.insert(fam->datasets.begin(), fam->datasets.end());
      protocols.insert(fam->protocols.begin(), fam->protocols.end());
    }
    ens << "\n## " << base << ", context-order ensembles of M members"
        << (higher ? " (higher is better)" : " (lower is better)") << "\n\n| run |";
    for (const auto& d : datasets)
      for (const auto& [m, member] : members) ens << " " << (d.empty() ? "" : d + " ") << "M=" << m << " |";
    ens << "\n|---|";
    for (size_t i = 0; i < datasets.size() * members.size(); ++i) ens << "---:|";
    ens << "\n";
    for (const auto& [name, run] : r.runs) {
      bool any = false;
      std::ostringstream row;
      row << "| " << name << " |";
      for (const auto& d : datasets)
        for (const auto& [m, member] : members) {
          const MetricValue* v = find_metric(run, d, member.first);
          any |= v != nullptr;
          row << " " << (v ? cell(*v, "≤ ", " ± ") : "") << " |";
        }
      if (any) ens << row.str() << "\n";
    }
    ens << "\n";
    for (const auto& p : protocols) ens << "- " << p << "\n";
  }
  for (const auto& [metric, fam] : fams) {
    if (is_ensemble_member(fam.params)) continue;  // in its ensemble table (ens)
    md << "\n## " << metric << (fam.higher_is_better ? " (higher is better)" : " (lower is better)") << "\n\n";
    md << "| run |";
    for (const auto& d : fam.datasets) md << " " << (d.empty() ? "-" : d) << " |";
    md << "\n|---|";
    for (size_t i = 0; i < fam.datasets.size(); ++i) md << "---:|";
    md << "\n";
    for (const auto& [name, run] : r.runs) {
      bool any = false;
      std::ostringstream row;
      row << "| " << name << " |";
      for (const auto& d : fam.datasets) {
        const MetricValue* m = find_metric(run, d, metric);
        any |= m != nullptr;
        row << " " << (m ? cell(*m, "≤ ", " ± ") : "") << " |";
      }
      if (any) md << row.str() << "\n";
    }
    if (!fam.protocols.empty()) {
      md << "\n";
      for (const auto& p : fam.protocols) md << "- " << p << "\n";
    }
  }
  md << ens.str();
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
  return csv.str();
}

std::string render_latex(const Results& r) {
  std::ostringstream tex;
  tex << "% aobench results (needs \\usepackage{booktabs}); $\\le$ marks upper bounds.\n";
  for (const auto& [metric, fam] : families(r)) {
    tex << "\\begin{table}[t]\n\\centering\n\\begin{tabular}{l" << std::string(fam.datasets.size(), 'r')
        << "}\n\\toprule\nrun";
    for (const auto& d : fam.datasets) tex << " & " << tex_escape(d.empty() ? "-" : d);
    tex << " \\\\\n\\midrule\n";
    for (const auto& [name, run] : r.runs) {
      bool any = false;
      std::ostringstream row;
      row << tex_escape(name);
      for (const auto& d : fam.datasets) {
        const MetricValue* m = find_metric(run, d, metric);
        any |= m != nullptr;
        row << " & " << (m ? cell(*m, "$\\le$ ", " $\\pm$ ") : "");
      }
      if (any) tex << row.str() << " \\\\\n";
    }
    tex << "\\bottomrule\n\\end{tabular}\n\\caption{" << tex_escape(metric)
        << (fam.higher_is_better ? " (higher is better)" : " (lower is better)") << ".}\n\\end{table}\n";
  }
  return tex.str();
}

}  // namespace aobench
