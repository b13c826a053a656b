#!/usr/bin/env bash
# Call 3 (2026-12-04): main at the decode-attention commit (one query: 8 warps of 2 keys), the committed tree.
# Issue 33's decode ratios side by side: `aobench speed` (its floor), whole samples of the GPT and the AO-GPT,
# our SEDD at 1024 steps, HF generate (static cache + compile), the compiled SEDD step; then the resident draw
# against its phase kernels (AOBENCH_DRAW_RESIDENT=0) and BM_FusedDraw.
set -o pipefail
O=/tmp/o; rm -rf $O; mkdir -p $O; T0=$SECONDS
pack() { tar czf "$OUT/call3.tgz" -C /tmp o; }
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench aobench_gpt aobench_ao_gpt aobench_sedd aobench_radd aobench_sigma_gpt" \
  OUT=$O scripts/gpu_check.sh build > $O/build.log 2>&1 || { tail -40 $O/build.log; pack; exit 1; }
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu
echo "build done at $((SECONDS-T0)) s"; cp $O/device.txt $O/device_copy.txt; cat $O/device.txt; pack
timeout 120 build/aobench speed --set model.plugin=gpt --set model.flavour=small --set "speed.steps=[1024]" \
  --set speed.batch_size=32 --set speed.length=1024 --set speed.repeats=3 --set speed.warmup=1 --out $O/speed_gpt.json \
  2>&1 | tail -n 20 | tee $O/speed_gpt.log
sample() {  # NAME PLUGIN STEPS REPS [ENV...]
  local name=$1 p=$2 steps=$3 reps=$4; shift 4
  env "$@" AOBENCH_BENCH_PLUGIN=$p AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=$steps \
    timeout 150 build/aobench_bench --benchmark_filter=PluginSample --benchmark_repetitions=$reps \
    --benchmark_out=$O/sample_$name.json --benchmark_out_format=json > $O/sample_$name.log 2>&1
  echo "$name: $(grep -E '^BM_' $O/sample_$name.log | grep -v -E '_(mean|median|stddev|cv)' | awk '{printf "%s ", $2}')"
}
sample gpt_r1 gpt 1024 3; sample ao_gpt_r1 ao_gpt 1024 3; pack
sample sedd_1024 sedd 1024 1; pack
timeout 240 python3 bench/peers/hf_generate.py --settings static_compile --out $O/peer_hf_generate.json 2>&1 | tail -n 30 | tee $O/peer_hf_generate.log
pack; echo "peers done at $((SECONDS-T0)) s"
(( SECONDS - T0 < 470 )) && { sample gpt_phases_r1 gpt 1024 3 AOBENCH_DRAW_RESIDENT=0; sample ao_gpt_phases_r1 ao_gpt 1024 3 AOBENCH_DRAW_RESIDENT=0; pack; }
(( SECONDS - T0 < 520 )) && { sample gpt_r2 gpt 1024 3; sample ao_gpt_r2 ao_gpt 1024 3; pack; }
(( SECONDS - T0 < 540 )) && timeout 50 python3 bench/peers/sedd_step.py --out $O/peer_sedd_step.json 2>&1 | tail -n 20 | tee $O/peer_sedd_step.log
echo "end at $((SECONDS-T0)) s"; pack
