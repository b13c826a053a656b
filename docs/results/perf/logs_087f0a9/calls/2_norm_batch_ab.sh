#!/usr/bin/env bash
# Device call 2: kernel tests after the qk-norm / CE-bias changes, and the rms_step backward variants A/B.
cd "$(dirname "$0")/.."
L=$OUT/logs; mkdir -p $L
date -u > $L/device.txt; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> $L/device.txt
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_ao_gpt aobench_bench test_plugin_common test_plugin_ao_gpt" \
  scripts/gpu_check.sh build > $L/build.log 2>&1 || { tail -40 $L/build.log; tar czf $OUT/logs.tgz -C $OUT logs; exit 1; }
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
build/test_plugin_common --gtest_filter='FusedOps.*:FusedNorms.*' > $L/test_common.log 2>&1; tail -3 $L/test_common.log
build/test_plugin_ao_gpt > $L/test_ao_gpt.log 2>&1; tail -3 $L/test_ao_gpt.log
for v in default 2 4b3; do
  AOBENCH_EXP_NORM_BATCH=$v AOBENCH_BENCH_PLUGIN=ao_gpt AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_PROFILE=1 build/aobench_bench \
    --benchmark_filter=PluginTrainGraphStep 2>&1 | grep -v "^\*\*\*WARNING" > $L/bench_ao_gpt_$v.log
  echo "== $v"; grep -E "captured step|median|rms_step_backward|qk_norm|lm_ce|reduce_kernel" $L/bench_ao_gpt_$v.log | head -9 | cut -c1-140
done
grep -E "FAILED|Failure" $L/*.log | head -20
tar czf $OUT/logs.tgz -C $OUT logs
