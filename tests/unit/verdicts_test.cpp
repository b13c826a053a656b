// Implements: tests of the per-finding verdicts (reports/verdicts.h) and their statistic (metrics/stats.h) on
// synthetic results: every outcome of the rules reachable — yes, no, inconclusive (a margin within the noise),
// uninformative (runs on the unigram plateau), failed (a NaN run, a missing seed) and not enough data — and the
// rendered section (Markdown, HTML, LaTeX) with claim, statistic, tally, plateau lines, protocol and deviations.
#include <cmath>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "metrics/stats.h"
#include "reports/replicates.h"
#include "reports/verdicts.h"

namespace aobench {
namespace {

using nlohmann::json;

constexpr double kUnigram = 7.68;  // the Wikipedia pack's unigram level; the plateau ends below 6.912

RunResults run(const std::string& plugin, const json& train = json::object(), const json& model = json::object()) {
  RunResults r;
  r.plugin = plugin;
  r.config = {{"model", model}, {"train", train}};
  r.config["model"]["plugin"] = plugin;
  if (!r.config["train"].contains("seed")) r.config["train"]["seed"] = 1337;
  r.steps = 100;
  r.tokens = 100 * 4096;
  r.params = 1000;
  r.curves["unigram/nats"] = {{0, kUnigram}};
  return r;
}
json order(const std::string& kind, double p = 0.1) { return {{"order", {{"kind", kind}, {"p_l2r", p}}}}; }
json with(json train, const std::string& key, const json& value) {
  train[key] = value;
  return train;
}

// Seed k of a job as `aobench run` makes it: train.seed + k, the data order pinned to seed 0's.
RunResults seed(RunResults r, int k) {
  if (k > 0) {
    r.config["data"]["seed"] = r.config["train"]["seed"];
    r.config["train"]["seed"] = r.config["train"]["seed"].get<int64_t>() + k;
  }
  return r;
}
// A job of several seeds whose final validation losses are `finals` (the curve: 8.0 at step 50, then the final).
void add_job(Results& res, const std::string& name, const RunResults& proto, const std::vector<double>& finals) {
  for (size_t k = 0; k < finals.size(); ++k) {
    RunResults r = seed(proto, int(k));
    r.curves["loss/val"] = {{50, 8.0}, {100, finals[k]}};
    res.runs[k == 0 ? name : name + "_seed" + std::to_string(k)] = r;
  }
}
// One run with a validation loss and its standard error over evaluation batches.
void add_single(Results& res, const std::string& name, RunResults r, double final_loss, double se) {
  r.curves["loss/val"] = {{50, 8.0}, {100, final_loss}};
  if (std::isfinite(se)) r.curves["loss/val_se"] = {{50, 0.1}, {100, se}};
  res.runs[name] = r;
}
void set_metric(RunResults& r, const std::string& key, double v, double se = NAN) {
  r.metrics[key] = {v, std::isfinite(se) ? std::optional<double>(se) : std::nullopt, 8, false, false, ""};
}
// The same metric on every seed of a job: value + offsets[k].
void set_metric_seeds(Results& res, const std::string& job, const std::string& key, double v,
                      const std::vector<double>& offsets = {0, 0.5, -0.5}) {
  for (size_t k = 0; k < offsets.size(); ++k)
    set_metric(res.runs[k == 0 ? job : job + "_seed" + std::to_string(k)], key, v + offsets[k]);
}

TEST(Stats, StudentTAndWelch) {
  EXPECT_DOUBLE_EQ(t_critical_95(1), 12.706);
  EXPECT_DOUBLE_EQ(t_critical_95(2.7), 4.303);  // fractional df round down
  EXPECT_DOUBLE_EQ(t_critical_95(INFINITY), 1.960);
  // Seeds {1, 2, 3} vs {4, 5, 6}: sd 1 each, se² = 1/3 each; Welch df = (2/3)² / (2 · (1/3)² / 2) = 4.
  const Estimate a = estimate_over_replicates({1, 2, 3}, {}), b = estimate_over_replicates({4, 5, 6}, {});
  EXPECT_DOUBLE_EQ(a.sd, 1.0);
  EXPECT_EQ(a.df, 2);
  const Difference d = welch_difference(a, b);
  EXPECT_DOUBLE_EQ(d.diff, -3);
  EXPECT_NEAR(d.se, std::sqrt(2.0 / 3), 1e-12);
  EXPECT_NEAR(d.df, 4, 1e-12);
  EXPECT_NEAR(d.margin, 2.776 * std::sqrt(2.0 / 3), 1e-12);
  EXPECT_EQ(d.sign, -1);  // 3 > 2.27
  // One run each: the evaluation errors, df ∞, margin 1.96 · √(0.1² + 0.1²) = 0.277.
  const Difference e = welch_difference(estimate_over_replicates({5.0}, {0.1}), estimate_over_replicates({5.2}, {0.1}));
  EXPECT_EQ(e.sign, 0);
  EXPECT_TRUE(std::isinf(e.df));
  EXPECT_FALSE(welch_difference(estimate_over_replicates({5.0}, {NAN}), b).known);  // no error: never a sign
}

// One model measured twice per seed: the differences {−5, −4, −6} have mean −5, sd 1, se 1/√3, df 2, margin
// 4.303/√3 = 2.48; Welch on the same numbers (seed sd 12.5) sees nothing.
TEST(Stats, PairedDifferenceCancelsTheSeedSpread) {
  const std::vector<double> m2 = {430, 405, 417}, m1 = {435, 409, 423};
  const Difference p = paired_difference(m2, m1);
  EXPECT_DOUBLE_EQ(p.diff, -5);
  EXPECT_NEAR(p.se, 1 / std::sqrt(3.0), 1e-12);
  EXPECT_EQ(p.df, 2);
  EXPECT_NEAR(p.margin, 4.303 / std::sqrt(3.0), 1e-12);
  EXPECT_EQ(p.sign, -1);
  EXPECT_EQ(welch_difference(estimate_over_replicates(m2, {}), estimate_over_replicates(m1, {})).sign, 0);
  // Differences of both signs: within the margin.
  EXPECT_EQ(paired_difference({430, 405, 417}, {429, 409, 417}).sign, 0);
  EXPECT_FALSE(paired_difference({1.0}, {2.0}).known);       // one pair: no spread
  EXPECT_FALSE(paired_difference({1, 2}, {1, 2, 3}).known);  // unequal lengths
  EXPECT_FALSE(paired_difference({3, 4}, {2, 3}).known);     // equal differences: no spread to judge them by
}

TEST(Replicates, SeedsOfAJobArePooledByConfig) {
  Results r;
  add_job(r, "gpt", run("gpt", order("l2r")), {5.0, 5.1, 5.2});
  add_single(r, "other", run("gpt", with(order("l2r"), "seed", 7)), 5.0, NAN);  // another data order: apart
  const auto groups = replicate_groups(r);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].name, "gpt");
  EXPECT_EQ(groups[0].runs, (std::vector<std::string>{"gpt", "gpt_seed1", "gpt_seed2"}));
  const Estimate e = final_val_loss(groups[0]);
  EXPECT_NEAR(e.mean, 5.1, 1e-12);
  EXPECT_NEAR(e.sd, 0.1, 1e-12);
  EXPECT_EQ(e.n, 3);
}

