// Implements: tests of the results schema and its renderers (reports/results.h): JSON round trip, "≤" for
// bounds and "± stderr" in Markdown, CSV and LaTeX contents, compare verdicts and `aobench compare` exit
// codes, the stderr helper (metrics/stats.h), and replicates (reports/replicates.h): seeds grouped by config, one
// table row of mean ± sd per group, a validation-loss band per group in the gnuplot figures.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>

#include <gtest/gtest.h>

#include "core/env_info.h"
#include "core/errors.h"
#include "metrics/stats.h"
#include "reports/metric_tables.h"
#include "reports/replicates.h"
#include "reports/results.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

Results sample_results() {
  Results r;
  r.context = {{"git_commit", "abc123"}, {"host", "testhost"}, {"date", "2026-01-01T00:00:00Z"}};
  RunResults gpt;
  gpt.plugin = "gpt";
  gpt.flavour = "debug";
  gpt.paradigm = "autoregressive";
  gpt.params = 1234;
  gpt.steps = 20;
  gpt.tokens = 5120;
  gpt.config = {{"train", {{"max_iters", 20}}}};
  gpt.train_flops = 1.5e12;
  gpt.metrics["wikitext2/ppl"] = {35.25, 0.5, 40, false, false, "l2r exact; first token skipped", {"ppl", "l2r"}};
  gpt.metrics["lambada/ppl"] = {51.0, std::nullopt, 0, false, false, "l2r exact", {"ppl", "l2r"}};
  gpt.curves["loss/train"] = {{0, 5.5}, {10, 4.0}, {20, 3.5}};
  gpt.curves["loss/val"] = {{10, 4.2}, {20, 3.9}};
  RunResults sedd;
  sedd.plugin = "sedd";
  sedd.paradigm = "masked_diffusion_encoder";
  sedd.metrics["wikitext2/ppl"] = {41.5, 1.25, 40, true, false, "ELBO upper bound", {"ppl", "l2r"}};
  r.runs["gpt_small"] = gpt;
  r.runs["sedd_small"] = sedd;
  return r;
}

TEST(ResultsTest, JsonRoundTripKeepsEveryField) {
  const Results a = sample_results();
  const nlohmann::json j = a.to_json();
  EXPECT_EQ(j["schema"], "aobench.results/1");
  EXPECT_EQ(j["runs"]["gpt_small"]["metrics"]["wikitext2/ppl"]["stderr"], 0.5);
  EXPECT_TRUE(j["runs"]["gpt_small"]["metrics"]["lambada/ppl"]["stderr"].is_null());
  const Results b = Results::from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(b.to_json(), j);
  ASSERT_EQ(b.runs.size(), 2u);
  const MetricValue& m = b.runs.at("sedd_small").metrics.at("wikitext2/ppl");
  EXPECT_TRUE(m.is_bound);
  EXPECT_DOUBLE_EQ(m.value, 41.5);
  ASSERT_TRUE(m.stderr_.has_value());
  EXPECT_DOUBLE_EQ(*m.stderr_, 1.25);
  EXPECT_EQ(b.runs.at("gpt_small").curves.at("loss/train").size(), 3u);
  EXPECT_DOUBLE_EQ(b.runs.at("gpt_small").curves.at("loss/val")[1].second, 3.9);
}

// Four paradigms with the protocols `aobench run` writes: the headline picks each row's main perplexity
// (GPT: exact L2R; AO-GPT: exact any-order, largest K; SEDD: the ELBO bound; RADD without an ELBO: the
// any-order fallback, footnoted), marks window subsets with a footnote and leads every rendering.
Results paradigm_results() {
  const std::string rest = "; first token skipped; 1024-token windows; reference packing";
  Results r;
  RunResults gpt, ao, sedd, radd;
  gpt.paradigm = "autoregressive";
  const MetricParams l2r{"ppl", "l2r"}, k1{"ppl", "random", 1}, k4{"ppl", "random", 4}, elbo{"ppl", "elbo"};
  gpt.metrics["ptb/ppl"] = {120.5, 1.5, 86, false, false, "l2r exact" + rest, l2r};
  gpt.metrics["wikitext2/ppl"] = {40.25, 0.5, 229, false, false, "l2r exact" + rest, l2r};
  gpt.metrics["wikitext2/bpb"] = {1.5, 0.01, 229, false, false, "l2r exact" + rest, {"bpb", "l2r"}};
  ao.paradigm = "any_order";
  ao.metrics["wikitext2/ppl"] = {45.0, 0.5, 229, false, false, "l2r exact" + rest, l2r};
  ao.metrics["wikitext2/ppl_k1"] = {60.0, 0.75, 229, false, false, "random orders exact, K=1" + rest, k1};
  ao.metrics["wikitext2/ppl_k4"] = {58.0, 0.5, 229, false, false, "random orders exact, K=4" + rest, k4};
  ao.metrics["wikitext2/ppl_m8"] = {
      50.0, 0.5, 229, false, false, "context-order ensemble M=8" + rest, {"ppl", "ensemble", 0, 8}};
  sedd.paradigm = "masked_diffusion_encoder";
  sedd.metrics["ptb/ppl_elbo"] = {110.0, 2.0, 86, true, false, "ELBO upper bound, 16 MC steps" + rest, elbo};
  sedd.metrics["wikitext2/ppl_elbo"] = {55.0, 1.0, 229, true, false, "ELBO upper bound, 16 MC steps" + rest, elbo};
  sedd.metrics["wikitext2/ppl"] = {50.0, 1.0, 16, false, false, "l2r exact" + rest + "; 16/229 windows", l2r};
  radd.paradigm = "masked_diffusion_encoder";
  radd.metrics["ptb/ppl_k1"] = {
      130.0, 3.0,
      16,    false,
      false, "random orders exact, K=1" + rest + "; 16/86 windows; bytes pro-rated to the scored tokens (estimate)",
      k1};
  radd.metrics["wikitext2/ppl_k1"] = {70.0, 2.0, 229, false, false, "random orders exact, K=1" + rest, k1};
  r.runs["gpt"] = gpt;
  r.runs["ao_gpt"] = ao;
  r.runs["sedd"] = sedd;
  r.runs["radd"] = radd;
  return r;
}

