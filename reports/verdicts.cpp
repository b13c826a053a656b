// Implements: per-finding verdicts (see verdicts.h). Each finding is one small function over Results that
// counts the comparisons agreeing with the paper's claim; "yes" needs every comparison to agree, and too few
// comparisons (a missing run or metric) is "not enough data", never a pass.
#include "reports/verdicts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "core/config.h"
#include "core/errors.h"
#include "metrics/conditionals.h"

namespace aobench {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

// --- what a run is, read from its config -------------------------------------------------------------------
std::string cfg_str(const RunResults& run, const char* section, const char* key) {
  const json& c = run.config;
  if (c.contains(section) && c[section].is_object() && c[section].contains(key) && c[section][key].is_string())
    return c[section][key].get<std::string>();
  return "";
}
std::string plugin_of(const RunResults& run) {
  return run.plugin.empty() ? cfg_str(run, "model", "plugin") : run.plugin;
}
std::string order_kind(const RunResults& run) {
  const json& c = run.config;
  if (c.contains("train") && c["train"].contains("order") && c["train"]["order"].is_object())
    return c["train"]["order"].value("kind", "");
  return "";
}
// Fraction of left-to-right orders in training: 1 for l2r, 0 for random, p_l2r for a mixture; −1 otherwise.
double l2r_ratio(const RunResults& run) {
  const std::string kind = order_kind(run);
  if (kind == "l2r") return 1.0;
  if (kind == "random") return 0.0;
  if (kind == "mixture") return run.config["train"]["order"].value("p_l2r", -1.0);
  return -1.0;
}
double ema_of(const RunResults& run) {
  const json& c = run.config;
  return c.contains("train") && c["train"].contains("ema") && c["train"]["ema"].is_number()
             ? c["train"]["ema"].get<double>()
             : 0.0;
}

using RunRef = std::pair<std::string, const RunResults*>;
std::vector<RunRef> runs_where(const Results& r, const std::function<bool(const RunResults&)>& pred) {
  std::vector<RunRef> out;
  for (const auto& [name, run] : r.runs)
    if (pred(run)) out.emplace_back(name, &run);
  return out;
}

double final_val_loss(const RunResults& run) {
  auto it = run.curves.find("loss/val");
  return it == run.curves.end() || it->second.empty() ? std::nan("") : it->second.back().second;
}
const MetricValue* metric(const RunResults& run, const std::string& key) {
  auto it = run.metrics.find(key);
  return it == run.metrics.end() || !std::isfinite(it->second.value) ? nullptr : &it->second;
}
// Datasets with an "<dataset>/<name>" metric in the run.
std::vector<std::string> datasets_with(const RunResults& run, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& [key, m] : run.metrics)
    if (split_metric_key(key).second == name && std::isfinite(m.value)) out.push_back(split_metric_key(key).first);
  return out;
}
// The any-order perplexity family of a run: "ppl_k<K>" with the largest K.
std::string any_order_ppl(const RunResults& run) {
  std::string best;
  long best_k = -1;
  for (const auto& [key, m] : run.metrics) {
    const std::string name = split_metric_key(key).second;
    if (name.rfind("ppl_k", 0) != 0) continue;
    const long k = std::strtol(name.c_str() + 5, nullptr, 10);
    if (k > best_k) best_k = k, best = name;
  }
  return best;
}

Verdict make(const std::string& finding, const std::string& claim, const std::string& test, int hits, int total,
             int needed, const std::string& numbers) {
  Verdict v{finding, claim, test, Outcome::not_enough_data, hits, total, numbers};
  if (total >= needed) v.outcome = hits == total ? Outcome::yes : Outcome::no;
  return v;
}

// "a < b" over runs' final validation loss, counted.
void count_below(double a, double b, int& hits, int& total) {
  if (!std::isfinite(a) || !std::isfinite(b)) return;
  ++total;
  hits += a < b;
}