TEST(Verdicts, Finding1EveryOutcome) {
  Results r;
  add_job(r, "gpt", run("gpt", order("l2r")), {5.0, 5.1, 4.9});
  add_job(r, "ao_gpt", run("ao_gpt", order("mixture")), {6.0, 6.1, 5.9});
  Verdict v = verdict_for("1", r);
  EXPECT_EQ(v.outcome, Outcome::yes) << v.line();
  EXPECT_EQ(v.line(), "AO-GPT's final validation loss above GPT's: yes (1/1 agree beyond noise)");
  EXPECT_NE(v.numbers.find("ao_gpt (3 seeds) 6 ± 0.1 (sd, n = 3)"), std::string::npos) << v.numbers;

  Results against = r;  // AO-GPT below GPT beyond the noise
  for (auto* n : {"ao_gpt", "ao_gpt_seed1", "ao_gpt_seed2"}) against.runs[n].curves["loss/val"][1].second -= 1.5;
  EXPECT_EQ(verdict_for("1", against).outcome, Outcome::no);

  Results noisy = r;  // the same means with a seed spread wider than the margin
  noisy.runs["ao_gpt_seed1"].curves["loss/val"][1].second = 7.0;
  noisy.runs["ao_gpt_seed2"].curves["loss/val"][1].second = 4.5;
  noisy.runs["ao_gpt"].curves["loss/val"][1].second = 5.5;
  EXPECT_EQ(verdict_for("1", noisy).outcome, Outcome::inconclusive) << verdict_for("1", noisy).line();

  Results plateau = r;  // AO-GPT far above GPT, but within 10 % of the unigram level: says nothing
  for (auto* n : {"ao_gpt", "ao_gpt_seed1", "ao_gpt_seed2"}) plateau.runs[n].curves["loss/val"][1].second += 1.2;
  v = verdict_for("1", plateau);
  EXPECT_EQ(v.outcome, Outcome::uninformative);
  EXPECT_NE(v.line().find("ao_gpt on the plateau"), std::string::npos) << v.line();

  Results diverged = r;  // a NaN seed fails the verdict instead of being dropped
  diverged.runs["gpt_seed2"].curves["loss/val"] = {{50, 8.0}};
  diverged.runs["gpt_seed2"].curves["loss/val"].back().second = NAN;
  v = verdict_for("1", diverged);
  EXPECT_EQ(v.outcome, Outcome::failed);
  EXPECT_NE(v.why.find("gpt_seed2"), std::string::npos) << v.why;

  Results missing = r;  // the experiment expected a seed that is not there
  missing.context["experiment"] = {{"runs", {{"gpt", {"gpt", "gpt_seed1", "gpt_seed2", "gpt_seed3"}}}}};
  v = verdict_for("1", missing);
  EXPECT_EQ(v.outcome, Outcome::failed);
  EXPECT_NE(v.why.find("run gpt_seed3 of job gpt is missing"), std::string::npos) << v.why;

  r.runs.erase("gpt"), r.runs.erase("gpt_seed1"), r.runs.erase("gpt_seed2");
  EXPECT_EQ(verdict_for("1", r).outcome, Outcome::not_enough_data);
}

