#!/usr/bin/env bash
# Device call 8: after the review mends (QK norm in qk_rms_norm's multiply order, h ≥ 32, tests against
# qk_rms_norm and the masked path): the decode-attention and captured-sampler GPU tests.
cd "$(dirname "$0")/.."
source scripts/gpu_check.sh
set +e
L=$OUT/logs; mkdir -p $L
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_gpt aobench_ao_gpt test_plugin_common test_plugin_gpt test_plugin_ao_gpt" \
  phase_build > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 1; }
ensure_libs
set +e
echo "build ${SECONDS} s"
build/test_plugin_common --gtest_filter='DecodeAttention.*:FusedNorms.CudaQk*' > $L/test_decode.log 2>&1; grep -E "^\[ +(OK|FAILED|PASSED) |Failure|max" $L/test_decode.log | head -20
build/test_plugin_gpt --gtest_filter='Gpt.CudaGraph*' > $L/test_gpt.log 2>&1; grep -E "^\[ +(OK|FAILED|PASSED) |Failure|differ" $L/test_gpt.log | head
build/test_plugin_ao_gpt --gtest_filter='AoGpt.Cuda*' > $L/test_ao_gpt.log 2>&1; grep -E "^\[ +(OK|FAILED|PASSED) |Failure" $L/test_ao_gpt.log | head
echo "total ${SECONDS} s"
