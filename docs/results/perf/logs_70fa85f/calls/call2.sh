#!/usr/bin/env bash
# Call 2 (2026-12-06, session 2): where a decode step's time goes under PDL. Kineto profiles of one whole sample
# (32 × 1 024, top-p .95, T .9) of the GPT and the AO-GPT with the kernels' added-to-the-timeline time, PDL on (as
# every timing runs) and, for the GPT, off; then whole samples for the record.
set -o pipefail
O=/tmp/o2; rm -rf $O; mkdir -p $O; T0=$SECONDS
pack() { tar czf "$OUT/call2.tgz" -C /tmp o2; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; git rev-parse HEAD 2>/dev/null; } > $O/device.txt; cat $O/device.txt
( AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=OFF AOBENCH_TARGETS="aobench_bench aobench_gpt aobench_ao_gpt" \
  source scripts/gpu_build.sh ) > $O/build.log 2>&1; rb=$?
echo "build rc $rb at $((SECONDS-T0)) s"; (( rb == 0 )) || { tail -40 $O/build.log; pack; exit 1; }
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu
prof() {  # NAME PLUGIN [ENV=VALUE ...]
  local name=$1 p=$2; shift 2
  env "$@" AOBENCH_BENCH_PROFILE=1 AOBENCH_BENCH_PROFILE_TOP=60 AOBENCH_BENCH_PLUGIN=$p AOBENCH_BENCH_FLAVOUR=small \
    AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=1024 timeout 150 build/aobench_bench --benchmark_filter=PluginSample \
    --benchmark_repetitions=1 > $O/profile_$name.txt 2>&1
  echo "$name rc $?: $(grep '^profile' $O/profile_$name.txt) at $((SECONDS-T0)) s"
}
prof gpt_pdl gpt; pack
prof ao_gpt_pdl ao_gpt; pack
prof gpt_nopdl gpt AOBENCH_DECODE_PDL=0; pack
prof ao_gpt_nopdl ao_gpt AOBENCH_DECODE_PDL=0; pack
sample() {  # NAME PLUGIN STEPS REPS
  local name=$1 p=$2 steps=$3 reps=$4
  AOBENCH_BENCH_PLUGIN=$p AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=$steps \
    timeout 120 build/aobench_bench --benchmark_filter=PluginSample --benchmark_repetitions=$reps \
    --benchmark_out=$O/sample_$name.json --benchmark_out_format=json > $O/sample_$name.log 2>&1
  echo "$name: $(grep -E '^BM_' $O/sample_$name.log | grep -v -E '_(mean|median|stddev|cv)' | awk '{printf "%s ", $2}') at $((SECONDS-T0)) s"
}
sample gpt gpt 1024 3; sample ao_gpt ao_gpt 1024 3
echo "end at $((SECONDS-T0)) s"; pack
