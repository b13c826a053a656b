// Implements: CPU-testable parts of data-parallel training (DESIGN.md §6; harness/train/distributed.h): torchrun
// variable parsing and its errors, the device rule (WORLD_SIZE > 1 needs CUDA: no Gloo in this build, a clear
// ConfigError on CPU) and the inactive single-process group, which must leave every value untouched.
// The NCCL path itself needs two GPUs: scripts/gpu_ddp_check.sh.
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "harness/train/distributed.h"

namespace aobench {
namespace {

// Sets environment variables for one test and restores the previous values afterwards.
class EnvGuard {
 public:
  void set(const std::string& name, const char* value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value)
      ::setenv(name.c_str(), value, 1);
    else
      ::unsetenv(name.c_str());
  }
  ~EnvGuard() {
    for (const auto& [name, old] : saved_) {
      if (old)
        ::setenv(name.c_str(), old->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

void clear_torchrun(EnvGuard& env) {
  for (const char* v :
       {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE"})
    env.set(v, nullptr);
}

std::string config_error_message(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

TEST(DistributedTest, UnsetVariablesMeanOneProcess) {
  EnvGuard env;
  clear_torchrun(env);
  const DistEnv d = dist_env_from_environment();
  EXPECT_EQ(d.rank, 0);
  EXPECT_EQ(d.world, 1);
  EXPECT_EQ(d.local_rank, 0);
  EXPECT_TRUE(d.is_main());
  EXPECT_FALSE(d.agent_store);
}

TEST(DistributedTest, ParsesTorchrunVariables) {
  EnvGuard env;
  clear_torchrun(env);
  env.set("WORLD_SIZE", "4");
  env.set("RANK", "3");
  env.set("LOCAL_RANK", "1");
  env.set("MASTER_ADDR", "10.0.0.7");
  env.set("MASTER_PORT", "29501");
  env.set("TORCHELASTIC_USE_AGENT_STORE", "True");
  const DistEnv d = dist_env_from_environment();
  EXPECT_EQ(d.world, 4);
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.local_rank, 1);
  EXPECT_EQ(d.master_addr, "10.0.0.7");
  EXPECT_EQ(d.master_port, 29501);
  EXPECT_TRUE(d.agent_store);
  EXPECT_FALSE(d.is_main());
}

TEST(DistributedTest, BadVariablesNameTheVariable) {
  EnvGuard env;
  clear_torchrun(env);
  env.set("WORLD_SIZE", "two");
  EXPECT_NE(config_error_message([] { dist_env_from_environment(); }).find("WORLD_SIZE='two'"), std::string::npos);
  env.set("WORLD_SIZE", "2");
  env.set("RANK", "2");
  EXPECT_NE(config_error_message([] { dist_env_from_environment(); }).find("RANK=2 is not below WORLD_SIZE=2"),
            std::string::npos);
  env.set("RANK", "1");
  env.set("MASTER_PORT", "70000");
  EXPECT_NE(config_error_message([] { dist_env_from_environment(); }).find("MASTER_PORT=70000"), std::string::npos);
}

TEST(DistributedTest, SingleProcessKeepsTheRequestedDevice) {
  DistEnv one;
  EXPECT_EQ(rank_device("cpu", one), torch::Device(torch::kCPU));
}

TEST(DistributedTest, MultiProcessOnCpuIsRefusedWithAHint) {
  DistEnv two;
  two.world = 2;
  two.rank = 1;
  two.local_rank = 1;
  try {
    rank_device("cpu", two);
    FAIL() << "WORLD_SIZE=2 on CPU was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("WORLD_SIZE=2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("train.device"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("single process"), std::string::npos) << e.hint();
  }
}

TEST(DistributedTest, InactiveGroupLeavesValuesUntouched) {
  DistEnv one;
  DataParallel dp(one, torch::kCPU);
  EXPECT_FALSE(dp.active());
  EXPECT_EQ(dp.world(), 1);
  const std::vector<double> v{1.5, -2.25, 1e-300};
  EXPECT_EQ(dp.average(v), v);
  EXPECT_TRUE(dp.any(true));
  EXPECT_FALSE(dp.any(false));
  EXPECT_EQ(dp.gather_to_main("abc"), std::vector<std::string>{"abc"});
  torch::Tensor p = torch::randn({3, 4}, torch::requires_grad());
  (p * p).sum().backward();
  const torch::Tensor grad_before = p.grad().clone();
  const torch::Tensor value_before = p.detach().clone();
  dp.zero_gradients({p});  // inactive: leaves the gradient alone
  dp.sync_next_backward();
  EXPECT_EQ(dp.finish_gradients(torch::tensor({2.5, -1.0})), (std::vector<double>{2.5, -1.0}));
  dp.broadcast_from_main({p});
  dp.barrier();
  EXPECT_TRUE(torch::equal(p.grad(), grad_before));
  EXPECT_TRUE(torch::equal(p.detach(), value_before));
}

}  // namespace
}  // namespace aobench