// --- the findings ---------------------------------------------------------------------------------------------
Verdict finding_1(const Results& r) {
  const auto gpt = runs_where(r, [](const RunResults& x) { return plugin_of(x) == "gpt"; });
  const auto ao = runs_where(r, [](const RunResults& x) { return plugin_of(x) == "ao_gpt"; });
  int hits = 0, total = 0;
  std::string numbers;
  if (gpt.size() == 1 && ao.size() == 1) {
    const auto g = gpt[0].second->curves.find("loss/val"), a = ao[0].second->curves.find("loss/val");
    if (g != gpt[0].second->curves.end() && a != ao[0].second->curves.end()) {
      std::map<double, double> at_step(g->second.begin(), g->second.end());
      for (const auto& [step, loss] : a->second)
        if (auto it = at_step.find(step); it != at_step.end()) count_below(it->second, loss, hits, total);
    }
    numbers = "final validation loss (nats): " + gpt[0].first + " " + num(final_val_loss(*gpt[0].second)) + ", " +
              ao[0].first + " " + num(final_val_loss(*ao[0].second));
  } else {
    numbers = "needs exactly one gpt and one ao_gpt run (found " + std::to_string(gpt.size()) + " and " +
              std::to_string(ao.size()) + ")";
  }
  return make("1",
              "Any-order autoregression is harder to learn than left-to-right: at equal steps and tokens the "
              "AO-GPT validation loss stays above the L2R GPT's.",
              "AO-GPT validation loss above GPT's at every evaluated step", hits, total, 2, numbers);
}

// Runs of one order kind (any plugin), by final validation loss.
std::vector<RunRef> order_runs(const Results& r, const std::string& kind) {
  return runs_where(r, [&](const RunResults& x) { return order_kind(x) == kind && std::isfinite(final_val_loss(x)); });
}

Verdict finding_2_1(const Results& r) {
  const auto l2r = order_runs(r, "l2r"), fixed = order_runs(r, "fixed_random");
  int hits = 0, total = 0;
  std::string numbers = "final validation loss (nats, each in its own training order):";
  if (l2r.size() == 1) {
    numbers += " " + l2r[0].first + " " + num(final_val_loss(*l2r[0].second));
    for (const auto& [name, run] : fixed) {
      count_below(final_val_loss(*l2r[0].second), final_val_loss(*run), hits, total);
      numbers += ", " + name + " " + num(final_val_loss(*run));
    }
  }
  return make("2.1",
              "Left-to-right is the easiest order to learn: a model trained on one fixed random order ends at "
              "a higher loss than the same model trained left to right.",
              "every fixed-random-order run ends above the L2R run", hits, total, 1, numbers);
}

Verdict finding_2_2(const Results& r) {
  const auto l2r = order_runs(r, "l2r"), fixed = order_runs(r, "fixed_random"), block = order_runs(r, "blockwise");
  int hits = 0, total = 0;
  std::string numbers = "final validation loss (nats):";
  if (l2r.size() == 1 && !fixed.empty()) {
    double fixed_best = INFINITY;
    for (const auto& f : fixed) fixed_best = std::min(fixed_best, final_val_loss(*f.second));
    numbers +=
        " " + l2r[0].first + " " + num(final_val_loss(*l2r[0].second)) + ", best fixed random " + num(fixed_best);
    for (const auto& [name, run] : block) {
      count_below(final_val_loss(*l2r[0].second), final_val_loss(*run), hits, total);
      count_below(final_val_loss(*run), fixed_best, hits, total);
      numbers += ", " + name + " " + num(final_val_loss(*run));
    }
  }
  return make("2.2",
              "Block-wise orders (left to right between blocks, random inside) lie between left-to-right and "
              "a fixed random order.",
              "every block-wise run ends above L2R and below the best fixed random order", hits, total, 2, numbers);
}

// Runs trained with a 0 / p L2R mixture (any-order models), keyed by the ratio.
std::map<double, RunRef> mixing_runs(const Results& r) {
  std::map<double, RunRef> out;
  for (const auto& [name, run] : r.runs) {
    const double ratio = l2r_ratio(run);
    if (ratio >= 0 && ratio < 1 && plugin_of(run) != "gpt") out.emplace(ratio, RunRef{name, &run});
  }
  return out;
}

