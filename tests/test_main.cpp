// Test entry point. Tests that need ../shared/data find it through AOBENCH_DATA_DIR and skip with a
// message naming the variable when it is absent (tests/test_util.h: data_dir_or_skip).
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
