// Test entry point. Tests that need ../shared/data find it through AOBENCH_DATA_DIR and skip with a
// message naming the variable when it is absent (tests/test_util.h: data_dir_or_skip).
//
// CPU threads: `ctest -j N` runs N test processes at once (scripts/test.sh: N = the core count), and
// LibTorch's OpenMP threads spin while they wait, so more threads than cores slows everything down many
// times over (on a 16-core machine under -j8 with a thread per core the suite ran about 20× slower; on a
// 2-core machine two processes of two threads each ran 200× slower). Each test process and the `aobench`
// processes it starts use OMP_NUM_THREADS threads: 1 unless set. The learning tests run alone and take
// every core (tests/learning/markov_learning_test.cpp).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  setenv("OMP_NUM_THREADS", "1", /*overwrite=*/0);  // inherited by the aobench child processes
  const int threads = std::atoi(std::getenv("OMP_NUM_THREADS"));
  if (threads > 0) torch::set_num_threads(threads);
  return RUN_ALL_TESTS();
}