TEST(ResultsTest, HeadlineShowsEachRunsMainPerplexityWithItsProtocol) {
  const Results r = paradigm_results();
  const Headline h = headline_table(r);
  ASSERT_EQ(h.rows.size(), 4u);
  EXPECT_EQ(h.datasets, (std::vector<std::string>{"ptb", "wikitext2"}));
  std::map<std::string, const HeadlineRow*> rows;
  for (const auto& row : h.rows) rows[row.run] = &row;
  EXPECT_EQ(rows.at("gpt")->metric, "ppl");
  EXPECT_EQ(rows.at("gpt")->protocol, "l2r exact");
  EXPECT_EQ(rows.at("ao_gpt")->metric, "ppl_k4");
  EXPECT_EQ(rows.at("ao_gpt")->protocol, "random orders exact, K=4");
  EXPECT_EQ(rows.at("sedd")->metric, "ppl_elbo");
  EXPECT_EQ(rows.at("sedd")->protocol, "ELBO upper bound, 16 MC steps");
  EXPECT_TRUE(rows.at("sedd")->cells.at("ptb")->is_bound);
  EXPECT_EQ(rows.at("sedd")->windows, "all");
  EXPECT_TRUE(rows.at("sedd")->notes.empty());
  EXPECT_EQ(rows.at("radd")->metric, "ppl_k1");
  EXPECT_EQ(rows.at("radd")->windows, "subset");
  ASSERT_EQ(rows.at("radd")->notes.size(), 2u);
  EXPECT_NE(rows.at("radd")->notes[0].second.find("no ELBO bound (ppl_elbo) evaluated"), std::string::npos);
  EXPECT_NE(rows.at("radd")->notes[1].second.find("ptb 16 of 86, wikitext2 229 (all)"), std::string::npos)
      << rows.at("radd")->notes[1].second;
  EXPECT_EQ(rows.at("radd")->label(), "radd [1, 2]");  // the only footnotes, numbered from 1
  EXPECT_EQ(h.shared_details, "first token skipped; 1024-token windows; reference packing");

  const std::string md = render_markdown(r);
  const size_t head = md.find("## Headline: perplexity"), runs = md.find("## Runs");
  ASSERT_NE(head, std::string::npos) << md;
  EXPECT_LT(head, runs);
  EXPECT_LT(head, md.find("## ppl "));
  EXPECT_NE(md.find("| radd [1, 2] | random orders exact, K=1 | subset | 130.0 ± 3.0 | 70.0 ± 2.0 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| sedd | ELBO upper bound, 16 MC steps | all | ≤ 110.0 ± 2.0 | ≤ 55.0 ± 1.0 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| gpt | l2r exact | all | 120.5 ± 1.5 | 40.2 ± 0.5 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| ao_gpt | random orders exact, K=4 | all |  | 58.0 ± 0.5 |"), std::string::npos) << md;
  EXPECT_NE(md.find("\n1. radd (masked_diffusion_encoder): no ELBO bound"), std::string::npos) << md;
  EXPECT_NE(md.find("All rows: first token skipped; 1024-token windows; reference packing."), std::string::npos);

  const std::string text = render_headline_text(r);
  EXPECT_EQ(text.rfind("perplexity (lower is better", 0), 0u) << text;
  EXPECT_NE(text.find("≤ 110.0 ± 2.0"), std::string::npos) << text;
  EXPECT_NE(text.find("[2] radd: windows evaluated: ptb 16 of 86"), std::string::npos) << text;
  const std::string html = render_html(r, {});
  EXPECT_LT(html.find("Headline: perplexity"), html.find("<h2>Runs</h2>"));
  EXPECT_NE(html.find("<td>radd [1, 2]</td><td>random orders exact, K=1</td><td>subset</td>"), std::string::npos);
  // No perplexity anywhere: no headline section.
  Results none;
  none.runs["x"].metrics["d/eval_tok_s"] = {100, std::nullopt, 0, false, true, "throughput"};
  EXPECT_TRUE(headline_table(none).rows.empty());
  EXPECT_EQ(render_headline_text(none), "");
  EXPECT_EQ(render_markdown(none).find("Headline"), std::string::npos);
}

// One table per family: columns dataset × measure in the paper's order, a window subset in its cell, protocol parts
// attached to the whole table, a column or a cell, wherever they hold.
TEST(ResultsTest, MetricTablesAttachProtocolPartsWhereTheyHold) {
  const Results r = paradigm_results();
  const auto tables = metric_tables(r);
  ASSERT_EQ(tables.size(), 2u);  // ppl, then bpb
  const MetricTable& ppl = tables[0];
  EXPECT_EQ(ppl.title(), "ppl (lower is better)");
  std::vector<std::string> headers;
  for (const auto& c : ppl.columns) headers.push_back(c.text);
  EXPECT_EQ(headers, (std::vector<std::string>{"ptb L2R", "ptb any-order K=1", "ptb ELBO bound", "wikitext2 L2R",
                                               "wikitext2 any-order K=1", "wikitext2 any-order K=4",
                                               "wikitext2 ensemble M=8", "wikitext2 ELBO bound"}));
  ASSERT_EQ(ppl.rows.size(), 4u);
  EXPECT_EQ(ppl.rows[3].label, "sedd");
  EXPECT_EQ(ppl.rows[3].cells[3].text, "50.0 ± 1.0 (16/229 windows)");
  EXPECT_EQ(ppl.rows[3].cells[2].text, "≤ 110.0 ± 2.0");
  EXPECT_EQ(ppl.shared, (std::vector<std::string>{"All cells: first token skipped; 1024-token windows; reference "
                                                  "packing"}));
  // radd's ptb cell alone pro-rated its bytes: the column's one cell, so its column's note says so.
  ASSERT_EQ(ppl.columns[1].notes.size(), 1u);
  EXPECT_EQ(ppl.notes[ppl.columns[1].notes[0] - 1],
            "random orders exact, K=1; bytes pro-rated to the scored tokens (estimate)");
  EXPECT_EQ(ppl.rows[2].cells[1].text, "130.0 ± 3.0 (16/86 windows)");
  EXPECT_TRUE(ppl.rows[2].cells[1].notes.empty());
  EXPECT_EQ(tables[1].title(), "bpb on wikitext2 (lower is better)");
}

// Infilling metrics: a table per family with columns place × percent hidden (places in the README's order) and a
// row per run and route; the judge's score of the true tokens once, from the first run that carries it.
TEST(ResultsTest, InfillTablesHaveColumnsPlaceByRatioAndARowPerRoute) {
  InfillKey k;
  ASSERT_TRUE(parse_infill("ppl_infill_middle_r50_mix4", "infill_ppl", k));
  EXPECT_EQ(k.column, "ppl_infill_middle_r50_");
  EXPECT_EQ(k.place, "middle");
  EXPECT_EQ(k.percent, 50);
  EXPECT_EQ(k.route, "mix4");
  ASSERT_TRUE(parse_infill("fill_judge_ppl_spans_r10_truth", "infill_fill_judge_ppl", k));
  EXPECT_EQ(k.column, "fill_judge_ppl_spans_r10_");
  EXPECT_EQ(k.route, "truth");
  EXPECT_FALSE(parse_infill("ppl_k4", "ppl", k));
  EXPECT_FALSE(parse_infill("ppl_infill_middle", "infill_ppl", k));

  Results r;
  auto put = [&](const std::string& run, const std::string& family, const std::string& metric, double v) {
    MetricParams p;
    p.family = family;
    p.mode = "infill";
    r.runs[run].metrics["wiki/" + metric] = {v, 0.5, 8, false, family == "infill_fill_acc", "infill", p};
  };
  put("gpt", "infill_ppl", "ppl_infill_random_r50_prefix", 40);
  put("gpt", "infill_ppl", "ppl_infill_middle_r50_prefix", 30);
  put("gpt", "infill_ppl", "ppl_infill_middle_r10_prefix", 20);
  put("ao", "infill_ppl", "ppl_infill_middle_r50_k4", 25);
  put("ao", "infill_ppl", "ppl_infill_middle_r50_mix4", 24);
  put("ao", "infill_fill_acc", "fill_acc_middle_r50_greedy", 0.3);
  put("ao", "infill_fill_judge_ppl", "fill_judge_ppl_middle_r50_greedy", 9);
  put("ao", "infill_fill_judge_ppl", "fill_judge_ppl_middle_r50_truth", 12);
  put("gpt", "infill_fill_judge_ppl", "fill_judge_ppl_middle_r50_greedy", 11);
  put("gpt", "infill_fill_judge_ppl", "fill_judge_ppl_middle_r50_truth", 12);
  put("aaa", "infill_fill_acc", "fill_acc_middle_r50_sampled", 0.1);  // first in order, fillings never judged
  const auto tables = metric_tables(r);
  ASSERT_EQ(tables.size(), 3u);  // infill_ppl, infill_fill_acc, infill_fill_judge_ppl
  const MetricTable& ppl = tables[0];
  EXPECT_EQ(ppl.title(), "infill_ppl on wiki (lower is better)");
  std::vector<std::string> headers, labels;
  for (const auto& c : ppl.columns) headers.push_back(c.text);
  for (const auto& row : ppl.rows) labels.push_back(row.label);
  EXPECT_EQ(headers, (std::vector<std::string>{"middle 10%", "middle 50%", "random 50%"}));
  EXPECT_EQ(labels, (std::vector<std::string>{"ao · k4", "ao · mix4", "gpt · prefix"}));
  EXPECT_EQ(ppl.rows[2].cells[0].text, "20.0 ± 0.5");
  EXPECT_EQ(ppl.rows[0].cells[1].text, "25.0 ± 0.5");
  EXPECT_EQ(ppl.rows[0].cells[0].text, "");
  EXPECT_EQ(tables[1].title(), "infill_fill_acc on wiki (higher is better)");
  labels.clear();
  for (const auto& row : tables[2].rows) labels.push_back(row.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"ao · greedy", "the true tokens", "gpt · greedy"}));
}

