// Implements: the text renderers of the results schema (style.md §10 lesson 14: one schema, many
// renderers): Markdown summary (lm-eval make_table / llama-bench md), flat CSV and a LaTeX booktabs
// table. Tables are grouped by metric family (the part after the last '/'), rows = runs, columns = datasets.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "metrics/conditionals.h"
#include "reports/results.h"

namespace aobench {
namespace {

std::string fmt(double v) {
  if (!std::isfinite(v)) return "nan";
  char buf[64];
  if (std::abs(v) >= 1e4) std::snprintf(buf, sizeof(buf), "%.0f", v);
  else std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

// Numbers inside names compare by value ("speed_s64" < "speed_s128", "gen_p0.7" < "gen_p0.95"), so the
// generation sweeps come out in steps order; the rest compares character by character.
struct NaturalLess {
  bool operator()(const std::string& a, const std::string& b) const {
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
      if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
        char *ea = nullptr, *eb = nullptr;
        const double x = std::strtod(a.c_str() + i, &ea), y = std::strtod(b.c_str() + j, &eb);
        if (x != y) return x < y;
        i = static_cast<size_t>(ea - a.c_str());
        j = static_cast<size_t>(eb - b.c_str());
      } else {
        if (a[i] != b[j]) return a[i] < b[j];
        ++i, ++j;
      }
    }
    return a.size() - i < b.size() - j || (a.size() - i == b.size() - j && a < b);
  }
};

// family → (datasets, runs) present, in sorted order.
struct Family {
  std::set<std::string, NaturalLess> datasets;
  std::set<std::string> protocols;
  bool higher_is_better = false;
};

std::map<std::string, Family> families(const Results& r) {
  std::map<std::string, Family> out;
  for (const auto& [run, rr] : r.runs)
    for (const auto& [key, m] : rr.metrics) {
      auto [dataset, metric] = split_metric_key(key);
      Family& f = out[metric];
      f.datasets.insert(dataset);
      if (!m.protocol.empty()) f.protocols.insert((dataset.empty() ? "" : dataset + ": ") + m.protocol);
      f.higher_is_better = m.higher_is_better;
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
      case '_': out += "\\_"; break;
      case '%': out += "\\%"; break;
      case '&': out += "\\&"; break;
      case '#': out += "\\#"; break;
      case '$': out += "\\$"; break;
      case '{': out += "\\{"; break;
      case '}': out += "\\}"; break;
      default: out += c;
    }
  }
  return out;
}

// "ppl_m8" → ("ppl", 8): a context-order ensemble member of `ppl`; anything else → ("", 0).
std::pair<std::string, int64_t> ensemble_member(const std::string& metric) {
  const auto pos = metric.rfind("_m");
  if (pos == std::string::npos || pos == 0 || pos + 2 >= metric.size()) return {"", 0};
  for (size_t i = pos + 2; i < metric.size(); ++i)
    if (metric[i] < '0' || metric[i] > '9') return {"", 0};
  return {metric.substr(0, pos), std::stoll(metric.substr(pos + 2))};
}

// "ppl_k4" → 4; any other family → 0.
int64_t orders_of(const std::string& metric) {
  if (metric.rfind("ppl_k", 0) != 0 || metric.size() == 5 || metric.size() > 14) return 0;
  for (size_t i = 5; i < metric.size(); ++i)
    if (metric[i] < '0' || metric[i] > '9') return 0;
  return std::stoll(metric.substr(5));
}

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

std::string family_name(const std::string& metric) {
  if (metric == "ppl") return "exact L2R perplexity (ppl)";
  if (metric == "ppl_elbo") return "ELBO bound (ppl_elbo)";
  if (metric == "ppl_k") return "exact any-order perplexity (ppl_k<K>)";
  return metric;
}

