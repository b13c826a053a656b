// Test entry point. Tests that need ../shared/data find it through AOBENCH_DATA_DIR and skip with a
// message naming the variable when it is absent (tests/test_util.h: data_dir_or_skip).
//
// CPU threads: `ctest -j N` runs N test processes at once, and LibTorch's OpenMP pool would give each one a
// spinning thread per core (on a 16-core machine under -j8 the suite ran about 20× slower than alone). Each
// test process and the `aobench` processes it starts use OMP_NUM_THREADS threads: 2 unless set.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  setenv("OMP_NUM_THREADS", "2", /*overwrite=*/0);  // inherited by the aobench child processes
  const int threads = std::atoi(std::getenv("OMP_NUM_THREADS"));
  if (threads > 0) torch::set_num_threads(threads);
  return RUN_ALL_TESTS();
}
