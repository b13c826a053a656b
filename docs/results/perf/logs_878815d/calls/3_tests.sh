#!/usr/bin/env bash
# 1 × H200: the decode-attention kernel's GPU tests and the samplers' kernel on/off tests after the review mends.
source scripts/gpu_check.sh; set +e
L=$OUT/c3; mkdir -p $L; OUT=$L
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench test_plugin_common test_plugin_gpt test_plugin_ao_gpt" \
  phase_build > $L/build.log 2>&1 || { tail -40 $L/build.log; exit 1; }
set +e
ensure_libs
for t in "test_plugin_common DecodeAttention.*:FusedNorms.*:FusedDraw.*" "test_plugin_gpt Gpt.Cuda*" "test_plugin_ao_gpt AoGpt.Cuda*"; do
  set -- $t
  b=$(find build -name "$1" -type f -perm -u+x | head -1)
  timeout 200 $b --gtest_filter="$2" > $L/$1.log 2>&1; echo "$1 $2 rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $L/$1.log | tr '\n' ' ')"
done | tee $L/summary.txt