Verdict finding_3_1(const Results& r) {
  const auto runs = mixing_runs(r);
  int hits = 0, total = 0;
  std::string numbers = "L2R perplexity:";
  auto zero = runs.find(0.0);
  if (zero != runs.end())
    for (const auto& [ratio, ref] : runs) {
      if (ratio == 0.0) continue;
      for (const auto& ds : datasets_with(*zero->second.second, "ppl")) {
        const MetricValue* a = metric(*ref.second, ds + "/ppl");
        const MetricValue* b = metric(*zero->second.second, ds + "/ppl");
        if (!a || !b) continue;
        ++total;
        hits += a->value < b->value;
        numbers += " " + ds + ": p=" + num(ratio) + " " + num(a->value) + " vs p=0 " + num(b->value) + ";";
      }
    }
  return make("3.1",
              "Mixing left-to-right orders into any-order training (10 % in AO-GPT) lowers the model's "
              "left-to-right perplexity.",
              "every L2R-mixing ratio > 0 has a lower L2R perplexity than ratio 0 on every dataset", hits, total, 1,
              numbers);
}

Verdict finding_3_2(const Results& r) {
  const auto runs = mixing_runs(r);
  int hits = 0, total = 0;
  std::string numbers = "any-order perplexity:";
  auto zero = runs.find(0.0);
  if (zero != runs.end()) {
    const std::string fam = any_order_ppl(*zero->second.second);
    for (const auto& [ratio, ref] : runs) {
      if (ratio == 0.0 || ratio > 0.1 + 1e-9) continue;  // the paper's small ratio, not the ablation's larger ones
      for (const auto& ds : datasets_with(*zero->second.second, fam)) {
        const MetricValue* a = metric(*ref.second, ds + "/" + fam);
        const MetricValue* b = metric(*zero->second.second, ds + "/" + fam);
        if (!a || !b) continue;
        ++total;
        hits += a->value <= 1.02 * b->value;
        numbers += " " + ds + ": p=" + num(ratio) + " " + num(a->value) + " vs p=0 " + num(b->value) + ";";
      }
    }
  }
  return make("3.2", "A small L2R ratio costs (almost) nothing in any-order quality.",
              "any-order perplexity with ratio ≤ 10 % within 2 % of (or below) ratio 0's on every dataset", hits, total,
              1, numbers);
}

Verdict injection(const Results& r) {
  std::map<std::string, RunRef> by_variant;
  for (const auto& [name, run] : r.runs)
    if (plugin_of(run) == "ao_gpt" && ema_of(run) == 0 && std::isfinite(final_val_loss(run))) {
      const std::string v = cfg_str(run, "model", "injection");
      by_variant.emplace(v.empty() ? "adaln" : v, RunRef{name, &run});
    }
  int hits = 0, total = 0;
  std::string numbers = "final validation loss (nats):";
  auto adaln = by_variant.find("adaln");
  for (const auto& [variant, ref] : by_variant) numbers += " " + variant + " " + num(final_val_loss(*ref.second)) + ";";
  if (adaln != by_variant.end())
    for (const auto& [variant, ref] : by_variant)
      if (variant != "adaln")
        count_below(final_val_loss(*adaln->second.second), final_val_loss(*ref.second), hits, total);
  return make("arch-injection",
              "Injecting the target position through adaLN works better than adding it at the "
              "input, in every block, or per block.",
              "the adaLN injection ends below every other injection variant", hits, total, 1, numbers);
}

Verdict adaln_ema(const Results& r) {
  const auto sigma = runs_where(r, [](const RunResults& x) { return plugin_of(x) == "sigma_gpt" && ema_of(x) == 0; });
  const auto ada = runs_where(r, [](const RunResults& x) {
    return plugin_of(x) == "ao_gpt" && ema_of(x) == 0 && cfg_str(x, "model", "injection") != "input" &&
           cfg_str(x, "model", "injection") != "every_block" && cfg_str(x, "model", "injection") != "per_block";
  });
  const auto ada_ema = runs_where(r, [](const RunResults& x) { return plugin_of(x) == "ao_gpt" && ema_of(x) > 0; });
  int hits = 0, total = 0;
  std::string numbers = "final validation loss (nats):";
  if (sigma.size() == 1 && ada.size() == 1 && ada_ema.size() == 1) {
    count_below(final_val_loss(*ada[0].second), final_val_loss(*sigma[0].second), hits, total);
    count_below(final_val_loss(*ada_ema[0].second), final_val_loss(*ada[0].second), hits, total);
    for (const auto* set : {&sigma, &ada, &ada_ema})
      numbers += " " + (*set)[0].first + " " + num(final_val_loss(*(*set)[0].second)) + ";";
  } else {
    numbers = "needs one σ-GPT, one AO-GPT without EMA and one with EMA";
  }
  return make("arch-adaln-ema", "Each architectural step lowers the any-order loss: σ-GPT → +adaLN → +adaLN+EMA.",
              "σ-GPT > +adaLN > +adaLN+EMA in final validation loss", hits, total, 2, numbers);
}