TEST(Verdicts, OneSeedDecidesOnlyBeyondItsEvaluationError) {
  Results r;
  add_single(r, "gpt", run("gpt", order("l2r")), 5.0, 0.02);
  add_single(r, "ao_gpt", run("ao_gpt", order("mixture")), 5.5, 0.02);
  EXPECT_EQ(verdict_for("1", r).outcome, Outcome::yes);  // 0.5 against a margin of 0.055
  r.runs["ao_gpt"].curves["loss/val"][1].second = 5.03;
  EXPECT_EQ(verdict_for("1", r).outcome, Outcome::inconclusive);  // 0.03 within it
  EXPECT_NE(verdict_for("1", r).line().find("(0/1 agree beyond noise, 1 within noise)"), std::string::npos)
      << verdict_for("1", r).line();
  r.runs["ao_gpt"].curves["loss/val"][1].second = 5.5;
  r.runs["ao_gpt"].curves.erase("loss/val_se");
  const Verdict v = verdict_for("1", r);
  EXPECT_EQ(v.outcome, Outcome::inconclusive);  // no error estimate: never yes or no, however large the gap
  EXPECT_EQ(v.no_estimate, 1);
  EXPECT_NE(v.line().find("(0/1 agree beyond noise, 1 without a noise estimate)"), std::string::npos) << v.line();
}

