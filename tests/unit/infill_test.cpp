// Implements: tests of the infilling benchmark (metrics/infill.h) with known answers: the hidden positions of
// every place (counts, spans, separation, reproducibility), the visible-first orders, and whole evaluate_infill
// passes over a token file with context-free models whose hidden-token NLL is known in closed form: the exact
// rows of an any-order model (K orders, their mixture), the conditional bound of an encoder (kept positions
// score nothing), the prefix-only row of a left-to-right model, and position 0's rules; and the fillings
// (evaluate_fillings) of a model that fills every hidden position with one token, whose accuracy, exact-match
// rate and judge perplexity under a context-free judge are known in closed form.
#include <cmath>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/plugin_api.h"
#include "datasets/token_file.h"
#include "metrics/infill.h"
#include "tests/test_util.h"
#include "tests/unit/no_network_scorer.h"

namespace aobench {
namespace {

// Runs of true in a (T) bool row: (start, length) pairs.
std::vector<std::pair<int64_t, int64_t>> runs(const torch::Tensor& row) {
  std::vector<std::pair<int64_t, int64_t>> out;
  auto a = row.accessor<bool, 1>();
  for (int64_t i = 0; i < row.size(0); ++i)
    if (a[i] && (i == 0 || !a[i - 1])) {
      int64_t j = i;
      while (j < row.size(0) && a[j]) ++j;
      out.emplace_back(i, j - i);
    }
  return out;
}

TEST(InfillTest, HiddenCountRoundsAndKeepsOneTokenOfEachKind) {
  EXPECT_EQ(hidden_count(0.5, 128), 64);
  EXPECT_EQ(hidden_count(0.1, 128), 13);  // 12.8
  EXPECT_EQ(hidden_count(0.001, 128), 1);
  EXPECT_EQ(hidden_count(0.999, 128), 127);
}

TEST(InfillTest, OneSpanPlacesSitAtTheStartTheMiddleAndTheEnd) {
  at::Generator gen = at::detail::createCPUGenerator(0);
  const int64_t T = 20;
  const std::map<std::string, int64_t> at = {{"start", 0}, {"middle", 7}, {"end", 14}};  // n = 6
  for (const auto& [place, first] : at) {
    auto h = hide_positions(place, 0.3, 4, 3, T, gen);
    ASSERT_EQ(h.sizes(), torch::IntArrayRef({3, T}));
    for (int64_t r = 0; r < 3; ++r) {
      auto spans = runs(h[r]);
      ASSERT_EQ(spans.size(), 1u) << place;
      EXPECT_EQ(spans[0], std::make_pair(first, int64_t{6})) << place;
    }
  }
}

TEST(InfillTest, SpansAreDisjointSeparatedAndAsEqualAsPossible) {
  at::Generator gen = at::detail::createCPUGenerator(1);
  const int64_t T = 64, n = hidden_count(0.4, T);  // 26 hidden in 4 spans: lengths 7, 7, 6, 6
  auto h = hide_positions("spans", 0.4, 4, 200, T, gen);
  std::set<int64_t> first_starts;
  for (int64_t r = 0; r < 200; ++r) {
    EXPECT_EQ(h[r].sum().item<int64_t>(), n);
    auto spans = runs(h[r]);  // separated spans are separate runs
    ASSERT_EQ(spans.size(), 4u);
    std::multiset<int64_t> lengths;
    for (const auto& s : spans) lengths.insert(s.second);
    EXPECT_EQ(lengths, (std::multiset<int64_t>{6, 6, 7, 7}));
    first_starts.insert(spans[0].first);
  }
  EXPECT_GT(first_starts.size(), 10u);  // placed at random, not at one spot
  // More spans than fit: as many as there are hidden tokens, each one token, still separated.
  auto few = hide_positions("spans", 0.1, 50, 5, 30, gen);  // 3 hidden
  for (int64_t r = 0; r < 5; ++r) EXPECT_EQ(runs(few[r]).size(), 3u);
}

TEST(InfillTest, RandomSubsetsHaveTheCountAndAreReproducibleFromTheSeed) {
  at::Generator a = at::detail::createCPUGenerator(7), b = at::detail::createCPUGenerator(7);
  auto x = hide_positions("random", 0.25, 4, 50, 40, a);
  auto y = hide_positions("random", 0.25, 4, 50, 40, b);
  EXPECT_TRUE(torch::equal(x, y));
  EXPECT_TRUE(torch::equal(x.sum(1), torch::full({50}, 10, torch::kLong)));
  EXPECT_FALSE(torch::equal(x[0], x[1]));
  EXPECT_THROW(hide_positions("left", 0.25, 4, 1, 40, a), ConfigError);
}

TEST(InfillTest, VisibleFirstOrdersPutTheVisibleLeftToRightThenTheHidden) {
  at::Generator gen = at::detail::createCPUGenerator(3);
  auto hidden = hide_positions("random", 0.5, 4, 20, 16, gen);  // (20, 16), 8 hidden per row
  auto order = visible_first_order(hidden, gen);
  std::set<std::vector<int64_t>> tails;
  for (int64_t r = 0; r < 20; ++r) {
    auto o = order[r];
    EXPECT_TRUE(torch::equal(std::get<0>(o.sort()), torch::arange(16)));  // a permutation
    auto head = o.narrow(0, 0, 8), tail = o.narrow(0, 8, 8);
    EXPECT_FALSE(hidden[r].index_select(0, head).any().item<bool>());
    EXPECT_TRUE(hidden[r].index_select(0, tail).all().item<bool>());
    EXPECT_TRUE(torch::equal(head, std::get<0>(head.sort())));  // visible: left to right
    tails.insert(std::vector<int64_t>(tail.data_ptr<int64_t>(), tail.data_ptr<int64_t>() + 8));
  }
  EXPECT_EQ(tails.size(), 20u);  // hidden: a random order per row
}

// Context-free test models: −log p(token) = f(token) = 0.5 · (1 + token mod 3) whatever the context, so the
// NLL of the hidden tokens is Σ f over them under any order; the bound adds 0.25 at every position its
// forward process may mask (0 at kept positions).
double f(int64_t token) { return 0.5 * (1 + token % 3); }

class ContextFree : public testing::NoNetworkScorer {
 public:
  ContextFree(Paradigm paradigm, bool start_token) : paradigm_(paradigm), start_token_(start_token) {}
  PluginInfo info() const override {
    Capabilities c;
    c.any_order = paradigm_ != Paradigm::kAutoregressive;
    c.elbo = paradigm_ == Paradigm::kMaskedDiffusionEncoder;
    return {"context_free", "0.0.0", paradigm_, "test model", c};
  }
  NllOutput log_prob(const torch::Tensor& tokens, const torch::Tensor& order, at::Generator&) override {
    NllOutput out;
    out.nll = 0.5 * (1 + (tokens.gather(1, order) % 3)).to(torch::kFloat64);  // (B, T) generation order
    out.scored = torch::ones_like(tokens, torch::kBool);
    if (!start_token_) out.scored.select(1, 0).fill_(false);
    return out;
  }
  NllOutput elbo(const torch::Tensor& tokens, int64_t, at::Generator&, const torch::Tensor& keep) override {
    NllOutput out;
    out.nll = 0.5 * (1 + (tokens % 3)).to(torch::kFloat64) + 0.25;  // (B, T)
    if (keep.defined()) out.nll = torch::where(keep, torch::zeros_like(out.nll), out.nll);
    out.scored = torch::ones_like(tokens, torch::kBool);
    out.is_bound = true;
    return out;
  }

