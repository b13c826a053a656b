#!/usr/bin/env bash
# Call 2: the measured tile rule; decode_linear letting its dependents launch at its start (default) or after
# its MMAs (AOBENCH_TMP_LATE=1, the earlier code): GPU tests, the Linears alone, whole samples alternating.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench aobench_gpt aobench_ao_gpt test_plugin_common test_plugin_gpt test_plugin_ao_gpt" \
  scripts/gpu_check.sh build > $OUT/build.log 2>&1; echo "build rc $? at $((SECONDS-t0)) s"; grep -E "error" $OUT/build.log | head -20
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
for late in "" 1; do
  AOBENCH_TMP_LATE=$late timeout 120 build/test_plugin_common --gtest_filter='DecodeLinear.*:DecodeScope.*' > $OUT/test_linear$late.log 2>&1; echo "linear tests late=$late rc $? at $((SECONDS-t0)) s"
  grep -E "^\[  PASSED|^\[  FAILED|Failure" $OUT/test_linear$late.log | head -10
done
KERNEL_TESTS="Gpt.Cuda|AoGpt.Cuda|AnyOrderSampler.Cuda" timeout 150 scripts/gpu_check.sh kernels > $OUT/kernels_run.log 2>&1; echo "kernels rc $? at $((SECONDS-t0)) s"
grep -E "tests passed|tests failed|Failed|\*\*\*" $OUT/kernels_run.log | tail -8
for late in "" 1; do
  AOBENCH_TMP_LATE=$late timeout 60 build/aobench_bench --benchmark_filter='BM_DecodeLinear/' --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    2>&1 | grep -E "_mean|rror" | awk -v l="late=$late" '{print l, $1, $2, $3}' | tee -a $OUT/bench_linear.log
done
echo "linear bench at $((SECONDS-t0)) s"
for rep in 1 2; do for late in "" 1; do
  mkdir -p /tmp/o/gs_${rep}_late$late
  OUT=/tmp/o/gs_${rep}_late$late AOBENCH_TMP_LATE=$late GENSPEED_SPECS="gpt:1024:3 ao_gpt:1024:3" GENSPEED_SWEEP=0 GENSPEED_PEERS=none \
    timeout 100 scripts/gpu_check.sh genspeed > /tmp/o/gs_${rep}_late$late/genspeed.log 2>&1
  echo "rep $rep late=$late"; grep "aobench" /tmp/o/gs_${rep}_late$late/genspeed/summary.md; echo "at $((SECONDS-t0)) s"
done; done
echo "done at $((SECONDS-t0)) s"
tar czf $R/call2.tgz -C /tmp o; true
