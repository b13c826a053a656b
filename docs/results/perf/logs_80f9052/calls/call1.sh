#!/usr/bin/env bash
# Call 1 (2026-12-04, tree f50b869 + a temporary AOBENCH_TMP_ATTN_VARIANT switch in decode_attention_cuda.cu):
# the one-slot decode attention's block shape. V0 4 warps 4 keys (4 blocks/SM, committed); V1 8 warps 2 keys (3/SM);
# V2 4 warps 2 keys 6/SM (rows split in 2); V3 8 warps 2 keys 2/SM (two waves, a control).
set -o pipefail
O=/tmp/o; mkdir -p $O; T0=$SECONDS
pack() { tar czf "$OUT/call1.tgz" -C /tmp o; }
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench test_plugin_common test_plugin_gpt test_plugin_ao_gpt" \
  OUT=$O scripts/gpu_check.sh build > $O/build.log 2>&1 || { tail -40 $O/build.log; pack; exit 1; }
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu
echo "build done at $((SECONDS-T0)) s"; pack
for v in 0 1 2 3; do
  AOBENCH_TMP_ATTN_VARIANT=$v $(find build -name test_plugin_common -type f -perm -u+x | head -1) --gtest_filter='DecodeAttention.*' > $O/test_attn_v$v.log 2>&1
  echo "V$v attention tests rc $? $(grep -E '^\[  (PASSED|FAILED)' $O/test_attn_v$v.log | tr '\n' ' ')"
done
for v in 0 1 2 3; do
  AOBENCH_TMP_ATTN_VARIANT=$v build/aobench_bench --benchmark_filter=DecodeAttention --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true > $O/bm_attn_v$v.log 2>&1
  echo "V$v"; grep -E "_mean|_stddev" $O/bm_attn_v$v.log | awk '{print $1, $2, $3, $NF, $(NF-1)}'
done
pack; echo "bench done at $((SECONDS-T0)) s"
for r in 1 2; do
  for p in gpt ao_gpt; do
    for v in 0 1 2; do
      (( SECONDS - T0 > 540 )) && break 3
      AOBENCH_TMP_ATTN_VARIANT=$v AOBENCH_BENCH_PLUGIN=$p AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=1024 \
        timeout 100 build/aobench_bench --benchmark_filter=PluginSample --benchmark_repetitions=3 > $O/sample_${p}_v${v}_r$r.log 2>&1
      echo "$p V$v round $r: $(grep -E '^BM_' $O/sample_${p}_v${v}_r$r.log | grep -v -E '_(mean|median|stddev|cv)' | awk '{printf "%s ", $2}')"
    done
  done
  pack
done
for v in 0 1 2; do AOBENCH_TMP_ATTN_VARIANT=$v timeout 60 $(find build -name test_plugin_gpt -type f -perm -u+x | head -1) --gtest_filter='*Cuda*' > $O/test_gpt_v$v.log 2>&1; echo "gpt cuda tests V$v rc $?"; done
echo "end at $((SECONDS-T0)) s"; pack
