#!/usr/bin/env bash
# Device call 6: the decode-attention kernel (one block per row, QK norm inside): its GPU tests, the decoders'
# speed with and without it (AOBENCH_FUSED_DECODE=0), HF generate, the aobench speed sweep, the decode profile.
cd "$(dirname "$0")/.."
source scripts/gpu_check.sh
set +e
L=$OUT/logs; mkdir -p $L
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_gpt aobench_ao_gpt aobench_sedd aobench_bench test_plugin_common test_plugin_gpt test_plugin_ao_gpt" \
  phase_build > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 1; }
ensure_libs
set +e  # the phases turn -e back on
echo "build ${SECONDS} s"
build/test_plugin_common --gtest_filter='DecodeAttention.*' > $L/test_decode.log 2>&1; grep -E "OK|FAILED|Failure|max" $L/test_decode.log | head -20
GENSPEED_SPECS="gpt:1024:3 gpt-nodecode:1024:2 ao_gpt:1024:3 ao_gpt-nodecode:1024:2 sedd:1024:1" GENSPEED_PEERS=hf GENSPEED_SWEEP=0 \
  phase_genspeed > $L/genspeed.log 2>&1; set +e
echo "genspeed ${SECONDS} s"; cat $OUT/genspeed/summary.md
grep -E "PASSED|FAILED" $OUT/genspeed/tests.log
OUT=$L scripts/gpu_profile.sh ao_gpt_decode ao_gpt PluginSample AOBENCH_BENCH_STEPS=1024 AOBENCH_BENCH_BATCH=32 > /dev/null 2>&1
head -22 $L/profile_ao_gpt_decode.txt
build/test_plugin_ao_gpt > $L/test_ao_gpt.log 2>&1; tail -3 $L/test_ao_gpt.log
build/test_plugin_gpt > $L/test_gpt.log 2>&1; tail -3 $L/test_gpt.log
echo "total ${SECONDS} s"
tar czf $OUT/call5.tgz -C $OUT logs genspeed
rm -rf $OUT/logs $OUT/genspeed
