// Implements: tests of the plugin surface (core/plugin_api.h) with two plugins written here: a training-only one
// (the core interface alone: configure_model, build, module, loss) gets its sizes and FLOPs from the defaults and
// is refused, by name, everything it does not implement; a left-to-right scorer never sees an order, an ELBO or a
// context-order call it did not declare, because ModelPlugin's entry points refuse them first.
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/plugin_api.h"

namespace aobench {
namespace {

using nlohmann::json;

// An embedding table, one block-shaped Linear and a head: the core interface only.
class TrainOnly : public ModelPlugin {
 public:
  PluginInfo info() const override { return {"train_only", "0.1.0", Paradigm::kAutoregressive, "test", {}}; }
  void configure_model(const json& model) override { d_ = model.at("n_embd").get<int64_t>(); }
  void build(torch::Device) override {
    net_ = torch::nn::Sequential(torch::nn::Embedding(vocab_size(), d_), torch::nn::Linear(d_, d_),
                                 torch::nn::Linear(d_, vocab_size()));
  }
  torch::nn::Module& module() override { return *net_; }
  LossOutput loss(const TrainBatch& batch, at::Generator&) override {
    return {torch::nn::functional::cross_entropy(net_->forward(batch.tokens).flatten(0, 1), batch.tokens.flatten()),
            {}};
  }

 private:
  int64_t d_ = 0;
  torch::nn::Sequential net_{nullptr};
};

// Left-to-right scoring (uniform over the vocabulary) and nothing else declared.
class UniformL2r : public TrainOnly, public Scoring {
 public:
  Scoring* scoring() override { return this; }
  PluginInfo info() const override { return {"uniform_l2r", "0.1.0", Paradigm::kAutoregressive, "test", {}}; }
  NllOutput log_prob(const torch::Tensor& tokens, const torch::Tensor&, at::Generator&) override {
    ++calls;
    return {torch::full(tokens.sizes(), std::log(double(vocab_size())), torch::kFloat64),
            torch::ones(tokens.sizes(), torch::kBool)};
  }
  int calls = 0;
};

const json kModel = {{"plugin", "train_only"}, {"flavour", "debug"}, {"vocab_size", 11},
                     {"block_size", 6},        {"n_layer", 2},       {"n_embd", 4}};

std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.what()) + " | " + e.hint();
  }
  return "no error";
}

TEST(PluginSurface, TheCoreInterfaceAloneTrainsWithDefaultSizesAndFlops) {
  TrainOnly m;
  EXPECT_NE(error_text([&] { m.vocab_size(); }).find("model.vocab_size is not set"), std::string::npos);
  m.configure(kModel);
  EXPECT_EQ(m.vocab_size(), 11);
  EXPECT_EQ(m.block_size(), 6);
  m.build(torch::kCPU);
  // 6 N + 12 L d T, N without the embedding table: (4·4 + 4) + (4·11 + 11) = 75 parameters.
  EXPECT_DOUBLE_EQ(m.flops_per_token(6), 6.0 * 75 + 12.0 * 2 * 4 * 6);
  at::Generator gen = at::detail::createCPUGenerator(0);
  const auto x = torch::randint(11, {2, 6}, torch::kLong);
  const auto loss = m.loss({x, {}}, gen).loss;
  EXPECT_NEAR(loss.item<double>(), std::log(11.0), 1.5);  // a finite loss near ln V at init
  loss.backward();

  EXPECT_NE(error_text([&] { m.log_prob(x, {}, gen); }).find("plugin 'train_only' scores nothing (log_prob)"),
            std::string::npos);
  EXPECT_NE(error_text([&] { m.elbo(x, 4, gen); }).find("scores nothing (elbo)"), std::string::npos);
  EXPECT_NE(error_text([&] { m.chain_log_probs(x, x, x); }).find("scores nothing"), std::string::npos);
  SampleRequest r;
  r.length = 4;
  EXPECT_NE(error_text([&] { m.sample(r); }).find("plugin 'train_only' does not sample"), std::string::npos);
}

TEST(PluginSurface, TheEntryPointsRefuseWhatTheCapabilitiesDoNotDeclare) {
  UniformL2r plugin;
  ModelPlugin& m = plugin;  // the harness's view: its entry points, not the plugin's Scoring directly
  m.configure(kModel);
  m.build(torch::kCPU);
  at::Generator gen = at::detail::createCPUGenerator(0);
  const auto x = torch::randint(11, {2, 6}, torch::kLong);
  const auto identity = torch::arange(6).expand({2, 6}).contiguous();
  EXPECT_NEAR(m.log_prob(x, identity, gen).nll.sum().item<double>(), 12 * std::log(11.0), 1e-9);
  EXPECT_EQ(m.log_prob(x, {}, gen).nll.size(1), 6);  // an undefined order is the identity
  EXPECT_EQ(plugin.calls, 2);
  EXPECT_NE(error_text([&] { m.log_prob(x, identity.flip(1), gen); }).find("left-to-right only"), std::string::npos);
  EXPECT_NE(error_text([&] { m.elbo(x, 4, gen); }).find("has no diffusion ELBO"), std::string::npos);
  EXPECT_NE(error_text([&] { m.chain_log_probs_last(x, identity, identity); }).find("cannot condition"),
            std::string::npos);
  EXPECT_EQ(plugin.calls, 2) << "a refused request never reaches the plugin";
  EXPECT_THROW(m.log_prob(x, identity.narrow(1, 0, 5), gen), c10::Error);  // a shape bug
}

}  // namespace
}  // namespace aobench