TEST(Verdicts, Findings2OrderAblation) {
  Results r;
  add_job(r, "l2r", run("ao_gpt", order("l2r")), {4.0, 4.05, 3.95});
  add_job(r, "fixed1", run("ao_gpt", order("fixed_random")), {5.0, 5.05, 4.95});
  add_job(r, "fixed2", run("ao_gpt", with(order("fixed_random"), "block", 2)), {5.2, 5.25, 5.15});
  add_job(r, "block", run("ao_gpt", order("blockwise")), {4.5, 4.55, 4.45});
  EXPECT_EQ(verdict_for("2.1", r).outcome, Outcome::yes);
  EXPECT_EQ(verdict_for("2.1", r).total(), 2);
  EXPECT_EQ(verdict_for("2.2", r).outcome, Outcome::yes);
  for (auto* n : {"block", "block_seed1", "block_seed2"}) r.runs[n].curves["loss/val"][1].second += 0.7;
  EXPECT_EQ(verdict_for("2.2", r).outcome, Outcome::no);  // above the best fixed order
  r.runs.erase("l2r"), r.runs.erase("l2r_seed1"), r.runs.erase("l2r_seed2");
  EXPECT_EQ(verdict_for("2.1", r).outcome, Outcome::not_enough_data);
}

TEST(Verdicts, Findings3MixingRatiosAndTradeoff) {
  Results r;
  add_job(r, "p0", run("ao_gpt", order("random")), {5.0, 5.0, 5.0});
  add_job(r, "p10", run("ao_gpt", order("mixture", 0.1)), {5.0, 5.0, 5.0});
  add_job(r, "p50", run("ao_gpt", order("mixture", 0.5)), {5.0, 5.0, 5.0});
  add_job(r, "gpt", run("gpt", order("mixture", 0.1)), {4.0, 4.0, 4.0});  // not AO-GPT: not part of the sweep
  set_metric_seeds(r, "p0", "wiki/ppl", 300);
  set_metric_seeds(r, "p10", "wiki/ppl", 200);
  set_metric_seeds(r, "p50", "wiki/ppl", 150);
  set_metric_seeds(r, "p0", "wiki/ppl_k4", 400, {0, 0.2, -0.2});
  set_metric_seeds(r, "p10", "wiki/ppl_k4", 402, {0, 0.2, -0.2});  // +0.5 % ± 0.2 %: below +2 %
  set_metric_seeds(r, "p50", "wiki/ppl_k4", 500);
  Verdict v = verdict_for("3.1", r);
  EXPECT_EQ(v.outcome, Outcome::yes) << v.line();
  EXPECT_EQ(v.total(), 2);
  v = verdict_for("3.2", r);
  EXPECT_EQ(v.outcome, Outcome::yes) << v.line() << v.numbers;
  EXPECT_EQ(verdict_for("3-tradeoff", r).outcome, Outcome::yes) << verdict_for("3-tradeoff", r).numbers;
  set_metric_seeds(r, "p10", "wiki/ppl_k4", 430, {0, 0.2, -0.2});  // 7.5 % worse
  EXPECT_EQ(verdict_for("3.2", r).outcome, Outcome::no);
  set_metric_seeds(r, "p10", "wiki/ppl_k4", 408, {0, 20, -20});  // +2 % with a ±12 % interval
  EXPECT_EQ(verdict_for("3.2", r).outcome, Outcome::inconclusive);
  set_metric_seeds(r, "p50", "wiki/ppl", 310);
  EXPECT_EQ(verdict_for("3.1", r).outcome, Outcome::no);
  set_metric(r.runs["p50_seed1"], "wiki/ppl", NAN);  // one seed's metric lost
  EXPECT_EQ(verdict_for("3.1", r).outcome, Outcome::failed);
  for (auto* n : {"p0", "p0_seed1", "p0_seed2"}) r.runs.erase(n);
  EXPECT_EQ(verdict_for("3.1", r).outcome, Outcome::not_enough_data);
}