TEST(ResultsTest, SaveLoadAndMergeOverwriteMetricsKeyByKey) {
  testing::TempDir tmp;
  Results a = sample_results();
  a.save(tmp.file("results.json"));
  Results loaded = Results::load(tmp.file("results.json"));
  Results update;
  update.runs["gpt_small"].metrics["wikitext2/ppl"] = {30.0, 0.25, 40, false, false, "new"};
  update.runs["new_run"].plugin = "ao_gpt";
  loaded.merge(update);
  EXPECT_DOUBLE_EQ(loaded.runs.at("gpt_small").metrics.at("wikitext2/ppl").value, 30.0);
  EXPECT_DOUBLE_EQ(loaded.runs.at("gpt_small").metrics.at("lambada/ppl").value, 51.0);  // kept
  EXPECT_EQ(loaded.runs.at("gpt_small").plugin, "gpt");
  EXPECT_EQ(loaded.runs.size(), 3u);
}

TEST(ResultsTest, RejectsFilesWithoutTheSchemaTag) {
  EXPECT_THROW(Results::from_json({{"runs", nlohmann::json::object()}}), DataError);
  EXPECT_THROW(Results::from_json({{"schema", "aobench.results/1"}, {"runs", {{"r", {{"plugin", "x"}}}}}}),
               DataError);  // a run without "metrics"
}

TEST(ResultsTest, MarkdownMarksBoundsAndStderr) {
  const std::string md = render_markdown(sample_results());
  EXPECT_NE(md.find("## ppl (lower is better)"), std::string::npos) << md;
  // Columns dataset × measure; a protocol part its column shares is the column's footnote, any other one its
  // cell's; the footnotes are numbered in reading order.
  EXPECT_NE(md.find("| run | lambada L2R [1] | wikitext2 L2R |"), std::string::npos) << md;
  EXPECT_NE(md.find("| gpt_small | 51 | 35.2 ± 0.5 [2] |"), std::string::npos) << md;
  EXPECT_NE(md.find("| sedd_small |  | ≤ 41.5 ± 1.2 [3] |"), std::string::npos) << md;
  EXPECT_NE(md.find("\n1. l2r exact\n2. l2r exact; first token skipped\n3. ELBO upper bound\n"), std::string::npos)
      << md;
  EXPECT_NE(md.find("- git_commit: abc123"), std::string::npos) << md;
  // A comparison with an encoder or any-order model shows finding 5's table; a GPT-only one does not.
  EXPECT_NE(md.find("(finding 5)"), std::string::npos) << md;
  Results ar_only = sample_results();
  ar_only.runs.erase("sedd_small");
  EXPECT_EQ(render_markdown(ar_only).find("(finding 5)"), std::string::npos);
}

