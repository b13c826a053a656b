// Implements: tests of the context-order ensemble (metrics/ensemble.h, spec-ao-gpt §3.3) on the debug
// ao_gpt from the registry: M = 1 is the plain chain estimate; the truncated, batched computation equals a
// brute-force one (one full-length forward per (member, k), as the reference script does); members are
// reshufflings of the same context set with every token keeping its position.
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "core/plugin_api.h"
#include "harness/registry.h"
#include "metrics/ensemble.h"

namespace aobench {
namespace {

std::unique_ptr<ModelPlugin> debug_ao_gpt() {
  auto m = PluginRegistry::instance().create("ao_gpt");
  m->configure(flavour_defaults("ao_gpt", "debug"));
  torch::manual_seed(0);
  m->build(torch::kCPU);
  m->module().eval();
  return m;
}

// Forwards everything to `inner` and records every chain_log_probs call.
class Recorder : public ModelPlugin, public Scoring, public Sampling {
 public:
  explicit Recorder(ModelPlugin& inner) : inner_(inner) {}
  Scoring* scoring() override { return this; }
  Sampling* sampling() override { return this; }
  PluginInfo info() const override { return inner_.info(); }
  void configure_model(const nlohmann::json& j) override { inner_.configure(j); }
  void build(torch::Device d) override { inner_.build(d); }
  torch::nn::Module& module() override { return inner_.module(); }
  double flops_per_token(int64_t T) const override { return inner_.flops_per_token(T); }
  int64_t vocab_size() const override { return inner_.vocab_size(); }
  int64_t block_size() const override { return inner_.block_size(); }
  LossOutput loss(const TrainBatch& b, at::Generator& g) override { return inner_.loss(b, g); }
  NllOutput log_prob(const torch::Tensor& t, const torch::Tensor& o, at::Generator& g) override {
    return inner_.log_prob(t, o, g);
  }
  torch::Tensor chain_log_probs(const torch::Tensor& t, const torch::Tensor& p, const torch::Tensor& tg) override {
    calls.push_back({t.clone(), p.clone(), tg.clone()});
    return inner_.chain_log_probs(t, p, tg);
  }
  SampleOutput generate(const SampleRequest& r) override { return inner_.sample(r); }
  struct Call {
    torch::Tensor tokens, positions, targets;
  };
  std::vector<Call> calls;

