#!/usr/bin/env bash
# Kernel-time profile of one aobench_bench case (the Kineto profiler built into the bench binary:
# AOBENCH_BENCH_PROFILE=1 runs one call under it and prints the 25 kernels with the most GPU time, each with the
# time it added to the GPU's timeline: less than its own under PDL), on the GPU machine after a build:
#   scripts/gpu_profile.sh NAME PLUGIN FILTER [ENV=VALUE...]   → $OUT/profile_NAME.txt
# e.g. scripts/gpu_profile.sh gpt_decode gpt PluginSample AOBENCH_BENCH_STEPS=1024 AOBENCH_BENCH_BATCH=32
set -eo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
name=$1 plugin=$2 filter=$3; shift 3
env AOBENCH_BENCH_PLUGIN="$plugin" AOBENCH_BENCH_FLAVOUR=${FLAVOUR:-small} AOBENCH_BENCH_PROFILE=1 "$@" \
  build/aobench_bench --benchmark_filter="$filter" --benchmark_repetitions=1 2>&1 \
  | grep -vE "^(Run on|CPU Caches|  L[123] |Load Average|\*\*\*WARNING|-----|Benchmark  )" | tee "$OUT/profile_$name.txt"
