#!/usr/bin/env bash
# Call 1: 80b2191 built with tests; the GPU tests of every decode kernel, norm and sampler; profiles in stream order.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench aobench_gpt aobench_ao_gpt aobench_sedd test_plugin_common test_plugin_gpt test_plugin_ao_gpt" \
  scripts/gpu_check.sh build > $OUT/build.log 2>&1; echo "build rc $? at $((SECONDS-t0)) s"; grep -E "error" $OUT/build.log | head
KERNEL_TESTS="DecodeScope|DecodeLinear|DecodeAttention|FusedOps|FusedNorms|Gpt.Cuda|AoGpt.Cuda|AnyOrderSampler.Cuda|FusedDraw" \
  scripts/gpu_check.sh kernels > $OUT/kernels_run.log 2>&1; echo "kernels rc $? at $((SECONDS-t0)) s"
grep -E "tests passed|tests failed|Failed|\*\*\*" $OUT/kernels_run.log | tail -14; grep -E -A10 "Failure$" $OUT/kernels_run.log | head -40
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GENSPEED_SPECS="gpt:1024:3 gpt-inorder:1024:3 ao_gpt:1024:3" GENSPEED_SWEEP=0 GENSPEED_PEERS=none \
  timeout 150 scripts/gpu_check.sh genspeed > $OUT/genspeed.log 2>&1; cat $OUT/genspeed/summary.md; echo "genspeed at $((SECONDS-t0)) s"
for m in gpt; do (( SECONDS - t0 < 540 )) && timeout 40 scripts/gpu_profile.sh ${m}_1024_inorder $m PluginSample AOBENCH_BENCH_STEPS=1024 \
  AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_PROFILE_TOP=40 AOBENCH_DECODE_PDL=0 > /dev/null 2>&1; head -44 $OUT/profile_${m}_1024_inorder.txt | cut -c1-160; done
echo "done at $((SECONDS-t0)) s"
tar czf $R/call1.tgz -C /tmp o; true