 private:
  Paradigm paradigm_;
  bool start_token_;
};

class InfillEval : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 48; ++i) ids.push_back(static_cast<uint32_t>((i * 7 + i / 5) % 10));  // 6 windows of 8
    write_token_file(tmp.file("d.bin"), ids, 10, 8);
    o.batch_size = 4;  // two batches, the second short
    o.orders = 3;
    o.infill.places = {"end"};
    o.infill.ratios = {0.5};
  }
  std::vector<LikelihoodResult> run(ModelPlugin& model) {
    TokenFile file(tmp.file("d.bin"));
    return evaluate_infill(model, file, read_dataset_info("toy", tmp.file("d.bin")), o, torch::kCPU);
  }
  // Mean f over the hidden tokens: "end" at ratio 0.5 of positions 1…7 hides round(3.5) = 4: positions 4…7.
  double expected_end(double add = 0) {
    double nats = 0;
    for (size_t w = 0; w < 6; ++w)
      for (size_t i = 4; i < 8; ++i) nats += f(ids[w * 8 + i]) + add;
    return nats / 24;
  }
  testing::TempDir tmp;
  std::vector<uint32_t> ids;
  EvalOptions o;
};

TEST_F(InfillEval, AnAnyOrderDecoderGetsTheExactRowAndTheMixtureOfItsOrders) {
  ContextFree model(Paradigm::kAnyOrder, /*start_token=*/false);
  auto r = run(model);
  ASSERT_EQ(r.size(), 2u);  // k3, mix3 (no ensembles: eval.ensemble is [1])
  EXPECT_EQ(r[0].metric, "k3");
  EXPECT_EQ(r[1].metric, "mix3");
  for (const auto& row : r) {
    EXPECT_EQ(row.mode, "infill");
    EXPECT_EQ(row.infill, "end_r50");
    EXPECT_NEAR(row.nll, expected_end(), 1e-12) << row.metric;  // context-free: every order gives Σ f
    EXPECT_EQ(row.tokens, 24);
    EXPECT_EQ(row.sequences, 6);
    EXPECT_FALSE(row.is_bound);
    EXPECT_NE(row.protocol.find("4 of 8 tokens hidden (position 0 always visible)"), std::string::npos) << row.protocol;
  }
  EXPECT_NE(r[0].protocol.find("K=3 random orders of the hidden ones"), std::string::npos);
}