Verdict ema_decay(const Results& r) {
  const auto none = runs_where(r, [](const RunResults& x) { return plugin_of(x) == "ao_gpt" && ema_of(x) == 0; });
  const auto with = runs_where(r, [](const RunResults& x) { return plugin_of(x) == "ao_gpt" && ema_of(x) > 0; });
  int hits = 0, total = 0;
  std::string numbers = "final validation loss (nats, EMA weights):";
  if (none.size() == 1) {
    numbers += " no EMA " + num(final_val_loss(*none[0].second)) + ";";
    for (const auto& [name, run] : with) {
      count_below(final_val_loss(*run), final_val_loss(*none[0].second), hits, total);
      numbers += " " + num(ema_of(*run)) + " " + num(final_val_loss(*run)) + ";";
    }
  }
  return make("arch-ema-decay",
              "An exponential moving average of the weights (0.9999 in AO-GPT) lowers the "
              "evaluated loss.",
              "every EMA decay ends below no EMA", hits, total, 1, numbers);
}

Verdict counting(const Results&) {
  // Exact counts (metrics/conditionals.h): the order-dependent count must exceed the order-invariant one from
  // n = 3 on, by a ratio that grows with n.
  int hits = 0, total = 0;
  double last_ratio = 0;
  std::string numbers = "log10 ratio:";
  for (int64_t n : {3, 4, 5, 6, 7, 8, 16, 64, 1024}) {
    const double ratio = order_dependent_conditionals(n).log10() - order_invariant_conditionals(n).log10();
    ++total;
    hits += ratio > 0 && ratio > last_ratio;
    last_ratio = ratio;
    numbers += " n=" + std::to_string(n) + " " + num(ratio) + ";";
  }
  return make("5",
              "An any-order model must represent far more univariate conditionals than a masked-diffusion model "
              "(context sequences vs context sets), which is why any-order training is harder.",
              "order-dependent count n!·Σ1/i! above the order-invariant n·2^(n−1), by a ratio growing with n "
              "(n = 3 … 1024)",
              hits, total, 1, numbers);
}

// Ensemble perplexities "<ds>/ppl_m<M>" (no position subsampling) of a run: dataset → (M → ppl).
std::map<std::string, std::map<int, double>> ensembles(const RunResults& run) {
  std::map<std::string, std::map<int, double>> out;
  for (const auto& [key, m] : run.metrics) {
    const auto [ds, name] = split_metric_key(key);
    if (name.rfind("ppl_m", 0) != 0 || name.find("_p") != std::string::npos || !std::isfinite(m.value)) continue;
    out[ds][std::atoi(name.c_str() + 5)] = m.value;
  }
  return out;
}

Verdict finding_6(const Results& r) {
  int hits = 0, total = 0;
  std::string numbers;
  for (const auto& [name, run] : r.runs)
    for (const auto& [ds, by_m] : ensembles(run)) {
      numbers += name + " " + ds + ":";
      double prev = NAN;
      for (const auto& [m, ppl] : by_m) {
        numbers += " M=" + std::to_string(m) + " " + num(ppl);
        if (std::isfinite(prev)) count_below(ppl, prev, hits, total);
        prev = ppl;
      }
      numbers += "; ";
    }
  return make("6", "Context-order ensembles lower AO-GPT's perplexity, the more members M the lower.",
              "ensemble perplexity falls at every larger M", hits, total, 1, numbers);
}

