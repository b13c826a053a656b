// Implements: tests of the trainer's schedules: nanoGPT warmup + cosine LR, the constant (SEDD/RADD)
// schedule, and the EMA warm-up decay min(d, (1+n)/(10+n)) with its update rule (spec-ao-gpt §2.3).
#include <cmath>

#include <gtest/gtest.h>

#include "core/config.h"
#include "core/config_types.h"
#include "core/errors.h"
#include "harness/train/ema.h"
#include "harness/train/lr_schedule.h"

namespace aobench {
namespace {

// The train section of the defaults with the schedule under test.
nlohmann::json train_section(const std::string& schedule) {
  nlohmann::json t = base_config()["train"];
  t["learning_rate"] = 6e-4;
  t["min_lr"] = 6e-5;
  t["warmup_iters"] = 100;
  t["lr_decay_iters"] = 1100;
  t["lr_schedule"] = schedule;
  return t;
}

double learning_rate_at(const nlohmann::json& train, int64_t it) {
  return aobench::learning_rate_at(TrainConfig::from_json(nlohmann::json{{"train", train}}), it);
}

TEST(LrSchedule, CosineWarmupIsLinearFromOneOverWarmupPlusOne) {
  const auto t = train_section("cosine");
  EXPECT_DOUBLE_EQ(learning_rate_at(t, 0), 6e-4 * 1.0 / 101.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(t, 49), 6e-4 * 50.0 / 101.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(t, 99), 6e-4 * 100.0 / 101.0);
}

TEST(LrSchedule, CosinePeakMidpointAndFloor) {
  const auto t = train_section("cosine");
  EXPECT_DOUBLE_EQ(learning_rate_at(t, 100), 6e-4);                          // decay ratio 0
  EXPECT_NEAR(learning_rate_at(t, 600), 6e-5 + 0.5 * (6e-4 - 6e-5), 1e-15);  // ratio 0.5: halfway
  EXPECT_NEAR(learning_rate_at(t, 1100), 6e-5, 1e-15);                       // ratio 1
  EXPECT_DOUBLE_EQ(learning_rate_at(t, 1101), 6e-5);                         // after: min_lr
  EXPECT_DOUBLE_EQ(learning_rate_at(t, 100000), 6e-5);
  // Monotone non-increasing after warm-up.
  for (int it = 100; it < 1200; ++it) EXPECT_LE(learning_rate_at(t, it + 1), learning_rate_at(t, it) + 1e-18);
}

TEST(LrSchedule, ConstantWarmsUpThenStaysFlat) {
  const auto t = train_section("constant");
  EXPECT_DOUBLE_EQ(learning_rate_at(t, 0), 6e-4 / 100.0);  // SEDD: lr·min(step/warmup, 1), step from 1
  EXPECT_DOUBLE_EQ(learning_rate_at(t, 49), 6e-4 * 0.5);
  EXPECT_DOUBLE_EQ(learning_rate_at(t, 99), 6e-4);
  EXPECT_DOUBLE_EQ(learning_rate_at(t, 5000), 6e-4);  // min_lr plays no part
}

TEST(LrSchedule, RejectsBadHyperParameters) {
  auto t = train_section("cosine");
  t["learning_rate"] = -1.0;
  EXPECT_THROW(learning_rate_at(t, 0), ConfigError);
  t = train_section("cosine");
  t["learning_rate"] = std::nan("");
  try {
    learning_rate_at(t, 0);
    FAIL() << "NaN learning rate accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("train.learning_rate"), std::string::npos) << e.what();
  }
  t = train_section("linear");
  EXPECT_THROW(learning_rate_at(t, 0), ConfigError);
  t = train_section("cosine");
  t["lr_decay_iters"] = 10;  // before the end of warm-up
  EXPECT_THROW(learning_rate_at(t, 0), ConfigError);
}

TEST(EmaDecay, WarmUpFormula) {
  EXPECT_DOUBLE_EQ(ema_decay_at(0.9999, 1), 2.0 / 11.0);       // 0.1818…: "0.18 at n = 1"
  EXPECT_DOUBLE_EQ(ema_decay_at(0.9999, 100), 101.0 / 110.0);  // 0.91818…
  EXPECT_NEAR(ema_decay_at(0.9999, 100), 0.9182, 1e-4);
  EXPECT_DOUBLE_EQ(ema_decay_at(0.9999, 10000000), 0.9999);  // capped
  EXPECT_DOUBLE_EQ(ema_decay_at(0.5, 1), 2.0 / 11.0);
  EXPECT_DOUBLE_EQ(ema_decay_at(0.5, 100), 0.5);
}

TEST(EmaDecay, UpdateSwapAndState) {
  torch::nn::Linear lin(2, 1);
  {
    torch::NoGradGuard g;
    lin->weight.fill_(1.0);
    lin->bias.fill_(0.0);
  }
  Ema ema(*lin, 0.9999);
  {
    torch::NoGradGuard g;
    lin->weight.fill_(3.0);
    lin->bias.fill_(1.0);
  }
  ema.update();  // n = 1: decay 2/11 → shadow = 1 − (9/11)(1 − 3)
  const double d = 2.0 / 11.0;
  const TensorMap s = ema.state();
  EXPECT_NEAR(s.at("weight")[0][0].item<double>(), 1.0 - (1 - d) * (1.0 - 3.0), 1e-6);
  EXPECT_NEAR(s.at("bias")[0].item<double>(), 0.0 - (1 - d) * (0.0 - 1.0), 1e-6);
  EXPECT_EQ(ema.num_updates(), 1);
  ema.swap_in();
  EXPECT_NEAR(lin->weight[0][0].item<double>(), 1.0 + 2 * (1 - d), 1e-6);
  ema.swap_out();
  EXPECT_EQ(lin->weight[0][0].item<double>(), 3.0);
  // load_state restores shadows and the count.
  torch::nn::Linear other(2, 1);
  Ema ema2(*other, 0.9999);
  ema2.load_state(s, 1, "test");
  EXPECT_EQ(ema2.num_updates(), 1);
  EXPECT_TRUE(torch::equal(ema2.state().at("weight"), s.at("weight")));
}

}  // namespace
}  // namespace aobench