TEST_F(InfillEval, AnEncoderGetsItsChainAndAConditionalBoundThatScoresOnlyTheHiddenTokens) {
  ContextFree model(Paradigm::kMaskedDiffusionEncoder, /*start_token=*/true);
  o.orders = 1;
  auto r = run(model);
  ASSERT_EQ(r.size(), 2u);  // k1, elbo
  EXPECT_EQ(r[0].metric, "k1");
  EXPECT_NE(r[0].protocol.find("exact encoder chain"), std::string::npos);
  EXPECT_NEAR(r[0].nll, expected_end(), 1e-12);
  EXPECT_EQ(r[1].metric, "elbo");
  EXPECT_TRUE(r[1].is_bound);
  // Kept (visible) positions contribute 0; a kept position counted would move the mean off by 0.75 or more.
  EXPECT_NEAR(r[1].nll, expected_end(0.25), 1e-12);
  EXPECT_EQ(r[1].tokens, 24);
}

TEST_F(InfillEval, ALeftToRightModelIsScoredPrefixOnlyAndCannotHidePositionZeroWithoutAStartToken) {
  ContextFree model(Paradigm::kAutoregressive, /*start_token=*/false);
  o.infill.places = {"end", "start"};
  auto r = run(model);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].metric, "prefix");
  EXPECT_NE(r[0].protocol.find("prefix-only"), std::string::npos);
  EXPECT_NEAR(r[0].nll, expected_end(), 1e-12);
  // "start" with position 0 visible hides 1…4.
  double nats = 0;
  for (size_t w = 0; w < 6; ++w)
    for (size_t i = 1; i < 5; ++i) nats += f(ids[w * 8 + i]);
  EXPECT_EQ(r[1].infill, "start_r50");
  EXPECT_NEAR(r[1].nll, nats / 24, 1e-12);
  // eval.first_token=score lets position 0 be hidden, which this model cannot score: an error with a hint.
  o.skip_first = false;
  try {
    run(model);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(e.hint().find("model.start_token=true"), std::string::npos);
  }
}