Verdict zero_shot(const Results& r) {
  const auto ao = runs_where(r, [](const RunResults& x) { return plugin_of(x) == "ao_gpt"; });
  const auto mdm = runs_where(r, [](const RunResults& x) { return plugin_of(x) == "sedd" || plugin_of(x) == "radd"; });
  int hits = 0, total = 0;
  std::string numbers;
  if (ao.size() == 1 && !mdm.empty()) {
    const auto ens = ensembles(*ao[0].second);
    const std::string fam = any_order_ppl(*ao[0].second);
    std::set<std::string> datasets;
    for (const auto& [d, m] : ens) datasets.insert(d);
    if (!fam.empty())
      for (const auto& d : datasets_with(*ao[0].second, fam)) datasets.insert(d);
    for (const auto& ds : datasets) {
      // AO-GPT's best estimate on the dataset: the largest ensemble, else exact any-order.
      double mine = NAN;
      std::string how;
      if (auto it = ens.find(ds); it != ens.end())
        mine = it->second.rbegin()->second, how = "M=" + std::to_string(it->second.rbegin()->first);
      else if (const MetricValue* m = metric(*ao[0].second, ds + "/" + fam))
        mine = m->value, how = fam;
      double best = INFINITY;
      for (const auto& [name, run] : mdm)
        if (const MetricValue* m = metric(*run, ds + "/ppl_elbo")) best = std::min(best, m->value);
      if (!std::isfinite(mine) || !std::isfinite(best)) continue;
      ++total;
      hits += mine <= best;
      numbers += ds + ": AO-GPT (" + how + ") " + num(mine) + " vs best MDM ≤ " + num(best) + "; ";
    }
  }
  return make("zero-shot",
              "AO-GPT with context-order ensembles is competitive with masked-diffusion models: its "
              "zero-shot perplexity is at or below the SEDD/RADD ELBO bounds.",
              "AO-GPT's perplexity (largest M) at or below the best SEDD/RADD ELBO bound on every dataset", hits, total,
              1, numbers);
}

// Seconds per generation "speed_s<steps>/gen_s" of a run: steps → seconds.
std::map<int, double> gen_seconds(const RunResults& run) {
  std::map<int, double> out;
  for (const auto& [key, m] : run.metrics) {
    const auto [ds, name] = split_metric_key(key);
    if (name == "gen_s" && ds.rfind("speed_s", 0) == 0 && std::isfinite(m.value))
      out[std::atoi(ds.c_str() + 7)] = m.value;
  }
  return out;
}

Verdict finding_7(const Results& r) {
  const auto ao = runs_where(r, [](const RunResults& x) { return plugin_of(x) == "ao_gpt"; });
  const auto sedd = runs_where(r, [](const RunResults& x) { return plugin_of(x) == "sedd"; });
  int hits = 0, total = 0;
  std::string numbers = "seconds per generation:";
  if (ao.size() == 1 && sedd.size() == 1) {
    const auto a = gen_seconds(*ao[0].second), s = gen_seconds(*sedd[0].second);
    for (const auto& [steps, t] : a)
      if (auto it = s.find(steps); it != s.end()) {
        count_below(t, it->second, hits, total);
        numbers += " " + std::to_string(steps) + " steps: AO-GPT " + num(t) + " vs SEDD " + num(it->second) + " (" +
                   num(it->second / t) + "×);";
      }
  }
  return make("7", "AO-GPT's KV-cache sampler generates faster than SEDD at the same number of steps.",
              "AO-GPT faster than SEDD at every timed step count", hits, total, 2, numbers);
}

// Generation perplexities "gen_p<top_p>_t<T>_s<steps>/genppl" of a run: (top_p, T) → (steps → genppl).
std::map<std::pair<double, double>, std::map<int, double>> gen_ppls(const RunResults& run) {
  std::map<std::pair<double, double>, std::map<int, double>> out;
  for (const auto& [key, m] : run.metrics) {
    const auto [ds, name] = split_metric_key(key);
    double p = 0, t = 0;
    int steps = 0;
    if (name != "genppl" || std::sscanf(ds.c_str(), "gen_p%lf_t%lf_s%d", &p, &t, &steps) != 3 ||
        !std::isfinite(m.value))
      continue;
    out[{p, t}][steps] = m.value;
  }
  return out;
}

Verdict finding_8_1(const Results& r) {
  const auto ao = runs_where(r, [](const RunResults& x) { return plugin_of(x) == "ao_gpt"; });
  int hits = 0, total = 0;
  std::string numbers = "AO-GPT generation perplexity:";
  if (ao.size() == 1)
    for (const auto& [setting, by_steps] : gen_ppls(*ao[0].second)) {
      numbers += " top-p " + num(setting.first) + ", T " + num(setting.second) + ":";
      double prev = NAN;
      for (const auto& [steps, ppl] : by_steps) {
        numbers += " " + std::to_string(steps) + "→" + num(ppl);
        if (std::isfinite(prev)) count_below(ppl, prev, hits, total);
        prev = ppl;
      }
      numbers += ";";
    }
  return make("8.1", "More sampling steps give AO-GPT samples of lower generation perplexity.",
              "AO-GPT generation perplexity falls at every larger step count", hits, total, 1, numbers);
}

