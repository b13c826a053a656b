#!/usr/bin/env bash
# Call 3 (2026-12-06): decode_mlp (a block's MLP in one kernel) on a GPU for the first time: its GPU tests and the
# decode tests around it, BM_DecodeMlp, whole samples with the one kernel and with AOBENCH_DECODE_MLP=0 (two
# launches) alternating in one binary. (Its first run was lost: the machine was taken back mid-call.)
set -o pipefail
O=/tmp/o3; rm -rf $O; mkdir -p $O; T0=$SECONDS
pack() { tar czf "$OUT/call3.tgz" -C /tmp o3; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; } > $O/device.txt; cat $O/device.txt
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench_bench test_plugin_common test_plugin_gpt test_plugin_ao_gpt aobench_gpt aobench_ao_gpt" \
  bash -c 'source scripts/gpu_build.sh' > $O/build.log 2>&1 || { tail -40 $O/build.log; pack; exit 1; }
echo "build done at $((SECONDS-T0)) s"
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu
tc=$(find build -name test_plugin_common -type f -perm -u+x | head -1)
timeout 90 $tc --gtest_filter='DecodeMlp.*:DecodeLinear*.*:DecodeScope*.*' > $O/test_common.log 2>&1
echo "common tests rc $? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $O/test_common.log | tr '\n' ' ') at $((SECONDS-T0)) s"
for t in test_plugin_gpt test_plugin_ao_gpt; do
  b=$(find build -name $t -type f -perm -u+x | head -1)
  timeout 60 $b --gtest_filter='*Cuda*' > $O/$t.log 2>&1; echo "$t Cuda rc $? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $O/$t.log | tr '\n' ' ')"
done
pack
timeout 60 build/aobench_bench --benchmark_filter=BM_DecodeMlp --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  > $O/bm_mlp.log 2>&1; grep -E "_mean|_stddev|rror" $O/bm_mlp.log | cut -c1-160; pack
sample() {  # NAME PLUGIN STEPS REPS [ENV...]
  local name=$1 p=$2 steps=$3 reps=$4; shift 4
  env "$@" AOBENCH_BENCH_PLUGIN=$p AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=$steps \
    timeout 45 build/aobench_bench --benchmark_filter=PluginSample --benchmark_repetitions=$reps \
    --benchmark_out=$O/sample_$name.json --benchmark_out_format=json > $O/sample_$name.log 2>&1
  echo "$name: $(grep -E '^BM_' $O/sample_$name.log | grep -v -E '_(mean|median|stddev|cv)' | awk '{printf "%s ", $2}') $(grep -m1 -o 'decode_mlp=[0-9]' $O/sample_$name.log) at $((SECONDS-T0)) s"
}
for r in 1 2; do
  for p in gpt ao_gpt; do
    (( SECONDS - T0 > 380 )) && break 2
    sample ${p}_mlp1_r$r $p 1024 3
    sample ${p}_mlp0_r$r $p 1024 3 AOBENCH_DECODE_MLP=0
  done
  pack
done
echo "end at $((SECONDS-T0)) s"; pack