std::string joined(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : sep) + x;
  return out;
}

}  // namespace

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
    std::set<std::string> families;
    int64_t max_k = 0;
    for (const auto& [key, m] : run.metrics) {
      const std::string metric = split_metric_key(key).second;
      families.insert(metric);
      max_k = std::max(max_k, orders_of(metric));
    }
    const std::string any_order = max_k > 0 ? "ppl_k" + std::to_string(max_k) : "ppl_k";
    std::vector<std::string> prefs = {"ppl", any_order, "ppl_elbo"};
    if (run.paradigm == "any_order") prefs = {any_order, "ppl", "ppl_elbo"};
    if (run.paradigm == "masked_diffusion_encoder") prefs = {"ppl_elbo", any_order, "ppl"};
    const auto chosen =
        std::find_if(prefs.begin(), prefs.end(), [&](const std::string& f) { return families.count(f) > 0; });
    if (chosen == prefs.end()) continue;   // no perplexity evaluated: not in the headline
    HeadlineRow row;
    row.run = name;
    row.metric = *chosen;
    std::map<std::string, std::string> protocols;   // dataset → protocol without per-dataset parts
    std::vector<std::string> windows;
    bool subset = false;
    for (const auto& [key, m] : run.metrics) {
      const auto [dataset, metric] = split_metric_key(key);
      if (metric != row.metric) continue;
      row.cells[dataset] = &m;
      datasets.insert(dataset);
      std::vector<std::string> kept;
      std::string sub;
      for (const auto& part : split_protocol(m.protocol)) {
        if (!window_subset(part).empty()) sub = window_subset(part);
        else if (part.rfind("bytes pro-rated", 0) != 0) kept.push_back(part);
      }
      protocols[dataset] = joined(kept, "; ");
      subset |= !sub.empty();
      windows.push_back((dataset.empty() ? "" : dataset + " ") + (sub.empty() ? std::to_string(m.n) + " (all)" : sub));
    }
    const auto parts = split_protocol(protocols.begin()->second);
    row.protocol = parts.empty() ? "" : parts.front();
    row.details = parts.size() > 1 ? joined({parts.begin() + 1, parts.end()}, "; ") : "";
    row.windows = subset ? "subset" : "all";
    if (chosen != prefs.begin())
      row.notes.emplace_back(next_note++, name + " (" + run.paradigm + "): no " + family_name(prefs.front()) +
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
  md << "| run | plugin | flavour | paradigm | params | steps | tokens |\n|---|---|---|---|---:|---:|---:|\n";
  for (const auto& [name, run] : r.runs)
    md << "| " << name << " | " << run.plugin << " | " << run.flavour << " | " << run.paradigm << " | "
       << run.params << " | " << run.steps << " | " << run.tokens << " |\n";
  const auto fams = families(r);
  // Ensemble sizes of one base metric side by side: base → M → member family.
  std::map<std::string, std::map<int64_t, const Family*>> ensembles;
  for (const auto& [metric, fam] : fams) {
    auto [base, m] = ensemble_member(metric);
    if (m > 0) ensembles[base][m] = &fam;
  }
  std::ostringstream ens;  // rendered after the single-size tables
  for (const auto& [base, members] : ensembles) {
    const bool higher = members.begin()->second->higher_is_better;
    std::set<std::string> datasets, protocols;
    for (const auto& [m, fam] : members) {
      datasets.insert(fam->datasets.begin(), fam->datasets.end());
      protocols.insert(fam->protocols.begin(), fam->protocols.end());
    }
    ens << "\n## " << base << ", context-order ensembles of M members"
        << (higher ? " (higher is better)" : " (lower is better)") << "\n\n| run |";
    for (const auto& d : datasets)
      for (const auto& [m, fam] : members) ens << " " << (d.empty() ? "" : d + " ") << "M=" << m << " |";
    ens << "\n|---|";
    for (size_t i = 0; i < datasets.size() * members.size(); ++i) ens << "---:|";
    ens << "\n";
    for (const auto& [name, run] : r.runs) {
      bool any = false;
      std::ostringstream row;
      row << "| " << name << " |";
      for (const auto& d : datasets)
        for (const auto& [m, fam] : members) {
          const MetricValue* v = find_metric(run, d, base + "_m" + std::to_string(m));
          any |= v != nullptr;
          row << " " << (v ? cell(*v, "≤ ", " ± ") : "") << " |";
        }
      if (any) ens << row.str() << "\n";
    }
    ens << "\n";
    for (const auto& p : protocols) ens << "- " << p << "\n";
  }
  for (const auto& [metric, fam] : fams) {
    if (ensemble_member(metric).second > 0) continue;  // in its ensemble table (ens)
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
    md << "- " << it.key() << ": " << (it.value().is_string() ? it.value().get<std::string>() : it.value().dump())
       << "\n";
  return md.str();
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
          << csv_field(run.paradigm) << "," << csv_field(dataset) << "," << csv_field(metric) << "," << value
          << "," << se << "," << m.n << "," << (m.is_bound ? "true" : "false") << ","
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
