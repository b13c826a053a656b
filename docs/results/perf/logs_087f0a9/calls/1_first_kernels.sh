#!/usr/bin/env bash
# Device call 1: build with tests, kernel tests, replayed-step profiles of gpt and ao_gpt.
cd "$(dirname "$0")/.."
L=$OUT/logs; mkdir -p $L
date -u > $L/device.txt; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> $L/device.txt
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench_gpt aobench_ao_gpt aobench_bench test_plugin_common test_plugin_ao_gpt aobench_tests" \
  scripts/gpu_check.sh build > $L/build.log 2>&1 || { tail -40 $L/build.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
build/test_plugin_common --gtest_filter='FusedOps.*:FusedNorms.*' > $L/test_common.log 2>&1; tail -4 $L/test_common.log
build/test_plugin_ao_gpt > $L/test_ao_gpt.log 2>&1; tail -4 $L/test_ao_gpt.log
build/aobench_tests --gtest_filter='TrainTest.CudaGraph*:AdamW.*' > $L/test_train.log 2>&1; tail -3 $L/test_train.log
for m in ao_gpt gpt; do
  AOBENCH_BENCH_PLUGIN=$m AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_PROFILE=1 build/aobench_bench \
    --benchmark_filter=PluginTrainGraphStep 2>&1 | grep -v "^\*\*\*WARNING" > $L/bench_$m.log
  grep -E "profile|median" $L/bench_$m.log | head -3
done
grep -E "FAILED|Failure" $L/*.log | head -20
tar czf $OUT/logs.tgz -C $OUT logs
