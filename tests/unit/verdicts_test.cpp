// Implements: tests of the per-finding verdicts (reports/verdicts.h) on synthetic results: for each finding a
// case that agrees with the paper (yes), one that does not (no) and one without the runs or metrics it needs
// (not enough data); and the rendered section (Markdown, HTML, LaTeX) with claim, protocol and deviations.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "reports/verdicts.h"

namespace aobench {
namespace {

RunResults run(const std::string& plugin, const nlohmann::json& train = nlohmann::json::object(),
               const nlohmann::json& model = nlohmann::json::object()) {
  RunResults r;
  r.plugin = plugin;
  r.config = {{"model", model}, {"train", train}};
  r.config["model"]["plugin"] = plugin;
  r.steps = 100;
  r.tokens = 100 * 4096;
  r.params = 1000;
  return r;
}
RunResults with_val(RunResults r, const Curve& c) {
  r.curves["loss/val"] = c;
  return r;
}
nlohmann::json order(const std::string& kind, double p = 0.1) { return {{"order", {{"kind", kind}, {"p_l2r", p}}}}; }
void set_metric(RunResults& r, const std::string& key, double v) {
  r.metrics[key] = {v, std::nullopt, 8, false, false, ""};
}

TEST(Verdicts, Finding1ComparesEveryEvaluatedStep) {
  Results r;
  r.runs["gpt"] = with_val(run("gpt", order("l2r")), {{50, 6.0}, {100, 5.5}, {150, 5.2}});
  r.runs["ao_gpt"] = with_val(run("ao_gpt", order("mixture")), {{50, 7.0}, {100, 6.5}, {150, 6.4}});
  Verdict v = verdict_for("1", r);
  EXPECT_EQ(v.outcome, Outcome::yes);
  EXPECT_EQ(v.line(), "AO-GPT validation loss above GPT's at every evaluated step: yes (3/3)");
  r.runs["ao_gpt"].curves["loss/val"][2].second = 5.0;  // AO-GPT below GPT at step 150
  v = verdict_for("1", r);
  EXPECT_EQ(v.outcome, Outcome::no);
  EXPECT_EQ(v.hits, 2);
  EXPECT_EQ(v.total, 3);
  r.runs.erase("gpt");
  EXPECT_EQ(verdict_for("1", r).outcome, Outcome::not_enough_data);
  Results one_step;
  one_step.runs["gpt"] = with_val(run("gpt", order("l2r")), {{50, 6.0}});
  one_step.runs["ao_gpt"] = with_val(run("ao_gpt"), {{50, 7.0}});
  EXPECT_EQ(verdict_for("1", one_step).outcome, Outcome::not_enough_data);  // one step is no curve
}

TEST(Verdicts, Findings2OrderAblation) {
  Results r;
  r.runs["l2r"] = with_val(run("ao_gpt", order("l2r")), {{100, 4.0}});
  r.runs["fixed1"] = with_val(run("ao_gpt", order("fixed_random")), {{100, 5.0}});
  r.runs["fixed2"] = with_val(run("ao_gpt", order("fixed_random")), {{100, 5.2}});
  r.runs["block"] = with_val(run("ao_gpt", order("blockwise")), {{100, 4.5}});
  EXPECT_EQ(verdict_for("2.1", r).outcome, Outcome::yes);
  EXPECT_EQ(verdict_for("2.1", r).total, 2);
  EXPECT_EQ(verdict_for("2.2", r).outcome, Outcome::yes);
  r.runs["block"].curves["loss/val"][0].second = 5.1;  // above the best fixed order
  EXPECT_EQ(verdict_for("2.2", r).outcome, Outcome::no);
  r.runs["fixed2"].curves["loss/val"][0].second = 3.9;  // a fixed order beats L2R
  EXPECT_EQ(verdict_for("2.1", r).outcome, Outcome::no);
  r.runs.erase("l2r");
  EXPECT_EQ(verdict_for("2.1", r).outcome, Outcome::not_enough_data);
  EXPECT_EQ(verdict_for("2.2", r).outcome, Outcome::not_enough_data);
}

TEST(Verdicts, Findings3MixingRatios) {
  Results r;
  r.runs["p0"] = run("ao_gpt", order("random"));
  r.runs["p10"] = run("ao_gpt", order("mixture", 0.1));
  r.runs["p50"] = run("ao_gpt", order("mixture", 0.5));
  set_metric(r.runs["p0"], "wiki/ppl", 300);
  set_metric(r.runs["p10"], "wiki/ppl", 200);
  set_metric(r.runs["p50"], "wiki/ppl", 150);
  set_metric(r.runs["p0"], "wiki/ppl_k4", 400);
  set_metric(r.runs["p10"], "wiki/ppl_k4", 405);  // within 2 %
  set_metric(r.runs["p50"], "wiki/ppl_k4", 500);  // ratio > 10 %: not part of 3.2
  EXPECT_EQ(verdict_for("3.1", r).outcome, Outcome::yes);
  EXPECT_EQ(verdict_for("3.1", r).total, 2);
  EXPECT_EQ(verdict_for("3.2", r).outcome, Outcome::yes);
  EXPECT_EQ(verdict_for("3.2", r).total, 1);
  set_metric(r.runs["p10"], "wiki/ppl_k4", 420);  // 5 % worse
  EXPECT_EQ(verdict_for("3.2", r).outcome, Outcome::no);
  set_metric(r.runs["p50"], "wiki/ppl", 310);
  EXPECT_EQ(verdict_for("3.1", r).outcome, Outcome::no);
  r.runs.erase("p0");
  EXPECT_EQ(verdict_for("3.1", r).outcome, Outcome::not_enough_data);
  EXPECT_EQ(verdict_for("3.2", r).outcome, Outcome::not_enough_data);
}

TEST(Verdicts, ArchitectureAblations) {
  Results r;
  r.runs["adaln"] = with_val(run("ao_gpt", {{"ema", 0.0}}, {{"injection", "adaln"}}), {{100, 5.0}});
  r.runs["input"] = with_val(run("ao_gpt", {{"ema", 0.0}}, {{"injection", "input"}}), {{100, 5.3}});
  r.runs["every"] = with_val(run("ao_gpt", {{"ema", 0.0}}, {{"injection", "every_block"}}), {{100, 5.1}});
  EXPECT_EQ(verdict_for("arch-injection", r).outcome, Outcome::yes);
  EXPECT_EQ(verdict_for("arch-injection", r).total, 2);
  r.runs["every"].curves["loss/val"][0].second = 4.9;
  EXPECT_EQ(verdict_for("arch-injection", r).outcome, Outcome::no);

  Results s;
  s.runs["sigma"] = with_val(run("sigma_gpt", {{"ema", 0.0}}), {{100, 5.5}});
  s.runs["adaln"] = with_val(run("ao_gpt", {{"ema", 0.0}}), {{100, 5.2}});
  EXPECT_EQ(verdict_for("arch-adaln-ema", s).outcome, Outcome::not_enough_data);
  s.runs["adaln_ema"] = with_val(run("ao_gpt", {{"ema", 0.999}}), {{100, 5.1}});
  EXPECT_EQ(verdict_for("arch-adaln-ema", s).outcome, Outcome::yes);
  EXPECT_EQ(verdict_for("arch-ema-decay", s).outcome, Outcome::yes);
  s.runs["adaln_ema"].curves["loss/val"][0].second = 5.3;
  EXPECT_EQ(verdict_for("arch-adaln-ema", s).outcome, Outcome::no);
  EXPECT_EQ(verdict_for("arch-ema-decay", s).outcome, Outcome::no);
  EXPECT_EQ(verdict_for("arch-ema-decay", Results{}).outcome, Outcome::not_enough_data);
}

TEST(Verdicts, CountingTableIsComputedExactly) {
  const Verdict v = verdict_for("5", Results{});
  EXPECT_EQ(v.outcome, Outcome::yes);
  EXPECT_EQ(v.hits, v.total);
  EXPECT_GT(v.total, 3);
}

TEST(Verdicts, EnsemblesAndZeroShot) {
  Results r;
  r.runs["ao_gpt"] = run("ao_gpt", order("mixture"));
  r.runs["sedd"] = run("sedd");
  r.runs["radd"] = run("radd");
  EXPECT_EQ(verdict_for("6", r).outcome, Outcome::not_enough_data);
  EXPECT_EQ(verdict_for("zero-shot", r).outcome, Outcome::not_enough_data);
  set_metric(r.runs["ao_gpt"], "wt2/ppl_m1", 60);
  set_metric(r.runs["ao_gpt"], "wt2/ppl_m8", 50);
  set_metric(r.runs["ao_gpt"], "wt2/ppl_m64", 45);
  set_metric(r.runs["ao_gpt"], "wt2/ppl_m64_p128", 99);  // position-subsampled: not part of the curve
  set_metric(r.runs["sedd"], "wt2/ppl_elbo", 48);
  set_metric(r.runs["radd"], "wt2/ppl_elbo", 47);
  Verdict six = verdict_for("6", r);
  EXPECT_EQ(six.outcome, Outcome::yes);
  EXPECT_EQ(six.total, 2);
  EXPECT_EQ(verdict_for("zero-shot", r).outcome, Outcome::yes);  // 45 ≤ 47
  set_metric(r.runs["ao_gpt"], "wt2/ppl_m64", 51);
  EXPECT_EQ(verdict_for("6", r).outcome, Outcome::no);
  EXPECT_EQ(verdict_for("zero-shot", r).outcome, Outcome::no);
}

TEST(Verdicts, GenerationSpeedAndPerplexity) {
  Results r;
  r.runs["ao_gpt"] = run("ao_gpt");
  r.runs["sedd"] = run("sedd");
  EXPECT_EQ(verdict_for("7", r).outcome, Outcome::not_enough_data);
  EXPECT_EQ(verdict_for("8.1", r).outcome, Outcome::not_enough_data);
  EXPECT_EQ(verdict_for("8.2", r).outcome, Outcome::not_enough_data);
  for (int steps : {64, 256, 1024}) {
    set_metric(r.runs["ao_gpt"], "speed_s" + std::to_string(steps) + "/gen_s", 1.0 + steps / 1024.0);
    set_metric(r.runs["sedd"], "speed_s" + std::to_string(steps) + "/gen_s", steps / 16.0);
    set_metric(r.runs["ao_gpt"], "gen_p1_t1_s" + std::to_string(steps) + "/genppl", 300.0 - steps / 10.0);
    set_metric(r.runs["ao_gpt"], "gen_p0.95_t0.9_s" + std::to_string(steps) + "/genppl", 200.0 - steps / 10.0);
  }
  EXPECT_EQ(verdict_for("7", r).outcome, Outcome::yes);
  EXPECT_EQ(verdict_for("7", r).total, 3);
  EXPECT_EQ(verdict_for("8.1", r).outcome, Outcome::yes);
  EXPECT_EQ(verdict_for("8.1", r).total, 4);
  EXPECT_EQ(verdict_for("8.2", r).outcome, Outcome::yes);
  EXPECT_EQ(verdict_for("8.2", r).total, 3);
  set_metric(r.runs["sedd"], "speed_s64/gen_s", 0.5);  // SEDD faster at 64 steps
  EXPECT_EQ(verdict_for("7", r).outcome, Outcome::no);
  set_metric(r.runs["ao_gpt"], "gen_p1_t1_s1024/genppl", 500);
  EXPECT_EQ(verdict_for("8.1", r).outcome, Outcome::no);
  EXPECT_EQ(verdict_for("8.2", r).outcome, Outcome::yes);  // 1024 steps: 97.6 < 500 still
}

TEST(Verdicts, UnknownFindingIsAnError) {
  EXPECT_THROW(verdict_for("42", Results{}), ConfigError);
  EXPECT_GE(known_findings().size(), 14u);
}

TEST(Verdicts, SectionCarriesClaimProtocolAndDeviationsInEveryFormat) {
  Results r;
  r.runs["gpt"] = with_val(run("gpt", order("l2r")), {{50, 6.0}, {100, 5.5}});
  r.runs["ao_gpt"] = with_val(run("ao_gpt", order("mixture")), {{50, 7.0}, {100, 6.5}});
  EXPECT_TRUE(render_findings(r).markdown.empty());  // no experiment record: no section
  r.context["experiment"] = {{"file", "configs/experiments/finding1_loss.json"},
                             {"tier", "debug"},
                             {"findings", {"1"}},
                             {"deviations", "fortunes_corpus & bytes"}};
  const FindingsReport f = render_findings(r);
  ASSERT_EQ(f.verdicts.size(), 1u);
  EXPECT_NE(f.markdown.find("AO-GPT validation loss above GPT's at every evaluated step: yes (2/2)"), std::string::npos)
      << f.markdown;
  EXPECT_NE(f.markdown.find("harder to learn"), std::string::npos);
  EXPECT_NE(f.markdown.find("tier debug"), std::string::npos);
  EXPECT_NE(f.markdown.find("409600 tokens"), std::string::npos) << f.markdown;
  EXPECT_NE(f.markdown.find("fortunes_corpus & bytes"), std::string::npos);
  EXPECT_NE(f.html.find("fortunes_corpus &amp; bytes"), std::string::npos);
  EXPECT_NE(f.latex.find("fortunes\\_corpus \\& bytes"), std::string::npos) << f.latex;
  EXPECT_NE(f.latex.find("\\textbf{yes}"), std::string::npos);
  r.context["experiment"]["findings"] = {"1", "5"};  // finding 5's line has Σ and ·: LaTeX without Unicode
  const std::string tex = render_findings(r).latex;
  EXPECT_NE(tex.find("\\ensuremath{\\Sigma}"), std::string::npos) << tex;
  EXPECT_EQ(tex.find("Σ"), std::string::npos) << tex;
  // The context block names the experiment by file and findings (its description leads the report).
  const std::string md = render_markdown(r);
  EXPECT_NE(md.find("- experiment: configs/experiments/finding1_loss.json (findings 1, 5)\n"), std::string::npos) << md;
  EXPECT_EQ(context_text("tier", "debug"), "debug");
  EXPECT_EQ(context_text("params", nlohmann::json{{"n", 2}}), "{\"n\":2}");
}

}  // namespace
}  // namespace aobench