TEST(ResultsTest, MarkdownPutsEnsembleSizesSideBySide) {
  Results r = sample_results();
  auto& run = r.runs.at("gpt_small");
  for (int m : {1, 2, 8})
    run.metrics["wikitext2/ppl_m" + std::to_string(m)] = MetricValue{
        100.0 - m, 1.5, 40, false, false, "context-order ensemble M=" + std::to_string(m), {"ppl", "ensemble", 0, m}};
  run.metrics["wikitext2/ppl_map"] = MetricValue{7.0, std::nullopt, 0, false, false, "", {"ppl_map"}};  // not a member
  const std::string md = render_markdown(r);
  // One perplexity table: the ensemble sizes are columns of it, after the L2R column of the same dataset.
  EXPECT_NE(md.find("| run | lambada L2R [1] | wikitext2 L2R | wikitext2 ensemble M=1 [2] | wikitext2 ensemble M=2 [3] "
                    "| wikitext2 ensemble M=8 [4] |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| gpt_small | 51 | 35.2 ± 0.5 [5] | 99.0 ± 1.5 | 98.0 ± 1.5 | 92.0 ± 1.5 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("\n4. context-order ensemble M=8\n"), std::string::npos) << md;
  EXPECT_EQ(md.find("## ppl_m2"), std::string::npos) << md;  // no table per size
  EXPECT_NE(md.find("## ppl_map (lower is better)"), std::string::npos) << md;
  EXPECT_NE(md.find("## ppl (lower is better)"), std::string::npos) << md;
}

TEST(ResultsTest, CsvIsFlatOneRowPerMetric) {
  const std::string csv = render_csv(sample_results());
  EXPECT_EQ(csv.rfind("run,plugin,flavour,paradigm,dataset,metric,value,stderr,n,is_bound,higher_is_better,"
                      "protocol\n",
                      0),
            0u);
  EXPECT_NE(csv.find("gpt_small,gpt,debug,autoregressive,wikitext2,ppl,35.25,0.5,40,false,false,"
                     "l2r exact; first token skipped\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("gpt_small,gpt,debug,autoregressive,lambada,ppl,51,,0,false,false,l2r exact\n"), std::string::npos)
      << csv;
  EXPECT_NE(csv.find("sedd_small,sedd,,masked_diffusion_encoder,wikitext2,ppl,41.5,1.25,40,true,false"),
            std::string::npos)
      << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4);
}

TEST(ResultsTest, LatexIsABooktabsTable) {
  const std::string tex = render_latex(sample_results());
  EXPECT_NE(tex.find("\\begin{tabular}{lrr}"), std::string::npos) << tex;
  EXPECT_NE(tex.find("\\toprule\nrun & lambada L2R\\textsuperscript{1} & wikitext2 L2R \\\\\n\\midrule"),
            std::string::npos)
      << tex;
  EXPECT_NE(tex.find("gpt\\_small & 51 & 35.2 $\\pm$ 0.5\\textsuperscript{2} \\\\"), std::string::npos) << tex;
  EXPECT_NE(tex.find("sedd\\_small &  & $\\le$ 41.5 $\\pm$ 1.2\\textsuperscript{3} \\\\"), std::string::npos) << tex;
  EXPECT_NE(tex.find("\\caption{ppl (lower is better). (1) l2r exact. (2) l2r exact; first token skipped. (3) ELBO "
                     "upper bound.}"),
            std::string::npos)
      << tex;
  EXPECT_NE(tex.find("\\bottomrule"), std::string::npos);
}

TEST(ResultsTest, CompareFlagsOnlyRegressionsPastTheThreshold) {
  const Results base = sample_results();
  Results same = base;
  for (const auto& row : compare_results(base, same, 0.02).rows) {
    EXPECT_FALSE(row.worse) << row.metric;
    EXPECT_DOUBLE_EQ(row.rel_delta, 0.0);
  }
  Results worse = base;
  worse.runs["gpt_small"].metrics["wikitext2/ppl"].value = 35.25 * 1.05;  // +5% perplexity
  worse.runs["gpt_small"].metrics["lambada/ppl"].value = 51.0 * 0.5;      // improvement
  int n_worse = 0;
  for (const auto& row : compare_results(base, worse, 0.02).rows) {
    n_worse += row.worse;
    if (row.metric == "wikitext2/ppl" && row.run == "gpt_small") {
      EXPECT_TRUE(row.worse);
      EXPECT_NEAR(row.rel_delta, 0.05, 1e-12);
    }
  }
  EXPECT_EQ(n_worse, 1);
  EXPECT_EQ(compare_results(base, worse, 0.10).rows.size(), 3u);
  for (const auto& row : compare_results(base, worse, 0.10).rows) EXPECT_FALSE(row.worse);  // within 10%
  // Higher-is-better metrics regress when they drop.
  Results hb = base, hb_low = base;
  hb.runs["gpt_small"].metrics["wikitext2/eval_tok_s"] = {1000.0, std::nullopt, 0, false, true, ""};
  hb_low.runs["gpt_small"].metrics["wikitext2/eval_tok_s"] = {900.0, std::nullopt, 0, false, true, ""};
  bool flagged = false;
  for (const auto& row : compare_results(hb, hb_low, 0.02, {"eval_tok_s"}).rows) flagged |= row.worse;
  EXPECT_TRUE(flagged);
  // Throughput is compared only when asked for: by default the gate looks at quality metrics.
  for (const auto& row : compare_results(hb, hb_low, 0.02).rows) EXPECT_NE(row.metric, "wikitext2/eval_tok_s");
  EXPECT_EQ(compare_results(hb, hb_low, 0.02, {"ppl"}).rows.size(), 3u);
  EXPECT_EQ(compare_results(hb, hb_low, 0.02, {"wikitext2/*"}).rows.size(), 3u);  // 2 ppl + eval_tok_s
}

TEST(ResultsTest, CompareCommandExitCodes) {
  testing::TempDir tmp;
  Results base = sample_results();
  base.save(tmp.file("base.json"));
  base.save(tmp.file("same.json"));
  Results worse = base;
  worse.runs["sedd_small"].metrics["wikitext2/ppl"].value = 50.0;
  worse.save(tmp.file("worse.json"));
  std::string out;
  EXPECT_EQ(testing::run_aobench("compare " + tmp.file("base.json") + " " + tmp.file("same.json"), &out), 0) << out;
  EXPECT_EQ(testing::run_aobench("compare " + tmp.file("base.json") + " " + tmp.file("worse.json"), &out), 1) << out;
  EXPECT_NE(out.find("WORSE"), std::string::npos) << out;
  EXPECT_EQ(testing::run_aobench("compare " + tmp.file("base.json") + " " + tmp.file("worse.json") + " --threshold 0.5",
                                 &out),
            0)
      << out;
}

TEST(ResultsTest, WriteReportProducesEveryRendering) {
  testing::TempDir tmp;
  write_report(sample_results(), tmp.file("report"));
  for (const char* f : {"results.json", "summary.md", "results.csv", "results.tex", "index.html"})
    EXPECT_TRUE(std::filesystem::exists(tmp.file(std::string("report/") + f))) << f;
  const std::string html = testing::read_text(tmp.file("report/index.html"));
  EXPECT_NE(html.find("≤ 41.5 ± 1.2"), std::string::npos);
  EXPECT_NE(html.find("href=\"results.csv\""), std::string::npos);
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
    for (const char* f : {"loss_val.png", "loss_val.svg", "loss_train.png", "loss_train.svg"})
      EXPECT_GT(std::filesystem::file_size(tmp.file(std::string("report/") + f)), 100u) << f;
    EXPECT_NE(html.find("<img src=\"loss_val.png\""), std::string::npos);
  }
}

// Metric parameters and training FLOPs are fields of the file: written, read back, checked for type.
TEST(ResultsTest, MetricParamsAndTrainFlopsAreFields) {
  Results r = sample_results();
  MetricParams gen{"genppl"};
  gen.steps = 64, gen.top_p = 0.95, gen.temperature = 0.9;
  r.runs.at("gpt_small").metrics["gen_p0.95_t0.9_s64/genppl"] = {210.5, 12.5, 8, false, false, "judge gpt", gen};
  r.runs.at("gpt_small").metrics["wikitext2/ppl_m16_p256"] = {
      31.0, 0.5, 40, false, false, "ensemble", {"ppl", "ensemble", 0, 16, 256}};
  const nlohmann::json j = r.to_json();
  const nlohmann::json& run = j["runs"]["gpt_small"];
  EXPECT_EQ(run["train_flops"], 1.5e12);
  EXPECT_EQ(run["metrics"]["wikitext2/ppl"]["params"], (nlohmann::json{{"family", "ppl"}, {"mode", "l2r"}}));
  EXPECT_EQ(run["metrics"]["wikitext2/ppl_m16_p256"]["params"],
            (nlohmann::json{{"family", "ppl"}, {"mode", "ensemble"}, {"ensemble", 16}, {"positions", 256}}));
  EXPECT_EQ(run["metrics"]["gen_p0.95_t0.9_s64/genppl"]["params"],
            (nlohmann::json{{"family", "genppl"}, {"steps", 64}, {"top_p", 0.95}, {"temperature", 0.9}}));
  const Results back = Results::from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(back.to_json(), j);
  EXPECT_DOUBLE_EQ(back.runs.at("gpt_small").train_flops, 1.5e12);
  EXPECT_EQ(*back.runs.at("gpt_small").metrics.at("gen_p0.95_t0.9_s64/genppl").params.top_p, 0.95);

  // A params field of the wrong type, or an unknown one, names the file and the key.
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"orders", "4"}, {"top_p", "high"}, {"mode", 3}, {"orders_k", 4}}) {
    nlohmann::json bad = j;
    bad["runs"]["gpt_small"]["metrics"]["wikitext2/ppl"]["params"][key] = value;
    try {
      Results::from_json(bad, "bad.json");
      ADD_FAILURE() << key << " accepted";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("runs.gpt_small.metrics.wikitext2/ppl.params." + key), std::string::npos)
          << e.what();
    }
  }
  nlohmann::json bad = j;
  bad["runs"]["gpt_small"]["train_flops"] = "many";
  EXPECT_THROW(Results::from_json(bad), DataError);
}