Verdict finding_8_2(const Results& r) {
  const auto ao = runs_where(r, [](const RunResults& x) { return plugin_of(x) == "ao_gpt"; });
  int hits = 0, total = 0;
  std::string numbers = "AO-GPT generation perplexity by (top-p, T):";
  if (ao.size() == 1) {
    // Settings ordered from the least to the most truncated: (top-p, T) descending.
    const auto ppls = gen_ppls(*ao[0].second);
    std::vector<std::pair<double, double>> settings;
    for (const auto& [s, v] : ppls) settings.push_back(s);
    std::sort(settings.begin(), settings.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second > b.second;
    });
    for (size_t i = 1; i < settings.size(); ++i)
      for (const auto& [steps, ppl] : ppls.at(settings[i]))
        if (auto it = ppls.at(settings[i - 1]).find(steps); it != ppls.at(settings[i - 1]).end()) {
          count_below(ppl, it->second, hits, total);
          numbers += " " + std::to_string(steps) + " steps (" + num(settings[i].first) + ", " +
                     num(settings[i].second) + ") " + num(ppl) + " vs (" + num(settings[i - 1].first) + ", " +
                     num(settings[i - 1].second) + ") " + num(it->second) + ";";
        }
  }
  return make("8.2", "Nucleus sampling and a lower temperature lower AO-GPT's generation perplexity.",
              "generation perplexity falls with each lower (top-p, temperature) at equal steps", hits, total, 1,
              numbers);
}

using VerdictFn = Verdict (*)(const Results&);
const std::vector<std::pair<std::string, VerdictFn>>& table() {
  static const std::vector<std::pair<std::string, VerdictFn>> t = {{"1", finding_1},
                                                                   {"2.1", finding_2_1},
                                                                   {"2.2", finding_2_2},
                                                                   {"3.1", finding_3_1},
                                                                   {"3.2", finding_3_2},
                                                                   {"arch-injection", injection},
                                                                   {"arch-adaln-ema", adaln_ema},
                                                                   {"arch-ema-decay", ema_decay},
                                                                   {"5", counting},
                                                                   {"6", finding_6},
                                                                   {"zero-shot", zero_shot},
                                                                   {"7", finding_7},
                                                                   {"8.1", finding_8_1},
                                                                   {"8.2", finding_8_2}};
  return t;
}

std::string html_esc(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}
std::string tex_esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string("&%$#_{}").find(c) != std::string::npos)
      out += std::string("\\") + c;
    else if (c == '~')
      out += "\\textasciitilde{}";
    else if (c == '^')
      out += "\\textasciicircum{}";
    else if (c == '\\')
      out += "\\textbackslash{}";
    else
      out += c;
  }
  // The claims' symbols, so the table compiles under pdflatex without Unicode set-up.
  for (const auto& [utf8, tex] : std::vector<std::pair<std::string, std::string>>{{"Σ", "\\ensuremath{\\Sigma}"},
                                                                                  {"σ", "\\ensuremath{\\sigma}"},
                                                                                  {"·", "\\ensuremath{\\cdot}"},
                                                                                  {"−", "-"},
                                                                                  {"…", "\\ldots{}"},
                                                                                  {"≤", "\\ensuremath{\\le}"},
                                                                                  {"×", "\\ensuremath{\\times}"},
                                                                                  {"→", "\\ensuremath{\\to}"},
                                                                                  {"—", "---"}})
    for (size_t at = out.find(utf8); at != std::string::npos; at = out.find(utf8, at + tex.size()))
      out.replace(at, utf8.size(), tex);
  return out;
}

// The protocol beside every verdict: tier, and per run its steps, tokens and parameters.
std::string protocol_line(const Results& r, const json& exp) {
  std::ostringstream p;
  p << "tier " << exp.value("tier", std::string("(as written)")) << " of " << exp.value("file", std::string("?"));
  for (const auto& [name, run] : r.runs)
    p << "; " << name << ": " << run.steps << " steps, " << run.tokens << " tokens, " << run.params << " params";
  return p.str();
}

}  // namespace

