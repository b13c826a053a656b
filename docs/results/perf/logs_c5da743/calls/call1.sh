#!/usr/bin/env bash
# Call 1: build with the tests (slim .debs), the GPU tests, the k>1 step timings, decode and training profiles.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
scripts/gpu_check.sh build kernels > $OUT/build_kernels.log 2>&1; echo "build kernels rc $? at $((SECONDS-t0)) s"
grep -E "tests passed|tests failed|Failed|\*\*\*|rror" $OUT/build_kernels.log | tail -8
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GENSPEED_SPECS="ao_gpt:256:3 ao_gpt:512:2 ao_gpt:128:2 ao_gpt:1024:2 ao_gpt-nographs:256:1 sedd:256:1" GENSPEED_SWEEP=0 GENSPEED_PEERS=none \
  scripts/gpu_check.sh genspeed > $OUT/genspeed.log 2>&1; echo "genspeed rc $? at $((SECONDS-t0)) s"; grep "^BM_" $OUT/genspeed.log
scripts/gpu_profile.sh gpt_decode gpt PluginSample AOBENCH_BENCH_STEPS=1024 AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_PROFILE_TOP=30 > /dev/null 2>&1
scripts/gpu_profile.sh ao_gpt_256 ao_gpt PluginSample AOBENCH_BENCH_STEPS=256 AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_PROFILE_TOP=30 > /dev/null 2>&1
head -36 $OUT/profile_gpt_decode.txt; head -36 $OUT/profile_ao_gpt_256.txt
FLAVOUR=tiny scripts/gpu_profile.sh tiny_train ao_gpt PluginTrainFullStep AOBENCH_BENCH_BATCH=16 AOBENCH_BENCH_LENGTH=128 AOBENCH_BENCH_PROFILE_TOP=30 > /dev/null 2>&1
scripts/gpu_profile.sh gpt_train gpt PluginTrainFullStep AOBENCH_BENCH_BATCH=16 AOBENCH_BENCH_PROFILE_TOP=30 > /dev/null 2>&1
scripts/gpu_profile.sh ao_train ao_gpt PluginTrainFullStep AOBENCH_BENCH_BATCH=16 AOBENCH_BENCH_PROFILE_TOP=30 > /dev/null 2>&1
head -36 $OUT/profile_tiny_train.txt; head -36 $OUT/profile_gpt_train.txt; head -36 $OUT/profile_ao_train.txt
echo "done at $((SECONDS-t0)) s"
tar czf $R/call1.tgz -C /tmp o; true