 private:
  ModelPlugin& inner_;
};

struct Data {
  torch::Tensor tokens, order;
};

Data make_data(int64_t N, int64_t T, int64_t V, uint64_t seed) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
  return {torch::randint(V, {N, T}, g, torch::kLong), torch::rand({N, T}, g, torch::kFloat64).argsort(int64_t{1})};
}

TEST(Ensemble, SizeOneIsThePlainChainEstimate) {
  auto model = debug_ao_gpt();
  auto d = make_data(3, 24, model->vocab_size(), 1);
  EnsembleOptions opt;
  opt.sizes = {1};
  auto g = at::make_generator<at::CPUGeneratorImpl>(5);
  auto res = context_order_ensemble(*model, d.tokens, d.order, opt, g);
  ASSERT_EQ(res.nll.size(), 1u);
  EXPECT_TRUE(res.evaluated.all().item<bool>());
  // Exactly member 0: −log p of x_σ(k) from one chain_log_probs call over the same rows.
  auto xs = d.tokens.gather(1, d.order);
  auto lp = model->chain_log_probs(xs, d.order, d.order);
  auto plain = -lp.gather(2, xs.unsqueeze(-1)).squeeze(-1).to(torch::kFloat64);
  EXPECT_TRUE(res.nll[0].equal(plain));
  // And the plugin's own exact chain (a separate code path) within float rounding.
  auto lpo = model->log_prob(d.tokens, d.order, g);
  EXPECT_TRUE(torch::allclose(res.nll[0], lpo.nll, 1e-6, 1e-5));
}

TEST(Ensemble, EfficientEqualsBruteForce) {
  auto model = debug_ao_gpt();
  const int64_t N = 2, T = 12, M = 4;
  auto d = make_data(N, T, model->vocab_size(), 2);
  EnsembleOptions opt;
  opt.sizes = {1, 2, 4};
  opt.max_batch_tokens = 40;  // force several calls per step
  auto g = at::make_generator<at::CPUGeneratorImpl>(77);
  auto res = context_order_ensemble(*model, d.tokens, d.order, opt, g);

  // Brute force with the same draws: steps k = 2 … T−1, one (N, M−1, k) block of uniform permutations
  // (argsort of float64 uniforms) each; member j's full order is
  // σ'_j = (σ(π(0)), …, σ(π(k−1)), σ(k), …, σ(T−1)) and ONE full-length forward scores step k.
  auto bg = at::make_generator<at::CPUGeneratorImpl>(77);
  auto ell = torch::zeros({N, M, T}, torch::kFloat64);
  auto lg = at::make_generator<at::CPUGeneratorImpl>(0);
  auto base = model->log_prob(d.tokens, d.order, lg).nll;  // (N, T)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < M; ++j) ell[n][j].copy_(base[n]);  // k ∈ {0, 1}: members identical
  for (int64_t k = 2; k < T; ++k) {
    auto perms = torch::rand({N, M - 1, k}, bg, torch::kFloat64).argsort(int64_t{2});
    for (int64_t n = 0; n < N; ++n) {
      auto perm = perms[n];
      for (int64_t j = 1; j < M; ++j) {
        auto sig = d.order[n].clone();
        sig.narrow(0, 0, k).copy_(d.order[n].index({perm[j - 1]}));
        auto nll = model->log_prob(d.tokens[n].unsqueeze(0), sig.unsqueeze(0), lg).nll;  // (1, T)
        ell[n][j][k] = nll[0][k];
      }
    }
  }
  for (size_t m = 0; m < opt.sizes.size(); ++m) {
    const int64_t size = opt.sizes[m];
    // Average of probabilities, computed directly in float64.
    auto expect = -(torch::exp(-ell.narrow(1, 0, size)).mean(1)).log();
    EXPECT_TRUE(torch::allclose(res.nll[m], expect, 0.0, 1e-5))
        << "M=" << size << " max diff " << (res.nll[m] - expect).abs().max().item<double>();
  }
  // The ensemble is a proper mixture: its NLL never exceeds the worst member's and differs from member 0.
  EXPECT_FALSE(torch::allclose(res.nll[2], res.nll[0]));
}

TEST(Ensemble, LastSlotEqualsTheFullChainsLastRow) {
  auto model = debug_ao_gpt();
  auto d = make_data(3, 10, model->vocab_size(), 4);
  auto xs = d.tokens.gather(1, d.order);
  auto full = model->chain_log_probs(xs, d.order, d.order);       // (3, 10, V)
  auto last = model->chain_log_probs_last(xs, d.order, d.order);  // (3, V)
  ASSERT_EQ(last.sizes(), (std::vector<int64_t>{3, model->vocab_size()}));
  EXPECT_TRUE(torch::allclose(last, full.select(1, 9), 1e-6, 1e-5));
}

TEST(Ensemble, MembersReshuffleTheSameContextSetKeepingPositions) {
  auto model = debug_ao_gpt();
  Recorder rec(*model);
  const int64_t T = 16, M = 8;
  auto d = make_data(1, T, model->vocab_size(), 3);
  EnsembleOptions opt;
  opt.sizes = {M};
  opt.positions = 1;  // one step per sequence: every member row has the same length k+1
  auto g = at::make_generator<at::CPUGeneratorImpl>(9);
  auto res = context_order_ensemble(rec, d.tokens, d.order, opt, g);
  EXPECT_EQ(res.evaluated.sum().item<int64_t>(), 1);
  const int64_t k = res.evaluated[0].nonzero().item<int64_t>();
  auto sigma = d.order[0];
  if (k <= 1) {
    EXPECT_EQ(rec.calls.size(), 1u);  // only member 0's full chain
    return;
  }
  ASSERT_GE(rec.calls.size(), 2u);
  int64_t rows = 0;
  std::set<std::vector<int64_t>> distinct;
  for (size_t c = 1; c < rec.calls.size(); ++c) {
    const auto& call = rec.calls[c];
    ASSERT_EQ(call.positions.size(1), k + 1);
    for (int64_t r = 0; r < call.positions.size(0); ++r, ++rows) {
      auto pos = call.positions[r], tok = call.tokens[r], tgt = call.targets[r];
      // Same context set σ(<k), same target σ(k), training-consistent targets, tokens at their positions.
      EXPECT_TRUE(std::get<0>(pos.narrow(0, 0, k).sort()).equal(std::get<0>(sigma.narrow(0, 0, k).sort())));
      EXPECT_EQ(tgt[k].item<int64_t>(), sigma[k].item<int64_t>());
      EXPECT_TRUE(tgt.narrow(0, 0, k).equal(pos.narrow(0, 0, k)));
      EXPECT_TRUE(tok.narrow(0, 0, k).equal(d.tokens[0].index({pos.narrow(0, 0, k)})));
      auto p = pos.narrow(0, 0, k).contiguous();
      distinct.insert(std::vector<int64_t>(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + k));
    }
  }
  EXPECT_EQ(rows, M - 1);
  if (k >= 4) {
    EXPECT_GT(distinct.size(), 1u);
  }  // the context orders really are reshuffled
}

TEST(Ensemble, SubsamplingMarksOnlyDrawnSteps) {
  auto model = debug_ao_gpt();
  auto d = make_data(2, 20, model->vocab_size(), 4);
  EnsembleOptions opt;
  opt.sizes = {1, 2};
  opt.positions = 5;
  auto g1 = at::make_generator<at::CPUGeneratorImpl>(3), g2 = at::make_generator<at::CPUGeneratorImpl>(3);
  auto a = context_order_ensemble(*model, d.tokens, d.order, opt, g1);
  auto b = context_order_ensemble(*model, d.tokens, d.order, opt, g2);
  EXPECT_TRUE(a.evaluated.sum(1).eq(5).all().item<bool>());
  EXPECT_TRUE(a.evaluated.equal(b.evaluated));                     // seeded draw
  EXPECT_TRUE(a.nll[1].isnan().logical_not().equal(a.evaluated));  // NaN exactly where not evaluated
  EXPECT_TRUE(torch::allclose(a.nll[1].nan_to_num(0), b.nll[1].nan_to_num(0)));
}

}  // namespace
}  // namespace aobench
