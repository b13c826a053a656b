// Implements: the metric tables of the report (reports/metric_tables.h), from one Results to MetricTable values
// that the Markdown, HTML and LaTeX renderers only print.
#include "reports/metric_tables.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "reports/replicates.h"

namespace aobench {

std::string joined(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : sep) + x;
  return out;
}

std::string note_numbers(const std::vector<int>& notes, const std::string& sep) {
  std::vector<std::string> numbers;
  for (int n : notes) numbers.push_back(std::to_string(n));
  return joined(numbers, sep);
}

std::vector<std::string> protocol_parts(const std::string& protocol) {
  std::vector<std::string> parts;
  for (size_t pos = 0; pos <= protocol.size();) {
    const size_t end = std::min(protocol.find("; ", pos), protocol.size());
    if (end > pos) parts.push_back(protocol.substr(pos, end - pos));
    pos = end + 2;
  }
  return parts;
}

std::string window_subset(const std::string& part) {
  const auto slash = part.find('/'), sp = part.find(" windows");
  if (slash == std::string::npos || sp == std::string::npos || sp < slash || sp + 8 != part.size()) return "";
  const std::string used = part.substr(0, slash), total = part.substr(slash + 1, sp - slash - 1);
  auto digits = [](const std::string& x) {
    return !x.empty() && std::all_of(x.begin(), x.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  return digits(used) && digits(total) ? used + " of " + total : "";
}

std::string MetricTable::title() const {
  return family + (dataset.empty() ? "" : " on " + dataset) +
         (higher_is_better ? " (higher is better)" : " (lower is better)");
}

namespace {

// What a column measures within its family, in the order the columns show it: L2R, any-order K (ascending),
// ensemble M (ascending; subsets of positions after the full ones), the ELBO bound, anything else.
struct Measure {
  int rank = 4;
  int64_t a = 0, b = 0;
  std::string label;
};
Measure measure_of(const std::string& family, const std::string& metric, const MetricParams& p) {
  if (p.mode == "l2r") return {0, 0, 0, "L2R"};
  if (p.mode == "random") return {1, p.orders, 0, "any-order K=" + std::to_string(p.orders)};
  if (p.mode == "ensemble")
    return {2, p.positions, p.ensemble,
            "ensemble M=" + std::to_string(p.ensemble) +
                (p.positions > 0 ? " (" + std::to_string(p.positions) + " positions)" : "")};
  if (p.mode == "elbo") return {3, 0, 0, "ELBO bound"};
  return {4, 0, 0, metric == family ? "" : metric};
}

struct Column {
  std::string dataset, metric;  // the key "<dataset>/<metric>"
  Measure measure;
  double top_p = 0, temperature = 0;  // generation datasets in sweep order: top-p, temperature, steps
  int64_t steps = 0;
  bool operator<(const Column& o) const {
    if (std::tie(top_p, temperature, steps) != std::tie(o.top_p, o.temperature, o.steps))
      return std::tie(top_p, temperature, steps) < std::tie(o.top_p, o.temperature, o.steps);
    if (dataset != o.dataset) return NaturalLess{}(dataset, o.dataset);
    return std::tie(measure.rank, measure.a, measure.b, metric) <
           std::tie(o.measure.rank, o.measure.a, o.measure.b, o.metric);
  }
};

struct Family {
  std::set<Column> columns;
  bool higher_is_better = false;
};

// Report order of the families: likelihoods, generation quality, timing, the rest by name.
int family_rank(const std::string& family) {
  static const std::vector<std::string> order = {"ppl",
                                                 "nll",
                                                 "bpb",
                                                 "genppl",
                                                 "genppl_corpus",
                                                 "entropy",
                                                 "gen_s",
                                                 "gen_tok_s",
                                                 "eval_tok_s",
                                                 "infill_ppl",
                                                 "infill_nll",
                                                 "infill_fill_acc",
                                                 "infill_fill_exact",
                                                 "infill_fill_judge_ppl",
                                                 "infill_fill_ms"};
  const auto it = std::find(order.begin(), order.end(), family);
  return static_cast<int>(it - order.begin());
}

// The parts of `v` in first-seen order, without repeats.
void add_unique(std::vector<std::string>& v, const std::string& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}
bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// A row of a table: a group, and the tail its cells' keys end with ("" for a plain family; an infilling route such
// as "k4", "prefix" or "greedy", whose columns' metrics end with "_").
struct RowSpec {
  std::string label;
  const RunGroup* group;
  std::string tail;
};

// One family's table: cells pooled over each group's seeds, protocol parts attached where they hold.
MetricTable family_table(const std::string& name, const Family& fam, const std::vector<RowSpec>& specs) {
  MetricTable t;
  t.family = name;
  t.higher_is_better = fam.higher_is_better;
  const std::vector<Column> columns(fam.columns.begin(), fam.columns.end());
  std::set<std::string> datasets, labels;
  for (const Column& c : columns) datasets.insert(c.dataset), labels.insert(c.measure.label);
  const bool by_measure = datasets.size() == 1 && !columns.front().dataset.empty() && !labels.count("");
  if (by_measure) t.dataset = columns.front().dataset;
  for (const Column& c : columns) {
    std::string header = by_measure ? c.measure.label : c.dataset.empty() ? "-" : c.dataset;
    if (!by_measure && !c.measure.label.empty()) header += " " + c.measure.label;
    t.columns.push_back({header, {}});
  }

  // Each cell's protocol parts (its members', in order) and its own notes (a seed without a value).
  struct Pending {
    std::vector<std::string> parts, own;
  };
  std::vector<std::vector<Pending>> pending;
  bool pooled = false;
  for (const RowSpec& spec : specs) {
    const RunGroup& g = *spec.group;
    MetricTable::Row row{spec.label, {}};
    std::vector<Pending> cells;
    bool any = false;
    for (const Column& c : columns) {
      const std::string key = (c.dataset.empty() ? c.metric : c.dataset + "/" + c.metric) + spec.tail;
      std::string missing;
      const PooledCell pc = pooled_cell(g, key, &missing);
      Pending p;
      std::vector<std::string> subsets;
      if (pc.have > 0)
        for (const RunResults* m : g.members) {
          const auto it = m->metrics.find(key);
          if (it == m->metrics.end()) continue;
          for (const auto& part : protocol_parts(it->second.protocol))
            if (part.rfind("wall ", 0) != 0)  // eval_tok_s of older files: the wall time, tokens / throughput
              add_unique(window_subset(part).empty() ? p.parts : subsets, part);
        }
      if (!missing.empty()) p.own.push_back(missing);
      std::string text = pc.text("≤ ", " ± ");
      if (!subsets.empty()) text += " (" + joined(subsets, ", ") + ")";
      any |= pc.have > 0;
      row.cells.push_back({text, {}});
      cells.push_back(std::move(p));
    }
    if (!any) continue;
    pooled |= g.runs.size() >= 2;
    t.rows.push_back(std::move(row));
    pending.push_back(std::move(cells));
  }

  // Parts shared by every cell with a value, then by every such cell of a column; the rest stay with their cells.
  auto shared_by = [&](auto&& in_scope) {
    std::vector<std::string> common;
    bool first = true;
    for (size_t r = 0; r < t.rows.size(); ++r)
      for (size_t c = 0; c < columns.size(); ++c) {
        if (!in_scope(c) || t.rows[r].cells[c].text.empty()) continue;
        if (first) {
          common = pending[r][c].parts, first = false;
          continue;
        }
        std::vector<std::string> kept;
        for (const auto& part : common)
          if (contains(pending[r][c].parts, part)) kept.push_back(part);
        common = kept;
      }
    return common;
  };
  const std::vector<std::string> everywhere = shared_by([](size_t) { return true; });
  auto note_number = [&](const std::string& text) {
    const auto it = std::find(t.notes.begin(), t.notes.end(), text);
    if (it != t.notes.end()) return static_cast<int>(it - t.notes.begin()) + 1;
    t.notes.push_back(text);
    return static_cast<int>(t.notes.size());
  };
  std::vector<std::vector<std::string>> per_column(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) {
    for (const auto& part : shared_by([&](size_t k) { return k == c; }))
      if (!contains(everywhere, part)) per_column[c].push_back(part);
    if (!per_column[c].empty()) t.columns[c].notes.push_back(note_number(joined(per_column[c], "; ")));
  }
  for (size_t r = 0; r < t.rows.size(); ++r)
    for (size_t c = 0; c < columns.size(); ++c) {
      if (t.rows[r].cells[c].text.empty()) continue;
      std::vector<std::string> own_parts;
      for (const auto& part : pending[r][c].parts)
        if (!contains(everywhere, part) && !contains(per_column[c], part)) own_parts.push_back(part);
      auto& notes = t.rows[r].cells[c].notes;
      if (!own_parts.empty()) notes.push_back(note_number(joined(own_parts, "; ")));
      for (const auto& own : pending[r][c].own) notes.push_back(note_number(own));
    }
  if (!everywhere.empty()) t.shared.push_back("All cells: " + joined(everywhere, "; "));
  if (pooled) t.shared.push_back(std::string("The ") + kSeedsNote);
  return t;
}

}  // namespace

bool parse_infill(const std::string& metric, const std::string& family, InfillKey& k) {
  // family "infill_ppl" → metrics "ppl_infill_…"; "infill_fill_acc" → "fill_acc_…"
  if (family.rfind("infill_", 0) != 0) return false;
  const std::string quantity = family.substr(7);
  const std::string head = quantity.rfind("fill_", 0) == 0 ? quantity + "_" : quantity + "_infill_";
  if (metric.rfind(head, 0) != 0) return false;
  const std::string rest = metric.substr(head.size());  // "middle_r50_k4"
  const size_t a = rest.find("_r"), b = a == std::string::npos ? a : rest.find('_', a + 2);
  if (b == std::string::npos) return false;
  k.place = rest.substr(0, a);
  k.percent = std::atoll(rest.substr(a + 2, b - a - 2).c_str());
  k.route = rest.substr(b + 1);
  k.column = metric.substr(0, head.size() + b + 1);
  return true;
}

int place_rank(const std::string& place) {
  static const std::vector<std::string> order = {"start", "middle", "end", "spans", "random"};
  return static_cast<int>(std::find(order.begin(), order.end(), place) - order.begin());
}

std::vector<MetricTable> metric_tables(const Results& r) {
  std::map<std::string, Family> families;
  std::map<std::string, std::set<std::string, NaturalLess>> routes;  // infilling family → its routes
  std::map<std::string, std::string> truth_run;  // infilling family → the first run with the judge's truth row
  for (const auto& [run, rr] : r.runs)
    for (const auto& [key, m] : rr.metrics) {
      const auto [dataset, metric] = split_metric_key(key);
      const std::string name = m.params.family.empty() ? metric : m.params.family;
      Family& f = families[name];
      f.higher_is_better = m.higher_is_better;
      InfillKey ik;
      if (!parse_infill(metric, name, ik)) {
        f.columns.insert({dataset, metric, measure_of(name, metric, m.params), m.params.top_p.value_or(0),
                          m.params.temperature.value_or(0), m.params.steps});
        continue;
      }
      // Infilling: columns place × ratio, a row per group and route.
      f.columns.insert({dataset,
                        ik.column,
                        {place_rank(ik.place), ik.percent, 0, ik.place + " " + std::to_string(ik.percent) + "%"}});
      routes[name].insert(ik.route);
      if (ik.route == "truth") truth_run.emplace(name, run);
    }
  std::vector<std::pair<std::string, const Family*>> ordered;
  for (const auto& [name, f] : families) ordered.emplace_back(name, &f);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return family_rank(a.first) < family_rank(b.first); });
  const auto groups = replicate_groups(r);
  std::vector<MetricTable> tables;
  for (const auto& [name, f] : ordered) {
    std::vector<RowSpec> specs;
    const auto it = routes.find(name);
    for (const RunGroup& g : groups)
      if (it == routes.end())
        specs.push_back({seeds_label(g), &g, ""});
      else
        for (const std::string& route : it->second)
          if (route != "truth")
            specs.push_back({seeds_label(g) + " · " + route, &g, route});
          else if (contains(g.runs, truth_run[name]))  // the judge on the true tokens: the same for every run
            specs.push_back({"the true tokens", &g, route});
    MetricTable t = family_table(name, *f, specs);
    if (!t.rows.empty()) tables.push_back(std::move(t));
  }
  return tables;
}

}  // namespace aobench
