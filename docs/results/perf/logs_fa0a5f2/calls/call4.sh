#!/usr/bin/env bash
# Call 4: decode attention variants (AOBENCH_TMP_ATTN, calls/call4_attention_variants.patch, not committed):
# 8 = six keys a lane group per step for one query (3 blocks an SM), 1 = eight, 2 / 4 = the first 2 / 4 steps'
# cached keys prefetched into L2 before the wait. GPU tests under each, whole samples alternating.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench aobench_gpt aobench_ao_gpt test_plugin_common" \
  scripts/gpu_check.sh build > $OUT/build.log 2>&1; echo "build rc $? at $((SECONDS-t0)) s"; grep -E "error" $OUT/build.log | head -20
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
for v in 0 8 1 2 10; do
  AOBENCH_TMP_ATTN=$v timeout 60 build/test_plugin_common --gtest_filter='DecodeAttention.*:DecodeScope.*' > $OUT/test_attn_$v.log 2>&1
  echo "attention tests v=$v rc $? at $((SECONDS-t0)) s"; grep -E "^\[  PASSED|^\[  FAILED|Failure" $OUT/test_attn_$v.log | head -6
done
run() {  # variant, round
  g=/tmp/o/gs_$2_v$1; mkdir -p $g
  OUT=$g AOBENCH_TMP_ATTN=$1 GENSPEED_SPECS="gpt:1024:3 ao_gpt:1024:3" GENSPEED_SWEEP=0 GENSPEED_PEERS=none \
    timeout 80 scripts/gpu_check.sh genspeed > $g/genspeed.log 2>&1
  echo "round $2 v=$1"; grep "aobench" $g/genspeed/summary.md; echo "at $((SECONDS-t0)) s"
}
for v in 0 8 1 2 4 10; do run $v 1; done
for v in 0 8 1 2 4 10; do (( SECONDS - t0 < 520 )) && run $v 2; done
echo "done at $((SECONDS-t0)) s"
tar czf $R/call4.tgz -C /tmp o; true
