#!/usr/bin/env bash
# Calls 1 and 2 (each on a fresh machine): build with the tests, the GPU tests (the decode Linear kernel's among them), the Linear alone against
# cuBLAS (BM_DecodeLinear), whole samples with the kernel and without it (AOBENCH_DECODE_GEMM=0: -cublas) beside
# our SEDD, a kernel profile of the GPT's decode.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
scripts/gpu_check.sh build kernels > $OUT/build_kernels.log 2>&1; rc=$?; echo "build kernels rc $rc at $((SECONDS-t0)) s"
grep -E "tests passed|tests failed|Failed|\*\*\*|error:" $OUT/build_kernels.log | tail -14
grep -E -A12 "Failure$|error: " $OUT/build_kernels.log | head -60
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
timeout 90 build/aobench_bench --benchmark_filter=DecodeLinear --benchmark_repetitions=3 \
  --benchmark_out=$OUT/bench_linear.json --benchmark_out_format=json > $OUT/bench_linear.log 2>&1
echo "linear bench rc $? at $((SECONDS-t0)) s"
grep -E "^BM_.*(mean|stddev)" $OUT/bench_linear.log | sed -E "s/ +[0-9.]+ us +[0-9.]+ us +[0-9]+//" | cut -c1-140
if (( rc == 0 )); then
  GENSPEED_SPECS="gpt:1024:3 gpt-cublas:1024:3 ao_gpt:1024:3 ao_gpt-cublas:1024:3 ao_gpt:256:3 sedd:256:1 sedd:1024:1" \
    GENSPEED_SWEEP=0 GENSPEED_PEERS=none scripts/gpu_check.sh genspeed > $OUT/genspeed.log 2>&1
  echo "genspeed rc $? at $((SECONDS-t0)) s"; cat $OUT/genspeed/summary.md
  (( SECONDS - t0 < 520 )) && AOBENCH_BENCH_PROFILE=1 AOBENCH_BENCH_PROFILE_TOP=30 AOBENCH_BENCH_PLUGIN=gpt \
    AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=1024 timeout 60 build/aobench_bench \
    --benchmark_filter=PluginSample > $OUT/profile_gpt_1024.txt 2>&1 && head -40 $OUT/profile_gpt_1024.txt | grep -E "ms "
fi
echo "done at $((SECONDS-t0)) s"
tar czf $R/e1.tgz -C /tmp o; true
