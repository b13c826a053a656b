#!/usr/bin/env bash
# Call 2: build with the tests, the GPU tests (the multi-slot decode kernel), generation beside our SEDD and
# the compiled SEDD step, the aobench speed sweep (floors), the 256-step profile.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
scripts/gpu_check.sh build kernels > $OUT/build_kernels.log 2>&1; echo "build kernels rc $? at $((SECONDS-t0)) s"
grep -E "tests passed|tests failed|Failed|\*\*\*|error:" $OUT/build_kernels.log | tail -12
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GENSPEED_SPECS="ao_gpt:256:3 ao_gpt:1024:3 gpt:1024:3 ao_gpt:128:2 ao_gpt:512:2 ao_gpt-nodecode:256:1 sedd:256:1 sedd:1024:1" \
  GENSPEED_PEERS=sedd scripts/gpu_check.sh genspeed > $OUT/genspeed.log 2>&1; echo "genspeed rc $? at $((SECONDS-t0)) s"
grep -E "^BM_.*(manual_time |_mean|_stddev)" $OUT/genspeed.log | cut -c1-160; cat $OUT/genspeed/summary.md 2>/dev/null | head -40
grep -hE "floor|steps" $OUT/genspeed/speed_*.log | head -30
scripts/gpu_profile.sh ao_gpt_256 ao_gpt PluginSample AOBENCH_BENCH_STEPS=256 AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_PROFILE_TOP=20 > /dev/null 2>&1
head -24 $OUT/profile_ao_gpt_256.txt
echo "done at $((SECONDS-t0)) s"
tar czf $R/call2.tgz -C /tmp o; true