TEST(Verdicts, ArchitectureAndEmaAblations) {
  Results r;
  add_job(r, "adaln", run("ao_gpt", {{"ema", 0.0}}, {{"injection", "adaln"}}), {5.0, 5.02, 4.98});
  add_job(r, "input", run("ao_gpt", {{"ema", 0.0}}, {{"injection", "input"}}), {5.3, 5.32, 5.28});
  add_job(r, "every", run("ao_gpt", {{"ema", 0.0}}, {{"injection", "every_block"}}), {5.1, 5.12, 5.08});
  EXPECT_EQ(verdict_for("arch-injection", r).outcome, Outcome::yes);
  EXPECT_EQ(verdict_for("arch-injection", r).total(), 2);
  for (auto* n : {"every", "every_seed1", "every_seed2"}) r.runs[n].curves["loss/val"][1].second -= 0.3;
  EXPECT_EQ(verdict_for("arch-injection", r).outcome, Outcome::no);

  Results s;
  add_job(s, "sigma", run("sigma_gpt", {{"ema", 0.0}}), {5.5, 5.52, 5.48});
  add_job(s, "adaln", run("ao_gpt", {{"ema", 0.0}}), {5.2, 5.22, 5.18});
  EXPECT_EQ(verdict_for("arch-adaln-ema", s).outcome, Outcome::not_enough_data);
  add_job(s, "ema999", run("ao_gpt", {{"ema", 0.999}}), {5.1, 5.12, 5.08});
  add_job(s, "ema9999", run("ao_gpt", {{"ema", 0.9999}}), {5.15, 5.17, 5.13});
  EXPECT_EQ(verdict_for("arch-ema-decay", s).outcome, Outcome::yes);
  EXPECT_EQ(verdict_for("ema-0.9999-best", s).outcome, Outcome::no);  // 0.999 is lower beyond the noise
  for (auto* n : {"ema9999", "ema9999_seed1", "ema9999_seed2"}) s.runs[n].curves["loss/val"][1].second -= 0.1;
  EXPECT_EQ(verdict_for("ema-0.9999-best", s).outcome, Outcome::yes);
  s.runs.erase("ema999"), s.runs.erase("ema999_seed1"), s.runs.erase("ema999_seed2");
  EXPECT_EQ(verdict_for("arch-adaln-ema", s).outcome, Outcome::yes);
  EXPECT_EQ(verdict_for("arch-ema-decay", Results{}).outcome, Outcome::not_enough_data);
}

TEST(Verdicts, CountingIsAnalyticAndOutsideTheTally) {
  const Verdict v = verdict_for("5", Results{});
  EXPECT_EQ(v.outcome, Outcome::yes);
  EXPECT_EQ(v.kind, RuleKind::analytic);
  EXPECT_EQ(v.agree, v.total());
  EXPECT_GT(v.total(), 3);
  const Tally t = tally({v});
  EXPECT_EQ(t.yes, 0);
  EXPECT_EQ(t.analytic, 1);
}