// The renderers read the fields, not the names: a metric named like an any-order perplexity but measured
// as L2R is shown as L2R, and a name without fields is not a perplexity at all.
TEST(ResultsTest, RenderersReadTheFieldsNotTheNames) {
  Results r;
  RunResults& ao = r.runs["ao"];
  ao.paradigm = "any_order";
  ao.metrics["wt/ppl_k9"] = {33.0, 0.5, 10, false, false, "renamed", {"ppl"}};  // no mode: not a headline kind
  ao.metrics["wt/left_to_right"] = {44.0, 0.5, 10, false, false, "l2r exact", {"ppl", "l2r"}};
  ao.metrics["wt/orders"] = {55.0, 0.5, 10, false, false, "random orders exact, K=3", {"ppl", "random", 3}};
  ao.metrics["wt/orders_few"] = {66.0, 0.5, 10, false, false, "random orders exact, K=2", {"ppl", "random", 2}};
  const Headline h = headline_table(r);
  ASSERT_EQ(h.rows.size(), 1u);
  EXPECT_EQ(h.rows[0].metric, "orders");  // the largest K
  EXPECT_DOUBLE_EQ(h.rows[0].cells.at("wt")->value, 55.0);
  ao.metrics.erase("wt/orders");
  ao.metrics.erase("wt/orders_few");
  const Headline fallback = headline_table(r);
  ASSERT_EQ(fallback.rows.size(), 1u);
  EXPECT_EQ(fallback.rows[0].metric, "left_to_right");
  ASSERT_EQ(fallback.rows[0].notes.size(), 1u);
  EXPECT_NE(fallback.rows[0].notes[0].second.find("no exact any-order perplexity (ppl_k<K>) evaluated; the row "
                                                  "shows left_to_right"),
            std::string::npos);
  // Speed points come from the steps field.
  MetricParams s3{"gen_s"}, s20{"gen_s"};
  s3.steps = 3, s20.steps = 20;
  ao.metrics["fast/timing"] = {0.25, 0.01, 3, false, false, "", s20};
  ao.metrics["slow/timing"] = {0.5, 0.02, 3, false, false, "", s3};
  testing::TempDir tmp;
  render_plots(r, tmp.path.string());
  EXPECT_EQ(testing::read_text(tmp.file("gen_speed.dat")),
            "# ao: steps, seconds, stderr\n3 0.5 0.02\n20 0.25 0.01\n\n\n");
}

std::string legacy_fixture() { return std::string(AOBENCH_TEST_DATA) + "/results/legacy_v1.json"; }

// A results file written before the fields existed: loading converts its metric names once.
TEST(ResultsTest, LegacyFileGetsItsParamsFromTheNames) {
  const Results r = Results::load(legacy_fixture());
  auto params = [&](const std::string& run, const std::string& key) {
    return r.runs.at(run).metrics.at(key).params.to_json();
  };
  using nlohmann::json;
  EXPECT_EQ(params("gpt", "fortunes_val/ppl"), (json{{"family", "ppl"}, {"mode", "l2r"}}));
  EXPECT_EQ(params("gpt", "fortunes_val/eval_tok_s"), (json{{"family", "eval_tok_s"}, {"mode", "l2r"}}));
  EXPECT_EQ(params("ao_gpt", "fortunes_val/nll_k4"), (json{{"family", "nll"}, {"mode", "random"}, {"orders", 4}}));
  EXPECT_EQ(params("ao_gpt", "fortunes_val/ppl_m16"),
            (json{{"family", "ppl"}, {"mode", "ensemble"}, {"ensemble", 16}}));
  EXPECT_EQ(params("ao_gpt", "fortunes_val/ppl_m16_p256"),
            (json{{"family", "ppl"}, {"mode", "ensemble"}, {"ensemble", 16}, {"positions", 256}}));
  EXPECT_EQ(params("ao_gpt", "fortunes_val/eval_tok_s_m16"),
            (json{{"family", "eval_tok_s"}, {"mode", "ensemble"}, {"ensemble", 16}}));
  EXPECT_EQ(params("sedd", "fortunes_val/nll_elbo"), (json{{"family", "nll"}, {"mode", "elbo"}}));
  EXPECT_EQ(params("sedd", "notes/ppl_kx"), (json{{"family", "ppl_kx"}}));  // another tool's metric
  EXPECT_EQ(params("gpt", "gen_p0.95_t0.9_s64/genppl"),
            (json{{"family", "genppl"}, {"steps", 64}, {"top_p", 0.95}, {"temperature", 0.9}}));
  EXPECT_EQ(params("gpt", "gen_p1_t1e-06_s64/entropy"),
            (json{{"family", "entropy"}, {"steps", 64}, {"top_p", 1.0}, {"temperature", 1e-06}}));
  EXPECT_EQ(params("gpt", "speed_s16/gen_tok_s"), (json{{"family", "gen_tok_s"}, {"steps", 16}}));
  EXPECT_DOUBLE_EQ(r.runs.at("gpt").train_flops, 0.0);  // not recorded then
}

// ... and renders exactly like the same results written with the fields (and the run table's new column
// stays empty); the sweeps come out in steps order.
TEST(ResultsTest, LegacyFileRendersLikeANewOne) {
  testing::TempDir tmp;
  const Results legacy = Results::load(legacy_fixture());
  legacy.save(tmp.file("converted.json"));
  EXPECT_NE(testing::read_text(tmp.file("converted.json")).find("\"params\": {"), std::string::npos);
  const Results converted = Results::load(tmp.file("converted.json"));
  const std::string md = render_markdown(legacy);
  EXPECT_EQ(render_markdown(converted), md);
  EXPECT_EQ(render_csv(converted), render_csv(legacy));
  EXPECT_EQ(render_latex(converted), render_latex(legacy));
  EXPECT_EQ(render_html(converted, {}), render_html(legacy, {}));
  EXPECT_NE(md.find("| ao_gpt | random orders exact, K=4 | all | 39.5 ± 0.5 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| sedd | ELBO upper bound, 16 MC steps | all | ≤ 60.5 ± 1.5 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| gpt | gpt | debug | autoregressive | 128768 | 300 | 614400 |  |"), std::string::npos) << md;
  // One perplexity table on the one dataset: a column per measure, ensemble sizes ascending, a subset of
  // positions after the full ensembles, the sweeps in steps order.
  EXPECT_NE(
      md.find("## ppl on fortunes_val (lower is better)\n\n| run | L2R [1] | any-order K=1 [2] | any-order K=4 [3] "
              "| ensemble M=1 [4] | ensemble M=4 [5] | ensemble M=16 [6] | ensemble M=16 (256 positions) [7] | "
              "ELBO bound [8] |"),
      std::string::npos)
      << md;
  EXPECT_NE(md.find("| ao_gpt | 25.5 ± 0.4 (16/604 windows) | 40.2 ± 0.8 | 39.5 ± 0.5 |"), std::string::npos) << md;
  EXPECT_NE(md.find("All cells: first token skipped; 128-token windows; simple packing.\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| run | gen_p0.95_t0.9_s64 [1] | gen_p0.95_t0.9_s128 [2] |"), std::string::npos) << md;
  EXPECT_NE(md.find("## eval_tok_s on fortunes_val (higher is better)\n\n| run | L2R [1] | ensemble M=16 [2] |"),
            std::string::npos)
      << md;
}