const char* outcome_name(Outcome o) { return o == Outcome::yes ? "yes" : o == Outcome::no ? "no" : "not enough data"; }

std::string Verdict::line() const {
  return test + ": " + outcome_name(outcome) + " (" + std::to_string(hits) + "/" + std::to_string(total) + ")";
}

std::vector<std::string> known_findings() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : table()) names.push_back(name);
  return names;
}

Verdict verdict_for(const std::string& finding, const Results& r) {
  for (const auto& [name, fn] : table())
    if (name == finding) return fn(r);
  std::string names;
  for (const auto& n : known_findings()) names += (names.empty() ? "" : ", ") + n;
  throw ConfigError("no verdict for finding '" + finding + "'", "findings: " + names);
}

void attach_experiment_record(Results& r, const std::string& dir) {
  const fs::path p = fs::path(dir) / "experiment.json";
  if (!fs::exists(p)) return;
  json record;
  try {
    record = load_json_file(p.string());
  } catch (const std::exception& e) {
    throw DataError(p.string() + " is damaged: " + e.what(), "re-run `aobench run` to rewrite it, or remove it");
  }
  if (!record.is_object()) throw DataError(p.string() + " must be a JSON object (written by `aobench run`)");
  r.context["experiment"] = record;
}

FindingsReport render_findings(const Results& r) {
  FindingsReport out;
  if (!r.context.contains("experiment") || !r.context["experiment"].is_object()) return out;
  const json& exp = r.context["experiment"];
  if (!exp.contains("findings") || !exp["findings"].is_array() || exp["findings"].empty()) return out;
  for (const auto& f : exp["findings"])
    if (f.is_string()) out.verdicts.push_back(verdict_for(f.get<std::string>(), r));
  const std::string protocol = protocol_line(r, exp);
  const std::string deviations = exp.value("deviations", std::string("none stated"));
  std::ostringstream md, html, tex;
  md << "## Findings: reproduced at this scale?\n\n"
     << "| finding | verdict (computed from the data) | paper's claim | numbers |\n|---|---|---|---|\n";
  html << "<h2>Findings: reproduced at this scale?</h2>\n<table><tr><th>finding</th><th>verdict (computed from the "
          "data)</th><th>paper's claim</th><th>numbers</th></tr>\n";
  tex << "% Findings: verdicts computed from the data (aobench report).\n\\begin{table}[t]\n\\centering\\small\n"
      << "\\begin{tabular}{lp{0.3\\linewidth}p{0.3\\linewidth}p{0.25\\linewidth}}\n\\toprule\n"
      << "finding & verdict & claim & numbers \\\\\n\\midrule\n";
  for (const auto& v : out.verdicts) {
    md << "| " << v.finding << " | **" << outcome_name(v.outcome) << "** — " << v.line() << " | " << v.claim << " | "
       << v.numbers << " |\n";
    html << "<tr><td>" << html_esc(v.finding) << "</td><td><b>" << outcome_name(v.outcome) << "</b> — "
         << html_esc(v.line()) << "</td><td>" << html_esc(v.claim) << "</td><td>" << html_esc(v.numbers)
         << "</td></tr>\n";
    tex << tex_esc(v.finding) << " & \\textbf{" << outcome_name(v.outcome) << "}: " << tex_esc(v.line()) << " & "
        << tex_esc(v.claim) << " & " << tex_esc(v.numbers) << " \\\\\n";
  }
  md << "\n- Protocol: " << protocol << "\n- Deviations from the paper: " << deviations << "\n\n";
  html << "</table>\n<ul class=proto><li>Protocol: " << html_esc(protocol)
       << "</li><li>Deviations from the paper: " << html_esc(deviations) << "</li></ul>\n";
  tex << "\\bottomrule\n\\end{tabular}\n\\caption{Findings at tier " << tex_esc(exp.value("tier", std::string("?")))
      << ". Protocol: " << tex_esc(protocol) << ". Deviations: " << tex_esc(deviations) << ".}\n\\end{table}\n\n";
  out.markdown = md.str();
  out.html = html.str();
  out.latex = tex.str();
  return out;
}

}  // namespace aobench
