// Implements: per-finding verdicts of a report — one line per paper finding an experiment tests, computed
// from results.json and the runs' loss curves alone, e.g. "AO-GPT validation loss above GPT's at every
// evaluated step: yes (12/12)", with the paper's claim, the protocol (tier, steps, tokens, parameters) and
// the deviations beside it, in Markdown, HTML and LaTeX. Which findings apply comes from the experiment
// record `aobench run` writes (<out_dir>/experiment.json: file, tier, description, findings, deviations),
// carried in results.json as context.experiment. Runs are recognised by their config (plugin, train.order,
// train.ema, model.injection), never by job name.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/results.h"

namespace aobench {

enum class Outcome { yes, no, not_enough_data };
const char* outcome_name(Outcome o);  // "yes" | "no" | "not enough data"

struct Verdict {
  std::string finding;  // "1", "2.1", "zero-shot", ...
  std::string claim;    // the paper's claim, one sentence
  std::string test;     // what was checked, e.g. "AO-GPT validation loss above GPT's at every evaluated step"
  Outcome outcome = Outcome::not_enough_data;
  int hits = 0, total = 0;   // comparisons that agree with the claim / made
  std::string numbers;       // the values behind it ("final val loss: gpt 5.52, ao_gpt 7.59")
  std::string line() const;  // "<test>: yes (12/12)"
};

// The findings a verdict exists for, in the paper's order.
std::vector<std::string> known_findings();
// One finding's verdict over `r`; ConfigError for a finding not in known_findings().
Verdict verdict_for(const std::string& finding, const Results& r);

// Reads <dir>/experiment.json (when present) into r.context["experiment"]; DataError when it is damaged.
void attach_experiment_record(Results& r, const std::string& dir);

// The verdict section of a report; every string is "" when r.context has no experiment record with findings.
struct FindingsReport {
  std::vector<Verdict> verdicts;
  std::string markdown, html, latex;
};
// The figures the verdicts refer to (loss against tokens, perplexity against M, time against steps) are
// drawn by render_plots for every report.
FindingsReport render_findings(const Results& r);

}  // namespace aobench
