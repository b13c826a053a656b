#!/usr/bin/env bash
# Call 2 (2026-12-04): the commit's decode attention (one query: 8 warps of 2 keys, 3 blocks an SM), built from the
# tree with .device/decode_attention_cuda_tmp_old.cu in place: the same kernels, plus AOBENCH_TMP_ATTN_OLD=1 for
# the previous one-query shape (4 warps of 4 keys, 4 blocks an SM) in the same binary; unset = the commit's path.
set -o pipefail
O=/tmp/o; rm -rf $O; mkdir -p $O; T0=$SECONDS
pack() { tar czf "$OUT/call2.tgz" -C /tmp o; }
cp .device/decode_attention_cuda_tmp_old.cu plugins/common/decode_attention_cuda.cu
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench test_plugin_common test_plugin_gpt test_plugin_ao_gpt aobench_gpt aobench_ao_gpt aobench_sedd aobench_radd aobench_sigma_gpt" \
  OUT=$O scripts/gpu_check.sh build > $O/build.log 2>&1 || { tail -40 $O/build.log; pack; exit 1; }
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu
echo "build done at $((SECONDS-T0)) s"; pack
tc=$(find build -name test_plugin_common -type f -perm -u+x | head -1)
$tc --gtest_filter='DecodeAttention.*:FusedDraw.*:DecodeLinear*.*:DecodeScope*.*' > $O/test_common.log 2>&1; echo "common tests rc $? $(grep -E '^\[  (PASSED|FAILED)' $O/test_common.log | tr '\n' ' ')"
for t in test_plugin_gpt test_plugin_ao_gpt; do
  b=$(find build -name $t -type f -perm -u+x | head -1)
  timeout 120 $b --gtest_filter='*Cuda*' > $O/$t.log 2>&1; echo "$t Cuda rc $? $(grep -E '^\[  (PASSED|FAILED)' $O/$t.log | tr '\n' ' ')"
done
for old in 0 1; do
  AOBENCH_TMP_ATTN_OLD=$old build/aobench_bench --benchmark_filter=DecodeAttention --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true > $O/bm_attn_old$old.log 2>&1
  echo "old=$old"; grep -E "_mean" $O/bm_attn_old$old.log | awk '{print $1, $(NF-1), $NF}'
done
pack; echo "bench done at $((SECONDS-T0)) s"
for r in 1 2; do
  for p in gpt ao_gpt; do
    for old in 0 1; do
      (( SECONDS - T0 > 560 )) && break 3
      AOBENCH_TMP_ATTN_OLD=$old AOBENCH_BENCH_PLUGIN=$p AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=1024 \
        timeout 100 build/aobench_bench --benchmark_filter=PluginSample --benchmark_repetitions=3 > $O/sample_${p}_old${old}_r$r.log 2>&1
      echo "$p old=$old round $r: $(grep -E '^BM_' $O/sample_${p}_old${old}_r$r.log | grep -v -E '_(mean|median|stddev|cv)' | awk '{printf "%s ", $2}') $(grep -m1 -o 'draw_resident=[0-9]' $O/sample_${p}_old${old}_r$r.log)"
    done
  done
  pack
done
echo "end at $((SECONDS-T0)) s"; pack
