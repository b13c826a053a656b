#!/usr/bin/env bash
# Call 1 (2026-12-06, session 2): the decode attention's L2 prefetch of the next layer's cache. Build with tests,
# the GPU tests, then whole samples alternating the prefetch off / on at 25, 50 (default), 75, 100 % of L2.
set -o pipefail
O=/tmp/o; rm -rf $O; mkdir -p $O; T0=$SECONDS
pack() { tar czf "$OUT/call1.tgz" -C /tmp o; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; git rev-parse HEAD 2>/dev/null; } > $O/device.txt; cat $O/device.txt
( AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench test_plugin_common test_plugin_gpt test_plugin_ao_gpt aobench_gpt aobench_ao_gpt aobench_sedd" \
  source scripts/gpu_build.sh ) > $O/build.log 2>&1; rb=$?
echo "build rc $rb at $((SECONDS-T0)) s"; (( rb == 0 )) || { tail -40 $O/build.log; pack; exit 1; }
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu
tc=$(find build -name test_plugin_common -type f -perm -u+x | head -1)
timeout 120 $tc --gtest_filter='DecodeAttention.*:DecodeScope*.*:DecodeLinear*.*' > $O/test_common.log 2>&1
echo "common tests rc $? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $O/test_common.log | tr '\n' ' ') at $((SECONDS-T0)) s"
for t in test_plugin_gpt test_plugin_ao_gpt; do
  b=$(find build -name $t -type f -perm -u+x | head -1)
  timeout 120 $b --gtest_filter='*Cuda*' > $O/$t.log 2>&1; echo "$t Cuda rc $? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $O/$t.log | tr '\n' ' ')"
done
pack
sample() {  # NAME PLUGIN STEPS REPS [ENV=VALUE ...]
  local name=$1 p=$2 steps=$3 reps=$4; shift 4
  env "$@" AOBENCH_BENCH_PLUGIN=$p AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=$steps \
    timeout 120 build/aobench_bench --benchmark_filter=PluginSample --benchmark_repetitions=$reps \
    --benchmark_out=$O/sample_$name.json --benchmark_out_format=json > $O/sample_$name.log 2>&1
  echo "$name: $(grep -E '^BM_' $O/sample_$name.log | grep -v -E '_(mean|median|stddev|cv)' | awk '{printf "%s ", $2}') at $((SECONDS-T0)) s"
}
for r in 1 2 3; do
  for p in gpt ao_gpt; do
    (( SECONDS - T0 > 500 )) && break 2
    sample ${p}_off_r$r $p 1024 3 AOBENCH_DECODE_PREFETCH=0
    sample ${p}_p50_r$r $p 1024 3 AOBENCH_DECODE_PREFETCH=1
    sample ${p}_p100_r$r $p 1024 3 AOBENCH_TMP_PREFETCH_PCT=100
    (( r == 1 )) && sample ${p}_p25_r$r $p 1024 3 AOBENCH_TMP_PREFETCH_PCT=25
    (( r == 1 )) && sample ${p}_p75_r$r $p 1024 3 AOBENCH_TMP_PREFETCH_PCT=75
  done
  pack
done
echo "end at $((SECONDS-T0)) s"; pack