TEST_F(InfillEval, TheHiddenPositionsDependOnTheSeedAndThePlaceNotOnTheBatchSize) {
  ContextFree model(Paradigm::kAnyOrder, /*start_token=*/true);
  o.infill.places = {"random"};
  o.orders = 1;
  const double a = run(model)[0].nll;
  o.batch_size = 1;
  EXPECT_DOUBLE_EQ(run(model)[0].nll, a);
  o.infill.places = {"middle", "random"};  // another place before it leaves its positions alone
  EXPECT_DOUBLE_EQ(run(model)[1].nll, a);
  o.seed += 1;
  bool moved = false;
  for (int i = 0; i < 5 && !moved; ++i, ++o.seed) moved = run(model)[1].nll != a;
  EXPECT_TRUE(moved);
}

// Fills every free position with the token `fill` and keeps the given ones (or, with `tamper`, changes position
// 0); remembers the last request. `anywhere`: the infill capability, else forced_tokens (a left-to-right model's).
class ConstantFiller : public ContextFree, public Sampling {
 public:
  ConstantFiller(int64_t fill, bool anywhere)
      : ContextFree(Paradigm::kAnyOrder, true), fill_(fill), anywhere_(anywhere) {}
  PluginInfo info() const override {
    PluginInfo i = ContextFree::info();
    i.capabilities.any_order = anywhere_;
    i.capabilities.infill = anywhere_;
    i.capabilities.forced_tokens = !anywhere_;
    return i;
  }
  Sampling* sampling() override { return this; }
  SampleOutput generate(const SampleRequest& r) override {
    requests.push_back(r);
    SampleOutput out;
    out.tokens = r.prompt.masked_fill(r.prompt.lt(0), fill_);
    if (tamper) out.tokens.select(1, 0).add_(1).remainder_(10);
    out.network_calls = r.steps;
    return out;
  }
  std::vector<SampleRequest> requests;
  bool tamper = false;

 private:
  int64_t fill_;
  bool anywhere_;
};

class Fillings : public InfillEval {
 protected:
  std::vector<FillResult> fill(ModelPlugin& model, ModelPlugin* judge = nullptr) {
    TokenFile file(tmp.file("d.bin"));
    return evaluate_fillings(model, file, read_dataset_info("toy", tmp.file("d.bin")), o, torch::kCPU, judge);
  }
  // "end" at 0.5 hides positions 4…7 of each 8-token window (position 0 visible): per window w, how many of
  // them are `token`.
  int64_t hits(size_t w, int64_t token) const {
    int64_t c = 0;
    for (size_t i = 4; i < 8; ++i) c += ids[w * 8 + i] == token;
    return c;
  }
};