// Training FLOPs in the run tables.
TEST(ResultsTest, RunTablesShowTokensParamsAndTrainFlops) {
  const Results r = sample_results();
  EXPECT_NE(render_markdown(r).find("| run | plugin | flavour | paradigm | params | steps | tokens | train FLOPs |\n"
                                    "|---|---|---|---|---:|---:|---:|---:|\n"
                                    "| gpt_small | gpt | debug | autoregressive | 1234 | 20 | 5120 | 1.5e+12 |\n"),
            std::string::npos)
      << render_markdown(r);
  const std::string html = render_html(r, {});
  EXPECT_NE(html.find("<th>tokens</th><th>train FLOPs</th>"), std::string::npos);
  EXPECT_NE(html.find("<td class=num>5120</td><td class=num>1.5e+12</td>"), std::string::npos) << html;
}

// One job under three seeds as `aobench run` makes them (seed k: train.seed + k, data.seed pinned to seed 0's, its
// own out_dir; seed 0 has no data.seed) beside a single GPT run. The AO-GPT seeds' wikitext2 perplexities 40, 42, 44
// (mean 42, sd 2); the third seed has no ptb perplexity (100, 110: mean 105, sd √50 = 7.071).
Results seeded_results() {
  Results r;
  const nlohmann::json base = {{"model", {{"plugin", "ao_gpt"}, {"flavour", "debug"}}},
                               {"data", {{"train", "t.bin"}}},
                               {"train", {{"seed", 1337}, {"out_dir", "runs/e/ao_gpt"}, {"learning_rate", 6e-4}}},
                               {"eval", {{"mode", "random"}, {"orders", 4}}}};
  const MetricParams k4{"ppl", "random", 4};
  const double wiki[] = {40, 42, 44}, ptb[] = {100, 110, NAN};
  const double val10[] = {5.0, 5.2, 5.4}, val20[] = {4.0, 4.4, 4.8};
  for (int k = 0; k < 3; ++k) {
    const std::string name = k ? "ao_gpt_seed" + std::to_string(k) : "ao_gpt";
    RunResults run;
    run.plugin = "ao_gpt";
    run.flavour = "debug";
    run.paradigm = "any_order";
    run.params = 1000;
    run.steps = 20;
    run.tokens = 5120;  // 256 tokens per step
    run.config = base;
    run.config["train"]["seed"] = 1337 + k;
    run.config["train"]["out_dir"] = "runs/e/" + name;
    if (k) run.config["data"]["seed"] = 1337;
    run.metrics["wikitext2/ppl_k4"] = {wiki[k], 0.5, 229, false, false, "random orders exact, K=4", k4};
    if (k < 2) run.metrics["ptb/ppl_k4"] = {ptb[k], 1.5, 86, false, false, "random orders exact, K=4", k4};
    run.curves["loss/val"] = {{10, val10[k]}, {20, val20[k]}};
    r.runs[name] = run;
  }
  r.runs["ao_gpt"].curves["loss/val"].emplace_back(30, 3.5);  // a step the others have not reached
  RunResults gpt;
  gpt.plugin = "gpt";
  gpt.paradigm = "autoregressive";
  gpt.steps = 20;
  gpt.tokens = 5120;
  gpt.config = base;
  gpt.config["model"]["plugin"] = "gpt";
  gpt.metrics["wikitext2/ppl"] = {35.25, 0.5, 229, false, false, "l2r exact", {"ppl", "l2r"}};
  gpt.metrics["ptb/ppl"] = {80, 1, 86, false, false, "l2r exact", {"ppl", "l2r"}};
  gpt.curves["loss/val"] = {{10, 4.5}, {20, 3.75}};
  r.runs["gpt"] = gpt;
  return r;
}

TEST(ResultsReplicatesTest, GroupsRunsByConfigNotByName) {
  Results r = seeded_results();
  // Settings that do not change what is trained differ freely between replicates.
  r.runs["ao_gpt_seed2"].config["eval"]["orders"] = 16;
  r.runs["ao_gpt_seed2"].config["sample"] = {{"steps", 64}};
  r.runs["ao_gpt_seed2"].config["train"]["log_interval"] = 5;
  // Another train.seed without a data.seed saw its tokens in another order: not a replicate.
  RunResults other_order = r.runs.at("ao_gpt");
  other_order.config["train"]["seed"] = 4242;
  r.runs["ao_gpt_order"] = other_order;
  RunResults other_lr = r.runs.at("ao_gpt_seed1");  // another hyperparameter
  other_lr.config["train"]["learning_rate"] = 1e-3;
  other_lr.config["train"]["seed"] = 2000;
  r.runs["ao_gpt_lr"] = other_lr;
  r.runs["hf_a"].paradigm = "autoregressive";  // no config (a Hugging Face model, an older file): alone
  r.runs["hf_b"].paradigm = "autoregressive";
  const auto groups = replicate_groups(r);
  std::map<std::string, std::vector<std::string>> by_name;
  for (const auto& g : groups) {
    by_name[g.name] = g.runs;
    ASSERT_EQ(g.members.size(), g.runs.size());
    for (size_t i = 0; i < g.runs.size(); ++i) EXPECT_EQ(g.members[i], &r.runs.at(g.runs[i]));
  }
  EXPECT_EQ(by_name,
            (std::map<std::string, std::vector<std::string>>{{"ao_gpt", {"ao_gpt", "ao_gpt_seed1", "ao_gpt_seed2"}},
                                                             {"ao_gpt_lr", {"ao_gpt_lr"}},
                                                             {"ao_gpt_order", {"ao_gpt_order"}},
                                                             {"gpt", {"gpt"}},
                                                             {"hf_a", {"hf_a"}},
                                                             {"hf_b", {"hf_b"}}}));
  EXPECT_EQ(groups.front().name, "ao_gpt");  // groups in name order
  EXPECT_EQ(seeds_label(groups.front()), "ao_gpt (3 seeds)");
  EXPECT_EQ(seeds_label(groups.back()), "hf_b");
  // data.seed −1 (the base config's "unset") is train.seed, like an absent one.
  EXPECT_EQ(replicate_key({{"train", {{"seed", 5}}}, {"data", {{"seed", -1}}}}),
            replicate_key({{"train", {{"seed", 6}, {"out_dir", "x"}}}, {"data", {{"seed", 5}}}}));
  // A copy of a run under another name (same train.seed) is no replicate of it: nothing in the group is pooled.
  Results copies = seeded_results();
  copies.runs["ao_gpt_copy"] = copies.runs.at("ao_gpt");
  for (const auto& g : replicate_groups(copies)) EXPECT_EQ(g.runs.size(), 1u) << g.name;
}