TEST(Verdicts, EnsemblesZeroShotAndTable2) {
  Results r;
  add_job(r, "gpt", run("gpt", order("l2r")), {4.0, 4.0, 4.0});
  add_job(r, "sigma_gpt", run("sigma_gpt", order("random")), {5.5, 5.5, 5.5});
  add_job(r, "ao_gpt", run("ao_gpt", order("mixture")), {5.0, 5.0, 5.0});
  add_job(r, "sedd", run("sedd"), {5.0, 5.0, 5.0});
  add_job(r, "radd", run("radd"), {5.1, 5.1, 5.1});
  set_metric_seeds(r, "ao_gpt", "wt2/ppl_k1", 70);  // exact any-order: never a stand-in for the ensemble
  EXPECT_EQ(verdict_for("6", r).outcome, Outcome::not_enough_data);
  EXPECT_EQ(verdict_for("zero-shot", r).outcome, Outcome::not_enough_data);
  set_metric_seeds(r, "ao_gpt", "wt2/ppl_m1", 60);
  set_metric_seeds(r, "ao_gpt", "wt2/ppl_m8", 50);
  set_metric_seeds(r, "ao_gpt", "wt2/ppl_m64", 45);
  set_metric_seeds(r, "ao_gpt", "wt2/ppl_m64_p128", 99);  // position-subsampled: not part of the curve
  set_metric_seeds(r, "sedd", "wt2/ppl_elbo", 40);
  set_metric_seeds(r, "radd", "wt2/ppl_elbo", 30);
  Verdict six = verdict_for("6", r);
  EXPECT_EQ(six.outcome, Outcome::yes) << six.line();
  EXPECT_EQ(six.total(), 2);
  Verdict zs = verdict_for("zero-shot", r);
  EXPECT_EQ(zs.outcome, Outcome::yes) << zs.line();
  EXPECT_NE(zs.numbers.find("best MDM radd (3 seeds) ≤ 30; the ensemble closes 50 % of the M = 1 gap"),
            std::string::npos)
      << zs.numbers;
  // Paired by seed: a rise of about 0.2 on every seed, far inside the seed spread of ±0.5, is a rise (no), while
  // per-seed changes of both signs are within noise (inconclusive).
  set_metric_seeds(r, "ao_gpt", "wt2/ppl_m64", 50.2, {0, 0.52, -0.47});
  EXPECT_EQ(verdict_for("6", r).outcome, Outcome::no) << verdict_for("6", r).line();
  set_metric_seeds(r, "ao_gpt", "wt2/ppl_m64", 50, {-0.3, 0.9, -0.4});
  EXPECT_EQ(verdict_for("6", r).outcome, Outcome::inconclusive) << verdict_for("6", r).line();
  // The GPU tier's shape: a fall of 4–6 at every seed under a seed spread of 12 is a fall.
  set_metric_seeds(r, "ao_gpt", "wt2/ppl_m1", 440, {0, -25, -11});
  set_metric_seeds(r, "ao_gpt", "wt2/ppl_m8", 435, {0, -26, -12});
  set_metric_seeds(r, "ao_gpt", "wt2/ppl_m64", 430, {0, -25, -13});
  EXPECT_EQ(verdict_for("6", r).outcome, Outcome::yes) << verdict_for("6", r).line();

  // The L2R block: GPT below AO-GPT; Table 2: AO-GPT below σ-GPT in L2R and any-order perplexity.
  set_metric_seeds(r, "gpt", "wt2/ppl", 40);
  set_metric_seeds(r, "ao_gpt", "wt2/ppl", 55);
  set_metric_seeds(r, "sigma_gpt", "wt2/ppl", 90);
  set_metric_seeds(r, "sigma_gpt", "wt2/ppl_k1", 95);
  EXPECT_EQ(verdict_for("zero-shot-l2r", r).outcome, Outcome::yes);
  EXPECT_EQ(verdict_for("table-2", r).outcome, Outcome::yes);
  EXPECT_EQ(verdict_for("table-2", r).total(), 2);
  set_metric_seeds(r, "sigma_gpt", "wt2/ppl_k1", 60);
  EXPECT_EQ(verdict_for("table-2", r).outcome, Outcome::no);
}

