#!/usr/bin/env bash
# Call 5 (2026-12-06, session 2): 70fa85f as committed — its DecodeLinear tests, `aobench speed` against its floor,
# whole GPT and AO-GPT samples and our SEDD at 1 024 steps (issue 33 items 2 and 3 at this commit).
set -o pipefail
O=/tmp/o5; rm -rf $O; mkdir -p $O; T0=$SECONDS
pack() { tar czf "$OUT/call5.tgz" -C /tmp o5; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; git rev-parse HEAD 2>/dev/null; } > $O/device.txt; cat $O/device.txt
( AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench test_plugin_common aobench_gpt aobench_ao_gpt aobench_sedd" \
  source scripts/gpu_build.sh ) > $O/build.log 2>&1; rb=$?
echo "build rc $rb at $((SECONDS-T0)) s"; (( rb == 0 )) || { tail -40 $O/build.log; pack; exit 1; }
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu
tc=$(find build -name test_plugin_common -type f -perm -u+x | head -1)
timeout 40 $tc --gtest_filter='DecodeLinear*.*' > $O/test_common.log 2>&1
echo "common tests rc $? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $O/test_common.log | tr '\n' ' ') at $((SECONDS-T0)) s"
pack
sample() {  # NAME PLUGIN STEPS REPS
  local name=$1 p=$2 steps=$3 reps=$4
  AOBENCH_BENCH_PLUGIN=$p AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=$steps \
    timeout 80 build/aobench_bench --benchmark_filter=PluginSample --benchmark_repetitions=$reps \
    --benchmark_out=$O/sample_$name.json --benchmark_out_format=json > $O/sample_$name.log 2>&1
  echo "$name: $(grep -E '^BM_' $O/sample_$name.log | grep -v -E '_(mean|median|stddev|cv)' | awk '{printf "%s ", $2}') at $((SECONDS-T0)) s"
}
sample gpt gpt 1024 3; sample ao_gpt ao_gpt 1024 3; pack
timeout 60 build/aobench speed --set model.plugin=gpt --set model.flavour=small --set "speed.steps=[1024]" \
  --set speed.batch_size=32 --set speed.length=1024 --set speed.repeats=3 --set speed.warmup=1 --out $O/speed_gpt.json \
  2>&1 | tail -n 12 | tee $O/speed_gpt.log; pack
(( SECONDS - T0 < 205 )) && sample sedd_1024 sedd 1024 1
echo "end at $((SECONDS-T0)) s"; pack
