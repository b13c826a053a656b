#!/usr/bin/env bash
# Call 4 (2026-12-06, session 2): the MLP c_proj at 2 column tiles × a 4-way K split (the new decode_linear_tile
# rule) — GPU tests, a profiled sweep of its neighbours (temporary AOBENCH_TMP_TILE_768_3072 override), and
# whole samples of the GPT and the AO-GPT alternating the new tiles with the old 4 × 4.
set -o pipefail
O=/tmp/o4; rm -rf $O; mkdir -p $O; T0=$SECONDS
pack() { tar czf "$OUT/call4.tgz" -C /tmp o4; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; git rev-parse HEAD 2>/dev/null; } > $O/device.txt; cat $O/device.txt
( AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench_bench test_plugin_common test_plugin_gpt test_plugin_ao_gpt aobench_gpt aobench_ao_gpt" \
  source scripts/gpu_build.sh ) > $O/build.log 2>&1; rb=$?
echo "build rc $rb at $((SECONDS-T0)) s"; (( rb == 0 )) || { tail -40 $O/build.log; pack; exit 1; }
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu
tc=$(find build -name test_plugin_common -type f -perm -u+x | head -1)
timeout 60 $tc --gtest_filter='DecodeLinear*.*:DecodeScope*.*' > $O/test_common.log 2>&1
echo "common tests rc $? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $O/test_common.log | tr '\n' ' ') at $((SECONDS-T0)) s"
for t in test_plugin_gpt test_plugin_ao_gpt; do
  b=$(find build -name $t -type f -perm -u+x | head -1)
  timeout 90 $b --gtest_filter='*Cuda*' > $O/$t.log 2>&1; echo "$t Cuda rc $? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $O/$t.log | tr '\n' ' ')"
done
pack
prof() {  # NAME PLUGIN [ENV=VALUE ...]
  local name=$1 p=$2; shift 2
  env "$@" AOBENCH_BENCH_PROFILE=1 AOBENCH_BENCH_PROFILE_TOP=12 AOBENCH_BENCH_PLUGIN=$p AOBENCH_BENCH_FLAVOUR=small \
    AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=1024 timeout 100 build/aobench_bench --benchmark_filter=PluginSample \
    --benchmark_repetitions=1 > $O/profile_$name.txt 2>&1
  echo "$name rc $?: $(grep '^profile' $O/profile_$name.txt | sed -e 's/.*GPU time in//') at $((SECONDS-T0)) s"
}
P=AOBENCH_TMP_TILE_768_3072
prof new1 gpt
for v in 4,4 1,4 2,8 1,8 4,8; do prof mlpproj_${v/,/_} gpt $P=$v; done
prof new2 gpt; pack
sample() {  # NAME PLUGIN STEPS REPS [ENV=VALUE ...]
  local name=$1 p=$2 steps=$3 reps=$4; shift 4
  env "$@" AOBENCH_BENCH_PLUGIN=$p AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=$steps \
    timeout 100 build/aobench_bench --benchmark_filter=PluginSample --benchmark_repetitions=$reps \
    --benchmark_out=$O/sample_$name.json --benchmark_out_format=json > $O/sample_$name.log 2>&1
  echo "$name: $(grep -E '^BM_' $O/sample_$name.log | grep -v -E '_(mean|median|stddev|cv)' | awk '{printf "%s ", $2}') at $((SECONDS-T0)) s"
}
for r in 1 2; do
  for p in gpt ao_gpt; do
    (( SECONDS - T0 > 470 )) && break 2
    sample ${p}_new_r$r $p 1024 3
    sample ${p}_old_r$r $p 1024 3 $P=4,4
  done
  pack
done
echo "end at $((SECONDS-T0)) s"; pack