TEST(Verdicts, GenerationSpeedAndPerplexityAgainstSedd) {
  Results r;
  add_job(r, "ao_gpt", run("ao_gpt"), {5.0, 5.0, 5.0});
  add_job(r, "sedd", run("sedd"), {5.0, 5.0, 5.0});
  for (const char* f : {"7", "8.1", "8.2", "gen-steps", "gen-annealing"})
    EXPECT_EQ(verdict_for(f, r).outcome, Outcome::not_enough_data) << f;
  for (int steps : {64, 256, 1024}) {
    const std::string s = std::to_string(steps);
    set_metric_seeds(r, "ao_gpt", "speed_s" + s + "/gen_s", 0.001 * steps, {0, 0.00001, -0.00001});
    set_metric_seeds(r, "sedd", "speed_s" + s + "/gen_s", 0.03 * steps, {0, 0.0003, -0.0003});  // 30×
    set_metric_seeds(r, "ao_gpt", "gen_p1_t1_s" + s + "/genppl", 300.0 - steps / 10.0);
    set_metric_seeds(r, "sedd", "gen_p1_t1_s" + s + "/genppl", 100.0);
    set_metric_seeds(r, "ao_gpt", "gen_p0.95_t0.7_s" + s + "/genppl", 60.0);
    set_metric_seeds(r, "sedd", "gen_p0.95_t0.7_s" + s + "/genppl", 58.0);
  }
  EXPECT_EQ(verdict_for("7", r).outcome, Outcome::yes);
  EXPECT_EQ(verdict_for("7", r).total(), 3);
  Verdict v = verdict_for("8.1", r);
  EXPECT_EQ(v.outcome, Outcome::yes) << v.line() << v.numbers;
  EXPECT_NE(v.numbers.find("1024 steps 30×"), std::string::npos) << v.numbers;
  v = verdict_for("8.2", r);
  EXPECT_EQ(v.outcome, Outcome::yes) << v.line() << v.numbers;  // worse at (1, 1), 60 vs 58 annealed
  EXPECT_EQ(v.total(), 2);
  EXPECT_EQ(verdict_for("gen-steps", r).kind, RuleKind::extra);
  EXPECT_EQ(verdict_for("gen-steps", r).outcome, Outcome::inconclusive);  // annealed: flat, within the spread
  EXPECT_EQ(verdict_for("gen-annealing", r).outcome, Outcome::yes);

  set_metric_seeds(r, "sedd", "speed_s1024/gen_s", 0.01 * 1024, {0, 0.0001, -0.0001});  // 10×
  EXPECT_EQ(verdict_for("8.1", r).outcome, Outcome::no);
  EXPECT_EQ(verdict_for("7", r).outcome, Outcome::yes);                                // still faster
  set_metric_seeds(r, "sedd", "speed_s1024/gen_s", 0.025 * 1024, {0, 0.005, -0.005});  // 25× ± a lot
  EXPECT_EQ(verdict_for("8.1", r).outcome, Outcome::inconclusive);
  set_metric_seeds(r, "ao_gpt", "gen_p0.95_t0.7_s1024/genppl", 1300.0);  // 23× SEDD's: not comparable
  EXPECT_EQ(verdict_for("8.2", r).outcome, Outcome::no);
  for (auto& [name, run] : r.runs)
    for (auto it = run.metrics.begin(); it != run.metrics.end();)
      it = it->first.find("gen_p0.95") == 0 ? run.metrics.erase(it) : std::next(it);
  EXPECT_EQ(verdict_for("8.2", r).outcome, Outcome::not_enough_data);  // half a claim is no verdict
}

TEST(Verdicts, UnknownFindingIsAnError) {
  EXPECT_THROW(verdict_for("42", Results{}), ConfigError);
  EXPECT_GE(known_findings().size(), 20u);
}

TEST(Verdicts, PlateauLines) {
  RunResults r = run("ao_gpt");
  r.curves["loss/val"] = {{1000, 7.5}, {2000, 7.2}, {3000, 6.5}, {4000, 6.0}};
  EXPECT_EQ(plateau_exit_step(r), 3000);  // the first evaluation below 0.9 × 7.68 = 6.912
  EXPECT_EQ(plateau_text(r), "left the plateau at step 3000");
  r.curves["loss/val"] = {{1000, 7.5}, {2000, 7.1}};
  EXPECT_EQ(plateau_exit_step(r), -1);
  EXPECT_NE(plateau_text(r).find("on the plateau"), std::string::npos);
  r.curves.erase("unigram/nats");
  EXPECT_EQ(plateau_text(r), "unigram level not recorded");
}