TEST_F(Fillings, AccuracyAndExactMatchCountTheHiddenTokensFilledRight) {
  // Windows whose hidden tokens are all 3: the exact-match rate has something to count.
  for (size_t i = 4; i < 8; ++i) ids[8 + i] = ids[24 + i] = 3;
  write_token_file(tmp.file("d.bin"), ids, 10, 8);
  o.infill.fill = {"greedy", "sampled"};
  o.infill.fill_windows = 5;  // of the 6 windows
  o.infill.temperature = 0.7;
  o.infill.top_p = 0.9;
  ConstantFiller model(/*fill=*/3, /*anywhere=*/true);
  auto r = fill(model);
  ASSERT_EQ(r.size(), 2u);
  std::vector<double> acc;
  for (size_t w = 0; w < 5; ++w) acc.push_back(static_cast<double>(hits(w, 3)) / 4);
  const MeanStderr want = mean_stderr(acc);
  for (const auto& x : r) {
    EXPECT_EQ(x.infill, "end_r50");
    EXPECT_EQ(x.windows, 5);
    EXPECT_EQ(x.hidden, 4);
    EXPECT_EQ(x.steps, 4);  // fill_steps 0: one network call per hidden token
    EXPECT_NEAR(x.accuracy.mean, want.mean, 1e-12);
    EXPECT_NEAR(x.accuracy.stderr_, want.stderr_, 1e-12);
    EXPECT_NEAR(x.exact.mean, 2.0 / 5, 1e-12);  // windows 1 and 3
    EXPECT_FALSE(x.judged);
    EXPECT_GE(x.ms_per_token, 0);
  }
  EXPECT_EQ(r[0].fill, "greedy");
  EXPECT_EQ(r[1].fill, "sampled");
  // Two batches per filling (4 + 1 windows). The prompt: the truth with −1 exactly at positions 4…7.
  ASSERT_EQ(model.requests.size(), 4u);
  TokenFile file(tmp.file("d.bin"));
  const auto& first = model.requests[0];
  EXPECT_EQ(first.batch_size, 4);
  EXPECT_EQ(first.length, 8);
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t t = 0; t < 8; ++t)
      EXPECT_EQ(first.prompt[b][t].item<int64_t>(), t >= 4 ? -1 : static_cast<int64_t>(ids[b * 8 + t]));
  EXPECT_DOUBLE_EQ(model.requests[0].top_p, 1e-6);  // greedy: only the most probable token survives the nucleus
  EXPECT_DOUBLE_EQ(model.requests[2].top_p, 0.9);
  EXPECT_DOUBLE_EQ(model.requests[2].temperature, 0.7);
  EXPECT_NE(model.requests[0].seed, model.requests[2].seed);
  EXPECT_NE(model.requests[0].seed, model.requests[1].seed);
  o.infill.fill_steps = 2;
  EXPECT_EQ(fill(model)[0].steps, 2);
}

TEST_F(Fillings, TheJudgeScoresTheFilledTokensAndTheTruthGivenTheVisibleOnes) {
  o.infill.fill = {"greedy"};
  ConstantFiller model(/*fill=*/2, /*anywhere=*/true);
  ContextFree judge(Paradigm::kAutoregressive, /*start_token=*/false);  // −log p(token) = f(token)
  auto r = fill(model, &judge);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_TRUE(r[0].judged);
  // Filled: four 2s per window, each f(2) = 1.5 nats: every window's perplexity is e^1.5.
  EXPECT_NEAR(r[0].judge.ppl.mean, std::exp(1.5), 1e-9);
  EXPECT_EQ(r[0].judge.tokens, 24);  // 6 windows × the 4 hidden tokens; visible ones are context
  std::vector<double> truth;
  for (size_t w = 0; w < 6; ++w) {
    double nats = 0;
    for (size_t i = 4; i < 8; ++i) nats += f(ids[w * 8 + i]);
    truth.push_back(std::exp(nats / 4));
  }
  EXPECT_NEAR(r[0].truth.ppl.mean, mean_stderr(truth).mean, 1e-9);
}

TEST_F(Fillings, ALeftToRightFillerIsLabelledPrefixOnlyAndATamperedPromptIsCaught) {
  o.infill.fill = {"sampled"};
  ConstantFiller gpt(/*fill=*/1, /*anywhere=*/false);
  auto r = fill(gpt);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].protocol.find("prefix-only"), std::string::npos) << r[0].protocol;
  gpt.tamper = true;
  EXPECT_THROW(fill(gpt), PluginError);
  ContextFree scorer(Paradigm::kAnyOrder, /*start_token=*/true);  // scores, cannot sample
  try {
    fill(scorer);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("eval.infill.fill"), std::string::npos) << e.what();
  }
  o.infill.fill.clear();  // no fillings asked: nothing is sampled
  EXPECT_TRUE(fill(scorer).empty());
}

}  // namespace
}  // namespace aobench
