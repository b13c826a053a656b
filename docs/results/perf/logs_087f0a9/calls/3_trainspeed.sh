#!/usr/bin/env bash
# Device call 3: training speed side by side (nanoGPT + compile, gpt, ao_gpt twice each) and the GPU tests.
cd "$(dirname "$0")/.."
source scripts/gpu_check.sh   # defines the phases and helpers; runs none without arguments
set +e
L=$OUT/logs; mkdir -p $L
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_gpt aobench_ao_gpt test_plugin_common test_plugin_gpt test_plugin_ao_gpt aobench_tests" \
  phase_build > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 1; }
ensure_libs
SECONDS=0; TS_BUDGET=1000
TS_DATA=runs/trainspeed/random_tokens.bin TS_LOGS=runs/trainspeed/logs
rm -rf runs/trainspeed; mkdir -p $TS_LOGS; random_tokens $TS_DATA 20000000
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; git rev-parse HEAD; } 2>/dev/null | tee $L/trainspeed_device.txt
: > "$OUT/ts_peers.jsonl"
peer_run --batch 16 --compile
speed_run gpt_b16 gpt small 16 100
speed_run ao_gpt_b16 ao_gpt small 16 100
speed_run gpt_b16_repeat gpt small 16 100
speed_run ao_gpt_b16_repeat ao_gpt small 16 100
AOBENCH_FUSED_NORMS=0 AOBENCH_FUSED_CE=0 speed_run ao_gpt_b16_reference_kernels ao_gpt small 16 100
python3 scripts/trainspeed_table.py "$OUT/ts_peers.jsonl" runs/trainspeed 30 | tee $L/trainspeed.md
echo "speed runs: ${SECONDS} s"
build/test_plugin_common --gtest_filter='FusedOps.*:FusedNorms.*' > $L/test_common.log 2>&1; tail -2 $L/test_common.log
build/test_plugin_ao_gpt > $L/test_ao_gpt.log 2>&1; tail -2 $L/test_ao_gpt.log
build/test_plugin_gpt --gtest_filter='Gpt.Cuda*' > $L/test_gpt.log 2>&1; tail -2 $L/test_gpt.log
build/aobench_tests --gtest_filter='TrainTest.CudaGraph*:AdamW.*' > $L/test_train.log 2>&1; tail -2 $L/test_train.log
grep -E "FAILED|Failure" $L/*.log | head -20
cp $OUT/ts_peers.jsonl $L/
tar czf $OUT/logs.tgz -C $OUT logs --exclude=build.log
tar czf $OUT/runs.tgz --exclude=random_tokens.bin --exclude=checkpoints runs/trainspeed
