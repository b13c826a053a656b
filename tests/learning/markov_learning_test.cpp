// Implements: learning tests: every paradigm, trained by the harness (run_training → checkpoint →
// load_model_for_eval → evaluate_likelihood, CPU, debug flavour), must learn a Markov chain the test
// generates: 16 letters, each followed by the letter 1 or 5 places on (mod 16) with probability ½ each.
// The unigram entropy is ln 16 = 2.773 nats and the best any-order or left-to-right model reaches ln 2 =
// 0.693 per token after the first. Wiring faults (targets ignored, σ ignored, wrong mask id, a loss that does
// not reach the parameters) leave a model at the unigram plateau, which the thresholds below sit far under.
// Every model first sits on that plateau for a while (longer for larger T), so T is short and a plugin gets
// up to kSeeds training seeds: the test passes when one of them ends under its threshold.
// Run alone: ctest -L learning (or aobench_learning_tests --gtest_filter='MarkovLearning.*').
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/config.h"
#include "core/config_types.h"
#include "core/plugin_api.h"
#include "datasets/token_file.h"
#include "harness/resolve_config.h"
#include "harness/train/checkpoint.h"
#include "harness/train/trainer.h"
#include "metrics/likelihood.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

constexpr int64_t kLetters = 16;
constexpr int64_t kT = 32;  // window length: the unigram plateau grows with T
constexpr int64_t kValWindows = 64;
constexpr int kSeeds = 3;

// A stationary sample path of the chain: x_0 uniform, x_{i+1} = x_i + (1 or 5) mod 16.
std::vector<uint32_t> markov_stream(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> out(n);
  uint32_t x = uint32_t(rng() % kLetters);
  for (auto& t : out) {
    t = x;
    x = (x + ((rng() & 1) ? 1u : 5u)) % kLetters;
  }
  return out;
}

struct Case {
  std::string plugin;
  std::string order;  // train.order.kind (decoders; encoders ignore it)
  std::string mode;   // eval.mode: l2r (GPT), random (any-order decoders), elbo (encoders)
  int64_t steps;      // training budget per seed
  double threshold;   // held-out nats/token the trained model must get under (unigram: 2.773)
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.plugin; }

class MarkovLearning : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    // ctest runs these tests alone (RUN_SERIAL in tests/CMakeLists.txt), so they take the CPUs this process may
    // run on (its affinity mask: a container's share, not the host's core count), up to 8.
    cpu_set_t cpus;
    const int usable = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    torch::set_num_threads(std::clamp(usable, 1, 8));
    train_ = dir_.file("train.bin");
    val_ = dir_.file("val.bin");
    write_token_file(train_, markov_stream(200000, 1), int32_t(kLetters));
    write_token_file(val_, markov_stream(kValWindows * kT, 2), int32_t(kLetters));
  }

  // Trains `c.plugin` at flavour debug with window kT and returns its held-out loss (nats/token).
  double train_and_eval(const Case& c, uint64_t seed) {
    const std::string run = dir_.file(c.plugin + "_seed" + std::to_string(seed));
    nlohmann::json model = {{"plugin", c.plugin}, {"flavour", "debug"}, {"block_size", kT}};
    const int64_t warmup = c.steps / 20;
    const nlohmann::json experiment = {
        {"model", model},
        {"data", {{"train", train_}, {"val", ""}}},
        {"train",
         {{"out_dir", run},
          {"device", "cpu"},
          {"seed", seed},
          {"batch_size", 32},
          {"max_iters", c.steps},
          {"learning_rate", 3e-3},
          {"min_lr", 3e-4},
          {"warmup_iters", warmup},
          {"lr_decay_iters", c.steps},
          {"weight_decay", 0.0},
          {"order", {{"kind", c.order}}},
          {"log_interval", 100},
          {"eval_interval", 0},
          {"checkpoint_interval", 0},
          {"keep_checkpoints", 1}}},
        {"eval", {{"mode", c.mode}, {"batch_size", kValWindows}, {"orders", 1}, {"mc_steps", 32}}}};
    run_training(resolve_config(experiment, {}), /*resume=*/false);
    LoadedModel loaded = load_model_for_eval(run, torch::kCPU);
    const EvalOptions options(EvalConfig::from_json(loaded.config), /*autocast_bf16=*/false);  // CPU
    TokenFile file(val_);
    const auto results =
        evaluate_likelihood(*loaded.model, file, read_dataset_info("markov", val_), options, torch::kCPU);
    EXPECT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].windows_used, kValWindows);
    return results[0].nll;
  }

  aobench::testing::TempDir dir_;
  std::string train_, val_;
};

TEST_P(MarkovLearning, HeldOutLossFarBelowUnigram) {
  const Case c = GetParam();
  std::vector<double> losses;
  for (int s = 0; s < kSeeds; ++s) {
    losses.push_back(train_and_eval(c, 1000 + s));
    std::cout << "[ learning ] " << c.plugin << " seed " << 1000 + s << ": held-out " << c.mode << " loss "
              << losses.back() << " nats/token (threshold " << c.threshold << ", unigram " << std::log(double(kLetters))
              << ")\n";
    if (losses.back() < c.threshold) return;
  }
  std::string all;
  for (double l : losses) all += " " + std::to_string(l);
  ADD_FAILURE() << c.plugin << ": no seed of " << kSeeds << " reached " << c.threshold << " nats/token after "
                << c.steps << " steps; held-out losses:" << all;
}

// Thresholds: the optimum is ln 2 = 0.693 for the decoders (first token skipped) and (ln 16 + (T−1) ln 2)/T =
// 0.758 for the encoders' bound over all T tokens. Measured off-plateau levels with debug shapes:
// GPT 0.70, σ-GPT 1.40, AO-GPT (random orders) 1.40, RADD 0.85 (exact L2R 0.77). With these settings
// (`aobench train`, seed 1000, validation every 50 steps) GPT was at 0.91 after 50 steps, SEDD at 2.05 after
// 100, RADD left the plateau after ~200 steps (2.42 at 250) and σ-GPT after ~300 (2.53 at 350), hence the
// 1500-step budgets. Each threshold sits between the off-plateau level and the unigram 2.773 with a wide
// margin, so a model that has left the plateau passes and one stuck on it (or near it) fails.
INSTANTIATE_TEST_SUITE_P(Plugins, MarkovLearning,
                         ::testing::Values(Case{"gpt", "l2r", "l2r", 600, 1.2},
                                           Case{"sigma_gpt", "random", "random", 1500, 2.0},
                                           Case{"ao_gpt", "random", "random", 1500, 2.0},
                                           Case{"sedd", "l2r", "elbo", 1500, 1.6},
                                           Case{"radd", "l2r", "elbo", 1500, 1.6}),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.plugin; });

}  // namespace
}  // namespace aobench