TEST(Verdicts, SectionCarriesClaimStatisticTallyAndPlateauInEveryFormat) {
  Results r;
  add_single(r, "gpt", run("gpt", order("l2r")), 5.0, 0.01);
  add_single(r, "ao_gpt", run("ao_gpt", order("mixture")), 7.2, 0.01);
  r.runs["ao_gpt"].curves["diag/gate_attn/l0"] = {{100, 0.004}};
  r.runs["ao_gpt"].curves["diag/gate_mlp/l0"] = {{100, 0.02}};
  EXPECT_TRUE(render_findings(r).markdown.empty());  // no experiment record: no section
  r.context["experiment"] = {{"file", "configs/experiments/finding1_loss.json"},
                             {"tier", "debug"},
                             {"seeds", 1},
                             {"findings", {"1"}},
                             {"deviations", "fortunes_corpus & bytes"}};
  const FindingsReport f = render_findings(r);
  ASSERT_EQ(f.verdicts.size(), 1u);
  EXPECT_NE(f.markdown.find("| 1 | Finding 1 | **uninformative at this tier** — AO-GPT's final validation loss above "
                            "GPT's: uninformative at this tier (ao_gpt on the plateau"),
            std::string::npos)
      << f.markdown;
  EXPECT_NE(f.markdown.find("- Tally: paper findings: 0 yes, 0 no, 0 inconclusive, 1 uninformative at this tier"),
            std::string::npos)
      << f.markdown;
  EXPECT_NE(f.markdown.find("Welch's t at 95 %"), std::string::npos);
  EXPECT_NE(f.markdown.find("- gpt: left the plateau at step 100"), std::string::npos) << f.markdown;
  EXPECT_NE(f.markdown.find("mean |α| per layer 0.004 … 0.02"), std::string::npos) << f.markdown;
  EXPECT_NE(f.markdown.find("harder to learn"), std::string::npos);
  EXPECT_NE(f.markdown.find("tier debug of configs/experiments/finding1_loss.json, 1 seed(s) per job"),
            std::string::npos);
  EXPECT_NE(f.markdown.find("409600 tokens"), std::string::npos) << f.markdown;
  EXPECT_NE(f.markdown.find("fortunes_corpus & bytes"), std::string::npos);
  EXPECT_NE(f.html.find("fortunes_corpus &amp; bytes"), std::string::npos);
  EXPECT_NE(f.latex.find("fortunes\\_corpus \\& bytes"), std::string::npos) << f.latex;
  EXPECT_NE(f.latex.find("\\textbf{uninformative at this tier}"), std::string::npos);
  r.context["experiment"]["findings"] = {"1", "5"};  // finding 5's line has Σ and ·: LaTeX without Unicode
  const std::string tex = render_findings(r).latex;
  EXPECT_NE(tex.find("\\ensuremath{\\Sigma}"), std::string::npos) << tex;
  EXPECT_EQ(tex.find("Σ"), std::string::npos) << tex;
  EXPECT_EQ(tex.find("±"), std::string::npos) << tex;
  // The context block names the experiment by file and findings (its description leads the report).
  const std::string md = render_markdown(r);
  EXPECT_NE(md.find("- experiment: configs/experiments/finding1_loss.json (findings 1, 5)\n"), std::string::npos) << md;
  EXPECT_EQ(context_text("tier", "debug"), "debug");
  EXPECT_EQ(context_text("params", nlohmann::json{{"n", 2}}), "{\"n\":2}");
}

}  // namespace
}  // namespace aobench
