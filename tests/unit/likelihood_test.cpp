// Implements: tests of the likelihood aggregation (metrics/likelihood.h) with known answers: the skip /
// score first-token protocols, the ConfigError for models that cannot score index 0, the K-order
// per-sequence averaging behind the stderr, bits-per-byte arithmetic, a whole evaluate_likelihood pass over
// a real token file with a fixed-distribution model whose NLL is known in closed form, and bound (ELBO) rows
// that score every token of a window.
#include <cmath>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/plugin_api.h"
#include "datasets/token_file.h"
#include "metrics/likelihood.h"
#include "tests/test_util.h"
#include "tests/unit/no_network_scorer.h"

namespace aobench {
namespace {

TEST(LikelihoodTest, SkipDropsIndexZeroAndScoreKeepsIt) {
  auto nll = torch::tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, torch::kFloat64);  // (B=2, T=3)
  auto all = torch::ones({2, 3}, torch::kBool);
  auto skip = nll_row_sums(nll, all, /*skip_first=*/true, true);
  EXPECT_DOUBLE_EQ(skip[0].first, 5.0);
  EXPECT_EQ(skip[0].second, 2);
  EXPECT_DOUBLE_EQ(skip[1].first, 11.0);
  auto score = nll_row_sums(nll, all, /*skip_first=*/false, true);
  EXPECT_DOUBLE_EQ(score[0].first, 6.0);
  EXPECT_EQ(score[0].second, 3);
  EXPECT_DOUBLE_EQ(score[1].first, 15.0);
}

TEST(LikelihoodTest, ScoringAnUnscorableFirstTokenIsAConfigErrorWithAHint) {
  auto nll = torch::zeros({1, 4}, torch::kFloat64);
  auto scored = torch::tensor({{false, true, true, true}});
  try {
    nll_row_sums(nll, scored, /*skip_first=*/false, /*require_first=*/true);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(e.hint().find("model.start_token=true"), std::string::npos);
    EXPECT_NE(e.hint().find("eval.first_token=skip"), std::string::npos);
  }
  // Skip mode never needs index 0.
  EXPECT_EQ(nll_row_sums(nll, scored, true, true)[0].second, 3);
}

TEST(LikelihoodTest, UnscoredNaNsAreIgnored) {
  const double nan = std::nan("");
  auto nll = torch::tensor({{nan, 1.5, nan, 2.5}}, torch::kFloat64);
  auto scored = torch::tensor({{false, true, false, true}});
  auto r = nll_row_sums(nll, scored, true, /*require_first=*/false);
  EXPECT_DOUBLE_EQ(r[0].first, 4.0);
  EXPECT_EQ(r[0].second, 2);
}

TEST(LikelihoodTest, OrdersAreAveragedPerSequenceBeforeTheStderr) {
  NllTotals t;
  // Two sequences, K = 2 orders, 2 tokens each: sequence means 1.5 and 3.5.
  t.add_sequences({{{2.0, 2}, {6.0, 2}}, {{4.0, 2}, {8.0, 2}}});
  ASSERT_EQ(t.seq_nll.size(), 2u);
  EXPECT_DOUBLE_EQ(t.seq_nll[0], 1.5);
  EXPECT_DOUBLE_EQ(t.seq_nll[1], 3.5);
  LikelihoodResult r;
  finish_result(t, /*orders=*/2, /*file_tokens=*/8, /*file_bytes=*/0, r);
  EXPECT_DOUBLE_EQ(r.nll, 20.0 / 8.0);
  EXPECT_EQ(r.tokens, 4);  // per order
  EXPECT_EQ(r.sequences, 2);
  EXPECT_NEAR(r.stderr_, 1.0, 1e-12);  // std of {1.5, 3.5} = sqrt(2), / sqrt(2)
  EXPECT_NEAR(r.ppl, std::exp(2.5), 1e-12);
  EXPECT_TRUE(std::isnan(r.bits_per_byte));  // bytes unknown
}

TEST(LikelihoodTest, BitsPerByteProratesBytesToScoredTokens) {
  NllTotals t;
  t.add_sequences({{{100.0, 50}}});  // 2 nats/token over 50 scored tokens
  LikelihoodResult r;
  // The file: 200 tokens standing for 400 bytes → the 50 scored tokens stand for 100 bytes.
  finish_result(t, 1, /*file_tokens=*/200, /*file_bytes=*/400, r);
  EXPECT_NEAR(r.bits_per_byte, 100.0 / std::log(2.0) / 100.0, 1e-12);
  EXPECT_TRUE(r.bpb_estimate);
  LikelihoodResult whole;
  finish_result(t, 1, /*file_tokens=*/50, /*file_bytes=*/400, whole);
  EXPECT_NEAR(whole.bits_per_byte, 100.0 / std::log(2.0) / 400.0, 1e-12);
  EXPECT_FALSE(whole.bpb_estimate);
}

// A model with a fixed, position-free distribution: −log p(token) = 0.5 · (1 + token mod 3). It cannot
// score generation index 0 (like a GPT without a start token).
class FixedModel : public testing::NoNetworkScorer {
 public:
  PluginInfo info() const override {
    Capabilities c;
    c.any_order = true;  // scored under the random orders of eval.mode=random
    c.elbo = true;
    return {"fixed", "0.0.0", Paradigm::kAutoregressive, "test model", c};
  }
  NllOutput log_prob(const torch::Tensor& tokens, const torch::Tensor& order, at::Generator&) override {
    auto in_order = tokens.gather(1, order);  // (B, T) generation order
    NllOutput out;
    out.nll = 0.5 * (1 + (in_order % 3)).to(torch::kFloat64);  // (B, T)
    out.scored = torch::ones_like(tokens, torch::kBool);
    out.scored.select(1, 0).fill_(false);
    return out;
  }
  // A bound 0.25 nats above log_prob's value at every position, all positions scored.
  NllOutput elbo(const torch::Tensor& tokens, int64_t, at::Generator&, const torch::Tensor&) override {
    NllOutput out;
    out.nll = 0.5 * (1 + (tokens % 3)).to(torch::kFloat64) + 0.25;  // (B, T)
    out.scored = torch::ones_like(tokens, torch::kBool);
    out.is_bound = true;
    return out;
  }
};

TEST(LikelihoodTest, EvaluateMatchesTheClosedFormOnATokenFile) {
  testing::TempDir tmp;
  std::vector<uint32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(static_cast<uint32_t>((i * 7) % 10));  // 5 windows of 8
  write_token_file(tmp.file("d.bin"), ids, 10, 8);
  testing::write_text(tmp.file("d.bin.json"), R"({"bytes": 80, "packing": "simple"})");
  TokenFile file(tmp.file("d.bin"));
  FixedModel model;
  EvalOptions o;
  o.batch_size = 2;
  const DatasetInfo info = read_dataset_info("toy", tmp.file("d.bin"));
  EXPECT_EQ(info.bytes, 80);
  auto r = evaluate_likelihood(model, file, info, o, torch::kCPU);
  ASSERT_EQ(r.size(), 1u);
  double nats = 0;
  for (int i = 0; i < 40; ++i)
    if (i % 8 != 0) nats += 0.5 * (1 + ids[i] % 3);
  EXPECT_EQ(r[0].tokens, 35);
  EXPECT_EQ(r[0].sequences, 5);
  EXPECT_EQ(r[0].windows_used, 5);
  EXPECT_NEAR(r[0].nll, nats / 35, 1e-12);
  EXPECT_NEAR(r[0].ppl, std::exp(nats / 35), 1e-9);
  EXPECT_NEAR(r[0].bits_per_byte, nats / std::log(2.0) / (80.0 * 35 / 40), 1e-12);
  EXPECT_EQ(r[0].protocol, "l2r exact; first token skipped; 8-token windows; simple packing");
  EXPECT_FALSE(r[0].is_bound);

  // max_batches limits the windows and is stated in the protocol.
  o.max_batches = 1;
  auto part = evaluate_likelihood(model, file, info, o, torch::kCPU);
  EXPECT_EQ(part[0].windows_used, 2);
  EXPECT_EQ(part[0].tokens, 14);
  EXPECT_NE(part[0].protocol.find("2/5 windows"), std::string::npos);

  // Random orders: every token is scored except the one generated first, whichever it is.
  o.max_batches = 0;
  o.mode = "random";
  o.orders = 3;
  auto rnd = evaluate_likelihood(model, file, info, o, torch::kCPU);
  EXPECT_EQ(rnd[0].orders, 3);
  EXPECT_EQ(rnd[0].tokens, 35);
  EXPECT_GT(rnd[0].nll, 0.5);
  EXPECT_LT(rnd[0].nll, 1.5);

  // Scoring the first token needs a model that can.
  o.mode = "l2r";
  o.skip_first = false;
  EXPECT_THROW(evaluate_likelihood(model, file, info, o, torch::kCPU), ConfigError);
}

TEST(LikelihoodTest, BoundRowsScoreEveryTokenWhateverFirstTokenSays) {
  // An ELBO bounds the NLL of the whole window: averaging its terms without position 0 would be neither
  // a bound on the other T−1 tokens nor the bound itself, so elbo rows score all T tokens, labelled so.
  testing::TempDir tmp;
  std::vector<uint32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(static_cast<uint32_t>((i * 7) % 10));  // 5 windows of 8
  write_token_file(tmp.file("d.bin"), ids, 10, 8);
  TokenFile file(tmp.file("d.bin"));
  FixedModel model;
  double nats = 0;
  for (uint32_t id : ids) nats += 0.5 * (1 + id % 3) + 0.25;
  EvalOptions o;
  o.mode = "elbo";
  o.mc_steps = 2;
  for (bool skip : {true, false}) {
    o.skip_first = skip;
    auto r = evaluate_likelihood(model, file, read_dataset_info("toy", tmp.file("d.bin")), o, torch::kCPU);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_TRUE(r[0].is_bound);
    EXPECT_EQ(r[0].tokens, 40) << "skip " << skip;
    EXPECT_NEAR(r[0].nll, nats / 40, 1e-12) << "skip " << skip;
    EXPECT_EQ(r[0].protocol,
              "ELBO upper bound, 2 MC steps; all 8 tokens scored (bound on the whole window; "
              "first_token does not apply); 8-token windows; unknown packing");
  }
}

}  // namespace
}  // namespace aobench
