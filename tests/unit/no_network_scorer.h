// Implements: the base of the scoring test models (likelihood_test, infill_test): a ModelPlugin + Scoring without a
// network, vocabulary 10, windows of 8 tokens; a subclass gives info() and the scores in closed form.
#pragma once
#include "core/plugin_api.h"

namespace aobench::testing {

class NoNetworkScorer : public ModelPlugin, public Scoring {
 public:
  Scoring* scoring() override { return this; }
  void configure_model(const nlohmann::json&) override {}
  void build(torch::Device) override {}
  torch::nn::Module& module() override { return module_; }
  double flops_per_token(int64_t) const override { return 0; }
  int64_t vocab_size() const override { return 10; }
  int64_t block_size() const override { return 8; }
  LossOutput loss(const TrainBatch&, at::Generator&) override { return {}; }

 private:
  torch::nn::Module module_;
};

}  // namespace aobench::testing
