// Implements: per-finding verdicts of a report — one line per claim of the paper that an experiment tests,
// computed from results.json and the runs' curves alone, e.g. "AO-GPT's final validation loss above GPT's:
// yes (1/1 agree beyond noise)", with the claim and where the paper makes it, the statistic, the numbers, the
// protocol and the tier's deviations, in Markdown, HTML and LaTeX. Which findings apply comes from the
// experiment record `aobench run` writes (<out_dir>/experiment.json: file, tier, findings, deviations, seeds,
// the expected runs), carried in results.json as context.experiment. Runs are recognised by their config
// (plugin, train.order, train.ema, model.injection), never by job name, and a job's seeds are pooled
// (reports/replicates.h).
//
// Evidence, not point estimates: every comparison is a difference against its noise — Welch's t at 95 %
// (two-sided) over seeds, a single run's evaluation standard error standing in for the seed spread; one model
// measured twice (ensemble sizes, sampler settings) paired by seed, Student's t over the per-seed differences — and a
// rule is `yes` only when every comparison agrees with the claim beyond its noise, `no` when one contradicts
// it beyond its noise, `inconclusive` otherwise. A verdict whose runs sit on the unigram plateau (their final
// validation loss within kPlateauMargin of the data's unigram level) is `uninformative at this tier`, whichever
// way the numbers point; a run that diverged (NaN) or an expected run that is missing makes it `failed`.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/results.h"

namespace aobench {

enum class Outcome { yes, no, inconclusive, uninformative, failed, not_enough_data };
// "yes" | "no" | "inconclusive" | "uninformative at this tier" | "failed" | "not enough data"
const char* outcome_name(Outcome o);

// paper: a sentence or table of the paper, counted in the reproduction tally; analytic: exact arithmetic that
// cannot fail on data (finding 5), shown but not counted; extra: a check of our own (not the paper's numbers).
enum class RuleKind { paper, analytic, extra };

struct Verdict {
  std::string finding;  // "1", "8.1", "table-2", "gen-steps", ...
  std::string source;   // where the paper says it: "Finding 1", "Table 1", "Tables 4/5"; "" for extra rules
  std::string claim;    // the paper's claim, paraphrased (the repository holds no copy of the paper's text)
  std::string test;     // the comparison made, e.g. "AO-GPT's final validation loss above GPT's"
  RuleKind kind = RuleKind::paper;
  Outcome outcome = Outcome::not_enough_data;
  // Comparisons: with the claim / against it / within the noise / without a noise estimate (one run that recorded
  // no evaluation standard error): the last two make a verdict inconclusive.
  int agree = 0, against = 0, within_noise = 0, no_estimate = 0;
  std::string why;      // failed, not enough data, uninformative: the reason
  std::string numbers;  // the estimates behind it ("gpt 4.64 ± 0.01 (sd, n = 3), ao_gpt 7.09 ± 0.05 ...")
  int total() const { return agree + against + within_noise + no_estimate; }
  std::string line() const;  // "<test>: yes (3/3 agree beyond noise)", "<test>: uninformative at this tier (why)"
};

// The statistic every comparison uses, one sentence for reports and docs.
extern const char* const kVerdictStatistic;

// The findings a verdict exists for, in the paper's order.
std::vector<std::string> known_findings();
// One finding's verdict over `r`; ConfigError for a finding not in known_findings().
Verdict verdict_for(const std::string& finding, const Results& r);

// Reads <dir>/experiment.json (when present) into r.context["experiment"]; DataError when it is damaged.
void attach_experiment_record(Results& r, const std::string& dir);

// Outcomes of the paper rules (analytic and extra rules apart) of a set of verdicts.
struct Tally {
  int yes = 0, no = 0, inconclusive = 0, uninformative = 0, failed = 0, not_enough_data = 0;
  int analytic = 0, extra = 0;
  std::string text() const;  // "paper findings: 2 yes, 0 no, 1 inconclusive, 3 uninformative at this tier; ..."
};
Tally tally(const std::vector<Verdict>& verdicts);

// The verdict section of a report; every string is "" when r.context has no experiment record with findings.
// It ends with the plateau line of every run (reports/replicates.h plateau_text) and the adaLN gate sizes
// where the runs recorded them.
struct FindingsReport {
  std::vector<Verdict> verdicts;
  std::string markdown, html, latex;
};
FindingsReport render_findings(const Results& r);

}  // namespace aobench
