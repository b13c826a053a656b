// Implements: tests of the hardware floor of a generation (metrics/generation.h generation_floor) on shapes small
// enough to sum by hand, and of the bandwidth table (core/device.h hbm_bandwidth).
#include <cstdlib>

#include <gtest/gtest.h>

#include "core/device.h"
#include "core/errors.h"
#include "metrics/generation.h"

namespace aobench {
namespace {

// A decoder: 2 rows × 4 tokens in 4 calls, 10 matmul weights of 2 bytes, 1 layer of width 2 (a cached token: K and
// V, 2 × 1 × 2 elements of 2 bytes = 8 bytes; attention 4 × 1 × 2 = 8 FLOPs per context token).
GenerationShape decoder() {
  GenerationShape s;
  s.batch = 2;
  s.length = 4;
  s.calls = 4;
  s.matmul_params = 10;
  s.n_layer = 1;
  s.n_embd = 2;
  return s;
}

TEST(GenerationFloor, ADecoderReadsItsWeightsAndTheCacheOfThePlacedTokensEachCall) {
  // Call c places token c after c others: bytes 20 + 2 · c · 8; FLOPs 2 · (2 · 10 + 8 · (c + 0.5)).
  const GenerationFloor f = generation_floor(decoder(), /*bandwidth=*/1, /*peak_flops=*/1);
  EXPECT_DOUBLE_EQ(f.bytes, 4 * 20 + 16 * (0 + 1 + 2 + 3));
  EXPECT_DOUBLE_EQ(f.flops, 4 * 48 + 16 * (0 + 1 + 2 + 3));
  EXPECT_DOUBLE_EQ(f.seconds, f.flops);  // compute-bound at 1 FLOP/s per byte/s
  // A fast processor: each call waits for memory instead.
  EXPECT_DOUBLE_EQ(generation_floor(decoder(), 1, 10).seconds, f.bytes);
  // Two tokens per call: the weights read twice, not four times.
  GenerationShape two = decoder();
  two.calls = 2;
  EXPECT_DOUBLE_EQ(generation_floor(two, 1, 1e9).bytes, 2 * 20 + 2 * 2 * 8);  // the second call reads 2 cached
  // Unknown bandwidth or peak: no floor, the counts still there.
  EXPECT_EQ(generation_floor(decoder(), 0, 1).seconds, 0);
  EXPECT_DOUBLE_EQ(generation_floor(decoder(), 0, 1).bytes, f.bytes);
}

TEST(GenerationFloor, AnEncoderRunsEveryPositionEachCallWithoutACache) {
  GenerationShape s = decoder();
  s.kv_cache = false;
  s.calls = 2;
  const GenerationFloor f = generation_floor(s, 1, 1);
  EXPECT_DOUBLE_EQ(f.bytes, 2 * 20);
  EXPECT_DOUBLE_EQ(f.flops, 2 * (2 * 4 * (2 * 10 + 8 * 4)));
}

TEST(GenerationFloor, TheBandwidthTableKnowsTheGpusOfThisProjectAndTheEnvironmentOverrides) {
  EXPECT_DOUBLE_EQ(hbm_bandwidth("NVIDIA H200"), 4.8e12);
  EXPECT_DOUBLE_EQ(hbm_bandwidth("NVIDIA H100 80GB HBM3"), 3.35e12);
  EXPECT_DOUBLE_EQ(hbm_bandwidth("NVIDIA H100 PCIe"), 2.0e12);
  EXPECT_EQ(hbm_bandwidth("cpu"), 0);
  setenv("AOBENCH_HBM_BANDWIDTH", "1e12", 1);
  EXPECT_DOUBLE_EQ(hbm_bandwidth("cpu"), 1e12);
  setenv("AOBENCH_HBM_BANDWIDTH", "fast", 1);
  EXPECT_THROW(hbm_bandwidth("cpu"), ConfigError);
  unsetenv("AOBENCH_HBM_BANDWIDTH");
}

}  // namespace
}  // namespace aobench
