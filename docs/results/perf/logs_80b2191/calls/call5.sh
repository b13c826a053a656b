#!/usr/bin/env bash
# Call 5: the decode attention split at most 128 keys a block, built with tests; the attention, sampler and decode
# tests; whole samples; the profile in stream order.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench aobench_gpt aobench_ao_gpt test_plugin_common test_plugin_gpt test_plugin_ao_gpt" \
  scripts/gpu_check.sh build > $OUT/build.log 2>&1; echo "build rc $? at $((SECONDS-t0)) s"; grep -E "error" $OUT/build.log | head
KERNEL_TESTS="DecodeAttention|DecodeScope|Gpt.Cuda|AoGpt.Cuda|AnyOrderSampler.Cuda" \
  timeout 80 scripts/gpu_check.sh kernels > $OUT/kernels_run.log 2>&1; echo "kernels rc $? at $((SECONDS-t0)) s"
grep -E "tests passed|tests failed|Failed|\*\*\*" $OUT/kernels_run.log | tail -14; grep -E -B2 -A12 "Failure$" $OUT/kernels_run.log | head -40
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GENSPEED_SPECS="gpt:1024:3 ao_gpt:1024:2" GENSPEED_SWEEP=0 GENSPEED_PEERS=none \
  timeout 50 scripts/gpu_check.sh genspeed > $OUT/genspeed.log 2>&1; cat $OUT/genspeed/summary.md; echo "genspeed at $((SECONDS-t0)) s"
timeout 15 scripts/gpu_profile.sh gpt_1024_inorder gpt PluginSample AOBENCH_BENCH_STEPS=1024 \
  AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_PROFILE_TOP=40 AOBENCH_DECODE_PDL=0 > /dev/null 2>&1; head -12 $OUT/profile_gpt_1024_inorder.txt | cut -c1-160
echo "done at $((SECONDS-t0)) s"
tar czf $R/call5.tgz -C /tmp o; true
