#!/usr/bin/env bash
# Call 4, the same machine as calls 2 and 3: Kineto profiles of one whole sample (BM_PluginSample), GPT and
# AO-GPT at 1 024 steps.
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH; mkdir -p /tmp/o
for spec in gpt:1024 ao_gpt:1024; do IFS=: read -r p s <<< "$spec"
  AOBENCH_BENCH_PROFILE=1 AOBENCH_BENCH_PROFILE_TOP=30 AOBENCH_BENCH_PLUGIN=$p AOBENCH_BENCH_FLAVOUR=small \
    AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=$s timeout 60 build/aobench_bench --benchmark_filter=PluginSample \
    > /tmp/o/profile_${p}_$s.txt 2>&1
  grep -E "ms " /tmp/o/profile_${p}_$s.txt | head -24 | cut -c1-150
done
tar czf $OUT/e3.tgz -C /tmp o
