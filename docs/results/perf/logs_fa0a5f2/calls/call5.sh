#!/usr/bin/env bash
# Call 5: the review commit's decode Linear on the GPU: its tests, the Linears alone, whole samples.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
t0=$SECONDS
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench aobench_gpt aobench_ao_gpt test_plugin_common test_plugin_gpt test_plugin_ao_gpt" \
  scripts/gpu_check.sh build > $OUT/build.log 2>&1; echo "build rc $? at $((SECONDS-t0)) s"; grep -E "error" $OUT/build.log | head -20
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
timeout 100 build/test_plugin_common --gtest_filter='DecodeLinear.*:DecodeScope.*' > $OUT/test_linear.log 2>&1; echo "linear tests rc $? at $((SECONDS-t0)) s"
grep -E "^\[  PASSED|^\[  FAILED|Failure|SKIPPED \]" $OUT/test_linear.log | head -10
tar czf $R/call5.tgz -C /tmp o
KERNEL_TESTS="Gpt.Cuda|AoGpt.Cuda|AnyOrderSampler.Cuda" timeout 120 scripts/gpu_check.sh kernels > $OUT/kernels_run.log 2>&1; echo "kernels rc $? at $((SECONDS-t0)) s"
grep -E "tests passed|tests failed|Failed|\*\*\*" $OUT/kernels_run.log | tail -8
tar czf $R/call5.tgz -C /tmp o
(( SECONDS - t0 < 420 )) && timeout 60 build/aobench_bench --benchmark_filter='BM_DecodeLinear/' --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  2>&1 | grep -E "_mean|rror" | awk '{print $1, $2, $3}' | tee $OUT/bench_linear.log
echo "done at $((SECONDS-t0)) s"
tar czf $R/call5.tgz -C /tmp o; true
