#!/usr/bin/env bash
# Call 1: the decode Linear with column tiles 1/2/4 and a K split over a cluster: GPU tests, the tile sweep,
# whole samples, a stream-order profile.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench aobench_gpt aobench_ao_gpt test_plugin_common test_plugin_gpt test_plugin_ao_gpt" \
  scripts/gpu_check.sh build > $OUT/build.log 2>&1; echo "build rc $? at $((SECONDS-t0)) s"; grep -E "error" $OUT/build.log | head -20
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
timeout 120 build/test_plugin_common --gtest_filter='DecodeLinear.*:DecodeScope.*' > $OUT/test_linear.log 2>&1; echo "linear tests rc $? at $((SECONDS-t0)) s"
grep -E "^\[  (PASSED|FAILED|  OK) |^\[  FAILED|Failure|error" $OUT/test_linear.log | head -30
timeout 150 build/aobench_bench --benchmark_filter='BM_DecodeLinear' --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  2>&1 | grep -E "_mean|rror" | awk '{print $1, $2, $3}' | tee $OUT/bench_linear.log; echo "linear bench at $((SECONDS-t0)) s"
KERNEL_TESTS="Gpt.Cuda|AoGpt.Cuda|AnyOrderSampler.Cuda" timeout 150 scripts/gpu_check.sh kernels > $OUT/kernels_run.log 2>&1; echo "kernels rc $? at $((SECONDS-t0)) s"
grep -E "tests passed|tests failed|Failed|\*\*\*" $OUT/kernels_run.log | tail -8
GENSPEED_SPECS="gpt:1024:3 ao_gpt:1024:3" GENSPEED_SWEEP=0 GENSPEED_PEERS=none \
  timeout 150 scripts/gpu_check.sh genspeed > $OUT/genspeed.log 2>&1; cat $OUT/genspeed/summary.md; echo "genspeed at $((SECONDS-t0)) s"
(( SECONDS - t0 < 520 )) && timeout 45 scripts/gpu_profile.sh gpt_1024_inorder gpt PluginSample AOBENCH_BENCH_STEPS=1024 \
  AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_PROFILE_TOP=40 AOBENCH_DECODE_PDL=0 > /dev/null 2>&1; head -30 $OUT/profile_gpt_1024_inorder.txt | cut -c1-160
echo "done at $((SECONDS-t0)) s"
tar czf $R/call1.tgz -C /tmp o; true
