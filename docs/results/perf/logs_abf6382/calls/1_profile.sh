#!/usr/bin/env bash
# One H200: the replayed training step of the small GPT and AO-GPT, every kernel kind listed (where the
# AO-GPT's extra time goes), then their step times.
cd "$(dirname "${BASH_SOURCE[0]}")/../../../../.."
L=$OUT/profile; mkdir -p $L
date -u > $L/device.txt; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> $L/device.txt
SECONDS=0
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=OFF AOBENCH_TARGETS="aobench_gpt aobench_ao_gpt aobench_bench" \
  source scripts/gpu_build.sh > $L/build.log 2>&1 || { tail -40 $L/build.log; exit 1; }
echo "build: $SECONDS s"
for m in gpt ao_gpt; do
  AOBENCH_BENCH_PLUGIN=$m AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_PROFILE=1 AOBENCH_BENCH_PROFILE_TOP=200 \
    build/aobench_bench --benchmark_filter=PluginTrainGraphStep 2>&1 | grep -v "^\*\*\*WARNING" > $L/bench_$m.log
  grep -E "profile|median" $L/bench_$m.log
done
echo "total: $SECONDS s"
