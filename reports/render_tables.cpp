// Implements: the text renderers of the results schema (style.md §10 lesson 14: one schema, many
// renderers): Markdown summary (lm-eval make_table / llama-bench md), flat CSV and a LaTeX booktabs
// table. Tables are grouped by metric family (the part after the last '/'), rows = runs, columns = datasets.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

}  // namespace

std::string render_markdown(const Results& r) {
  std::ostringstream md;
  md << "# aobench results\n\n";
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