TEST(ResultsReplicatesTest, ValLossBandIsMeanAndSdOverSeeds) {
  Results r = seeded_results();
  // A resumed run logs steps again (metrics.jsonl is appended to): the later value counts, once.
  auto& seed1 = r.runs.at("ao_gpt_seed1").curves.at("loss/val");
  seed1.insert(seed1.begin() + 1, std::make_pair(20.0, 9.0));
  const auto groups = replicate_groups(r);
  const RunGroup& ao = groups.front();
  ASSERT_EQ(ao.runs.size(), 3u);
  const auto band = val_loss_band(ao);
  ASSERT_EQ(band.size(), 2u);  // step 30: one seed only, dropped
  EXPECT_DOUBLE_EQ(band[0].step, 10);
  EXPECT_NEAR(band[0].mean, 5.2, 1e-12);  // (5.0 + 5.2 + 5.4) / 3
  EXPECT_NEAR(band[0].sd, 0.2, 1e-12);    // sqrt((0.2² + 0 + 0.2²) / 2)
  EXPECT_DOUBLE_EQ(band[1].step, 20);
  EXPECT_NEAR(band[1].mean, 4.4, 1e-12);
  EXPECT_NEAR(band[1].sd, 0.4, 1e-12);
  const auto one = val_loss_band(groups.back());  // gpt alone: its curve, no spread
  ASSERT_EQ(one.size(), 2u);
  EXPECT_DOUBLE_EQ(one[1].mean, 3.75);
  EXPECT_TRUE(std::isnan(one[1].sd));
  // A run stopped before its first evaluation has only the step-0 point (the untrained model): no final loss.
  Results early = seeded_results();
  auto& curve = early.runs.at("ao_gpt_seed2").curves.at("loss/val");
  curve = {{0.0, 10.8}};
  std::vector<std::string> untrained;
  const Estimate e = final_val_loss(replicate_groups(early).front(), &untrained);
  EXPECT_EQ(e.n, 2);
  EXPECT_EQ(untrained, std::vector<std::string>{"ao_gpt_seed2"});
  EXPECT_EQ(plateau_text(early.runs.at("ao_gpt_seed2")).find("on the plateau"), std::string::npos);
  // The pooled estimates over seeds.
  std::vector<std::string> missing;
  const Estimate ptb = metric_over_seeds(ao, "ptb/ppl_k4", &missing);
  EXPECT_EQ(ptb.n, 2);
  EXPECT_DOUBLE_EQ(ptb.mean, 105);
  EXPECT_NEAR(ptb.sd, std::sqrt(50.0), 1e-12);
  EXPECT_EQ(missing, std::vector<std::string>{"ao_gpt_seed2"});
}

TEST(ResultsTest, SeedsAreOneRowWithMeanAndSd) {
  const Results r = seeded_results();
  const std::string md = render_markdown(r);
  // Headline: the group is one row, its cells mean ± sd over seeds; ptb lacks a seed (footnote 1).
  EXPECT_NE(md.find("| ao_gpt (3 seeds) [1] | random orders exact, K=4 | all | 105 ± 7 (2/3 seeds) | 42.0 ± 2.0 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| gpt | l2r exact | all | 80.0 ± 1.0 | 35.2 ± 0.5 |"), std::string::npos) << md;
  EXPECT_NE(md.find("The rows \"(n seeds)\": mean ± sd over seeds; other rows: ± the evaluation's stderr."),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("\n1. ao_gpt (3 seeds), ptb ppl_k4: 2/3 seeds, no value from ao_gpt_seed2; the cell is the mean "
                    "± sd over the others"),
            std::string::npos)
      << md;
  // Every run in the run table, no member rows in the metric tables.
  EXPECT_NE(md.find("| ao_gpt_seed1 | ao_gpt | debug | any_order | 1000 | 20 | 5120 |  |"), std::string::npos) << md;
  size_t rows = 0;
  for (size_t at = md.find("| ao_gpt_seed1 |"); at != std::string::npos; at = md.find("| ao_gpt_seed1 |", at + 1))
    ++rows;
  EXPECT_EQ(rows, 1u) << md;
  // The perplexity table: the same cells, K and L2R side by side; what "±" is under it, the missing seed a footnote
  // of its cell.
  EXPECT_NE(md.find("## ppl (lower is better)\n\n| run | ptb L2R [1] | ptb any-order K=4 [2] | wikitext2 L2R [1] | "
                    "wikitext2 any-order K=4 [2] |\n|---|---:|---:|---:|---:|\n"
                    "| ao_gpt (3 seeds) |  | 105 ± 7 (2/3 seeds) [3] |  | 42.0 ± 2.0 |\n"
                    "| gpt | 80.0 ± 1.0 |  | 35.2 ± 0.5 |  |\n\n"
                    "The rows \"(n seeds)\": mean ± sd over seeds; other rows: ± the evaluation's stderr.\n\n"
                    "1. l2r exact\n2. random orders exact, K=4\n"
                    "3. ao_gpt (3 seeds), ptb/ppl_k4: 2/3 seeds, no value from ao_gpt_seed2; the cell is the mean ± "
                    "sd over the others\n"),
            std::string::npos)
      << md;
  // The lone run renders as it would without the seeds beside it.
  Results alone;
  alone.runs["gpt"] = r.runs.at("gpt");
  const std::string md_alone = render_markdown(alone);
  EXPECT_NE(md_alone.find("| gpt | l2r exact | all | 80.0 ± 1.0 | 35.2 ± 0.5 |"), std::string::npos) << md_alone;
  EXPECT_EQ(md_alone.find("seeds"), std::string::npos) << md_alone;
  EXPECT_EQ(render_csv(alone).find("seeds"), std::string::npos);

  const std::string text = render_headline_text(r);
  EXPECT_NE(text.find("105 ± 7 (2/3 seeds)"), std::string::npos) << text;
  EXPECT_NE(text.find("[1] ao_gpt (3 seeds), ptb ppl_k4: 2/3 seeds"), std::string::npos) << text;
  const std::string tex = render_latex(r);
  EXPECT_NE(tex.find("ao\\_gpt (3 seeds) &  & 105 $\\pm$ 7 (2/3 seeds)\\textsuperscript{3} &  & 42.0 $\\pm$ 2.0 \\\\"),
            std::string::npos)
      << tex;
  EXPECT_NE(tex.find("mean $\\pm$ sd over seeds"), std::string::npos) << tex;
  const std::string html = render_html(r, {});
  EXPECT_NE(html.find("<tr><td>ao_gpt (3 seeds) [1]</td><td>random orders exact, K=4</td><td>all</td>"
                      "<td class=num>105 ± 7 (2/3 seeds)</td><td class=num>42.0 ± 2.0</td></tr>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<tr><td>ao_gpt (3 seeds)</td><td class=num></td><td class=num>105 ± 7 (2/3 seeds)<sup>3</sup>"
                      "</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<th>ptb any-order K=4<sup>2</sup></th>"), std::string::npos) << html;
  EXPECT_NE(html.find("<li>ao_gpt (3 seeds), ptb/ppl_k4: 2/3 seeds, no value from ao_gpt_seed2"), std::string::npos);
  // CSV: every run's rows as before, then the group's: mean, stderr = sd/√n over seeds, n = seeds.
  const std::string csv = render_csv(r);
  EXPECT_NE(csv.find("\nao_gpt_seed1,ao_gpt,debug,any_order,wikitext2,ppl_k4,42,0.5,229,false,false,"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("\nao_gpt (3 seeds),ao_gpt,debug,any_order,wikitext2,ppl_k4,42,1.154700538,3,false,false,"
                     "\"over seeds: 3/3, stderr = sd/sqrt(n) over seeds; random orders exact, K=4\"\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("\nao_gpt (3 seeds),ao_gpt,debug,any_order,ptb,ppl_k4,105,5,2,false,false,"
                     "\"over seeds: 2/3 (no value from ao_gpt_seed2), stderr"),
            std::string::npos)
      << csv;
}

TEST(ResultsTest, SeedsDrawAMeanLineWithABand) {
  testing::TempDir tmp;
  render_plots(seeded_results(), tmp.path.string());
  const std::string dat = testing::read_text(tmp.file("loss_val.dat"));
  EXPECT_EQ(dat,
            "# ao_gpt (3 seeds): step, mean and sd of the validation loss over seeds\n10 5.2 0.2\n20 4.4 0.4\n\n\n"
            "# gpt\n10 4.5\n20 3.75\n\n\n");
  const std::string gp = testing::read_text(tmp.file("loss_val.gp"));
  EXPECT_NE(gp.find("\"loss_val.dat\" index 0 using 1:($2-$3):($2+$3) with filledcurves fs transparent solid 0.2 "
                    "noborder lc 1 notitle, \"loss_val.dat\" index 0 using 1:2 with linespoints lw 2 ps 0.6 lc 1 "
                    "title 'ao_gpt (3 seeds, ± sd)', \"loss_val.dat\" index 1 with linespoints lw 2 ps 0.6 lc 2 "
                    "title 'gpt'"),
            std::string::npos)
      << gp;
  // Against tokens: the group's tokens per step (5120 / 20).
  EXPECT_NE(testing::read_text(tmp.file("loss_val_tokens.dat")).find("2560 5.2 0.2\n5120 4.4 0.4\n"),
            std::string::npos);
  EXPECT_NE(testing::read_text(tmp.file("loss_val_tokens.gp")).find("filledcurves"), std::string::npos);
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
    EXPECT_GT(std::filesystem::file_size(tmp.file("loss_val.png")), 100u);
  }
  // Every figure: a title, the colour-blind-safe palette (no yellow), the legend below the data.
  EXPECT_NE(gp.find("set title 'Validation loss against optimizer steps'"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set linetype 1 lc rgb \"#0072B2\""), std::string::npos) << gp;
  EXPECT_EQ(gp.find("#F0E442"), std::string::npos) << "Okabe–Ito's yellow is invisible on white";
  EXPECT_NE(gp.find("set key below"), std::string::npos) << gp;
  // Without seeds the script names no colours: the palette's order applies.
  Results alone;
  alone.runs["gpt"] = seeded_results().runs.at("gpt");
  testing::TempDir tmp2;
  render_plots(alone, tmp2.path.string());
  const std::string gp2 = testing::read_text(tmp2.file("loss_val.gp"));
  EXPECT_NE(gp2.find("plot \"loss_val.dat\" index 0 with linespoints lw 2 ps 0.6 title 'gpt'\n"), std::string::npos)
      << gp2;
}

