#!/usr/bin/env bash
# Call 1 (2026-12-06): 057b847's kernels on a GPU for the first time (cf4b40b = main): the GPU tests, then whole
# samples A/B against 32a2ae9 (runs/prev, built beside it) alternating, then `aobench speed` and our SEDD.
set -o pipefail
O=/tmp/o; rm -rf $O; mkdir -p $O; T0=$SECONDS
pack() { tar czf "$OUT/call1.tgz" -C /tmp o; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; git rev-parse HEAD 2>/dev/null; } > $O/device.txt; cat $O/device.txt
( AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench test_plugin_common test_plugin_gpt test_plugin_ao_gpt aobench_gpt aobench_ao_gpt aobench_sedd" \
  source scripts/gpu_build.sh ) > $O/build.log 2>&1 & pa=$!
( cp -r .debs runs/prev/ && cd runs/prev && AOBENCH_DEB_PREFIX=/tmp/aobench-deps-prev AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=OFF \
  AOBENCH_TARGETS="aobench_bench aobench_gpt aobench_ao_gpt" source scripts/gpu_build.sh ) > $O/build_prev.log 2>&1 & pb=$!
wait $pa; ra=$?; wait $pb; rb=$?
echo "builds rc $ra $rb at $((SECONDS-T0)) s"; (( ra == 0 )) || { tail -40 $O/build.log; pack; exit 1; }
(( rb == 0 )) || tail -20 $O/build_prev.log
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu
build/aobench list > $O/plugins.txt 2>&1; pack
tc=$(find build -name test_plugin_common -type f -perm -u+x | head -1)
timeout 150 $tc --gtest_filter='EmbedSum.*:DecodeAttention.*:DecodeScope*.*:FusedNorms.*:FusedOps.*:FusedDraw.*:DecodeLinear*.*' > $O/test_common.log 2>&1
echo "common tests rc $? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $O/test_common.log | tr '\n' ' ') at $((SECONDS-T0)) s"
for t in test_plugin_gpt test_plugin_ao_gpt; do
  b=$(find build -name $t -type f -perm -u+x | head -1)
  timeout 120 $b --gtest_filter='*Cuda*' > $O/$t.log 2>&1; echo "$t Cuda rc $? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $O/$t.log | tr '\n' ' ')"
done
pack
sample() {  # NAME BUILD PLUGIN STEPS REPS
  local name=$1 b=$2 p=$3 steps=$4 reps=$5
  AOBENCH_BENCH_PLUGIN=$p AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=$steps \
    timeout 150 $b/aobench_bench --benchmark_filter=PluginSample --benchmark_repetitions=$reps \
    --benchmark_out=$O/sample_$name.json --benchmark_out_format=json > $O/sample_$name.log 2>&1
  echo "$name: $(grep -E '^BM_' $O/sample_$name.log | grep -v -E '_(mean|median|stddev|cv)' | awk '{printf "%s ", $2}') at $((SECONDS-T0)) s"
}
for r in 1 2; do
  for p in gpt ao_gpt; do
    (( SECONDS - T0 > 470 )) && break 2
    sample ${p}_new_r$r build $p 1024 3
    (( rb == 0 )) && sample ${p}_prev_r$r runs/prev/build $p 1024 3
  done
  pack
  if (( r == 1 )); then
    timeout 100 build/aobench speed --set model.plugin=gpt --set model.flavour=small --set "speed.steps=[1024]" \
      --set speed.batch_size=32 --set speed.length=1024 --set speed.repeats=3 --set speed.warmup=1 --out $O/speed_gpt.json \
      2>&1 | tail -n 12 | tee $O/speed_gpt.log
    sample sedd_1024 build sedd 1024 1; pack
  fi
done
echo "end at $((SECONDS-T0)) s"; pack
