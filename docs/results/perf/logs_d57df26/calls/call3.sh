#!/usr/bin/env bash
# Call 3 (final): build with the tests, the GPU tests, the draw alone with and without the candidate rounds
# (BM_FusedDraw), whole samples with and without them (AOBENCH_DRAW_CANDIDATES=0: -radix) beside our SEDD,
# kernel profiles, the floors.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
scripts/gpu_check.sh build kernels > $OUT/build_kernels.log 2>&1; echo "build kernels rc $? at $((SECONDS-t0)) s"
grep -E "tests passed|tests failed|Failed|\*\*\*|error:" $OUT/build_kernels.log | tail -12
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
timeout 120 build/aobench_bench --benchmark_filter=FusedDraw --benchmark_out=$OUT/bench_draw.json \
  --benchmark_out_format=json > $OUT/bench_draw.log 2>&1; echo "draw bench rc $? at $((SECONDS-t0)) s"
grep -E "^BM_" $OUT/bench_draw.log | sed -E "s/ +[0-9]+ us +[0-9]+ us//" | cut -c1-120
GENSPEED_SPECS="ao_gpt:256:3 ao_gpt-radix:256:3 gpt:1024:3 gpt-radix:1024:3 ao_gpt:1024:3 ao_gpt-radix:1024:2 sedd:256:1 sedd:1024:1" \
  GENSPEED_SWEEP=0 GENSPEED_PEERS=none scripts/gpu_check.sh genspeed > $OUT/genspeed.log 2>&1; echo "genspeed rc $? at $((SECONDS-t0)) s"
cat $OUT/genspeed/summary.md
(( SECONDS - t0 < 500 )) && for spec in ao_gpt:256 gpt:1024; do IFS=: read -r plugin steps <<< "$spec"
  AOBENCH_BENCH_PROFILE=1 AOBENCH_BENCH_PROFILE_TOP=30 AOBENCH_BENCH_PLUGIN=$plugin AOBENCH_BENCH_FLAVOUR=small \
    AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=$steps timeout 100 build/aobench_bench --benchmark_filter=PluginSample \
    > $OUT/profile_${plugin}_$steps.txt 2>&1
  grep -E "profile|draw|round|softmax|first|radix|kept" $OUT/profile_${plugin}_$steps.txt | head -12
done
echo "profiles at $((SECONDS-t0)) s"
(( SECONDS - t0 < 530 )) && for spec in 'ao_gpt:[64,128,256,512,1024]:2' 'gpt:[1024]:3'; do IFS=: read -r plugin steps reps <<< "$spec"
  timeout 100 build/aobench speed --set model.plugin=$plugin --set model.flavour=small --set "speed.steps=$steps" \
    --set speed.batch_size=32 --set speed.length=1024 --set speed.repeats=$reps --set speed.warmup=1 \
    --out $OUT/genspeed/speed_$plugin.json 2>&1 | tail -n 12 | tee $OUT/genspeed/speed_$plugin.log
done
echo "done at $((SECONDS-t0)) s"
tar czf $R/call3.tgz -C /tmp o; true