TEST(StatsTest, StderrOfTheMeanUsesTheUnbiasedVariance) {
  // xs = 1..4: mean 2.5, sample variance 5/3, stderr sqrt(5/3 / 4).
  const MeanStderr s = mean_stderr({1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_NEAR(s.stderr_, std::sqrt(5.0 / 3.0 / 4.0), 1e-15);
  EXPECT_EQ(s.n, 4);
  EXPECT_EQ(stderr_of({7.0}), 0.0);
  EXPECT_EQ(stderr_of({}), 0.0);
  EXPECT_EQ(stderr_of({3, 3, 3}), 0.0);
}

}  // namespace
}  // namespace aobench

namespace aobench {
namespace {

// Step columns in numeric order: s64, s256, s1024 (not s1024, s256, s64).
TEST(ResultsTest, NamesWithNumbersSortNumerically) {
  std::vector<std::string> names = {"speed_s1024", "speed_s256", "speed_s64", "gen_p0.95_t1_s8", "gen_p0.9_t1_s8"};
  std::sort(names.begin(), names.end(), NaturalLess{});
  EXPECT_EQ(names,
            (std::vector<std::string>{"gen_p0.9_t1_s8", "gen_p0.95_t1_s8", "speed_s64", "speed_s256", "speed_s1024"}));
  EXPECT_FALSE(NaturalLess{}("a", "a"));
  EXPECT_TRUE(NaturalLess{}("s064", "s64") != NaturalLess{}("s64", "s064"));  // distinct names stay distinct
  Results r;
  for (int steps : {1024, 256, 64}) {
    MetricValue m;
    m.value = 1.0 * steps;
    r.runs["x"].metrics["speed_s" + std::to_string(steps) + "/gen_s"] = m;
  }
  const std::string html = render_html(r, {});
  const size_t s64 = html.find(">speed_s64<"), s256 = html.find(">speed_s256<"), s1024 = html.find(">speed_s1024<");
  ASSERT_NE(s64, std::string::npos) << html;
  EXPECT_LT(s64, s256);
  EXPECT_LT(s256, s1024);
}

}  // namespace
}  // namespace aobench

namespace aobench {
namespace {

// ± values rounded to their significance (the Particle Data Group's rule).
TEST(ResultsTest, ValuesAreRoundedToTheirErrorsSignificance) {
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(rounded_to_error(327.6, 16.02), (P{"328", "16"}));  // 160 → two digits
  EXPECT_EQ(rounded_to_error(1.8141, 0.01523), (P{"1.814", "0.015"}));
  EXPECT_EQ(rounded_to_error(105, 7.071), (P{"105", "7"}));            // 707 → one digit
  EXPECT_EQ(rounded_to_error(2.3456, 0.0097), (P{"2.346", "0.010"}));  // 970 → up to 1000, two digits
  EXPECT_EQ(rounded_to_error(152864, 104883), (P{"150000", "100000"}));
  EXPECT_EQ(rounded_to_error(5.0, 0.0).first, "5");  // no error: the value as it is
}

}  // namespace
}  // namespace aobench

namespace aobench {
namespace {

// The context of every result names the AOBENCH_* switches in force: a timing says which code path made it.
TEST(EnvInfoTest, ContextRecordsTheAobenchEnvironment) {
  const char* old = std::getenv("AOBENCH_FUSED_CE");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  ::setenv("AOBENCH_FUSED_CE", "0", 1);
  const std::string with = env_info()["aobench_env"].get<std::string>();
  EXPECT_NE(with.find("AOBENCH_FUSED_CE=0"), std::string::npos) << with;
  ::unsetenv("AOBENCH_FUSED_CE");
  const std::string without = env_info()["aobench_env"].get<std::string>();
  EXPECT_EQ(without.find("AOBENCH_FUSED_CE"), std::string::npos) << without;
  EXPECT_FALSE(without.empty());  // "none" when nothing is set
  if (saved) ::setenv("AOBENCH_FUSED_CE", saved->c_str(), 1);
}

}  // namespace
}  // namespace aobench
