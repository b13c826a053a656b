#!/usr/bin/env bash
# Call 3: build with the tests, the GPU tests (and the sampler's with every step on the kernel), generation of
# AO-GPT (kernel up to 4 slots, the default; up to 16; the masked SDPA) beside our SEDD, the floors.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
scripts/gpu_check.sh build kernels > $OUT/build_kernels.log 2>&1; echo "build kernels rc $? at $((SECONDS-t0)) s"
grep -E "tests passed|tests failed|Failed|\*\*\*|error:" $OUT/build_kernels.log | tail -12
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
AOBENCH_DECODE_SLOTS=16 ctest --test-dir build -R "CudaGraphParallelSteps|CudaGraphSampler" --output-on-failure > $OUT/slots16_tests.log 2>&1
echo "slots16 sampler tests rc $?"; grep -E "tests passed|Failed" $OUT/slots16_tests.log
GENSPEED_SPECS="ao_gpt:256:3 ao_gpt:512:3 ao_gpt:1024:3 gpt:1024:3 ao_gpt-nodecode:256:2 ao_gpt:128:2 sedd:256:1 sedd:1024:1" \
  GENSPEED_SWEEP=0 GENSPEED_PEERS=none scripts/gpu_check.sh genspeed > $OUT/genspeed.log 2>&1; echo "genspeed rc $? at $((SECONDS-t0)) s"
cat $OUT/genspeed/summary.md
mkdir -p $OUT/slots16
for st in 256:3 128:2 512:2; do IFS=: read -r steps reps <<< "$st"
  AOBENCH_DECODE_SLOTS=16 AOBENCH_BENCH_PLUGIN=ao_gpt AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=$steps \
    timeout 100 build/aobench_bench --benchmark_filter=PluginSample --benchmark_repetitions=$reps \
    --benchmark_out=$OUT/slots16/bench_sample_ao_gpt_$steps.json --benchmark_out_format=json 2>&1 | grep -E "^BM_.*(manual_time |_mean|_stddev)" | cut -c1-150
done
echo "slots16 at $((SECONDS-t0)) s"
timeout 100 build/aobench speed --set model.plugin=ao_gpt --set model.flavour=small --set "speed.steps=[64,128,256,512,1024]" \
  --set speed.batch_size=32 --set speed.length=1024 --set speed.repeats=2 --set speed.warmup=1 \
  --out $OUT/genspeed/speed_ao_gpt.json 2>&1 | tail -n 12 | tee $OUT/genspeed/speed_ao_gpt.log
echo "done at $((SECONDS-t0)) s"
tar czf $R/call3.tgz -C /tmp o; true
