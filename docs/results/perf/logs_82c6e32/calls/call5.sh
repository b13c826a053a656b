#!/usr/bin/env bash
# Call 5, a fresh machine: the review's mends (PDL only inside a sampler's DecodeWeightsScope and only for code
# compiled with the wait, x read coherently after the wait, N ≥ 8, torch's tanh order, more tests): build the
# plugins' tests, the GPU tests of the decode kernels and samplers, the Linear alone, whole samples.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench aobench_gpt aobench_ao_gpt test_plugin_common test_plugin_gpt test_plugin_ao_gpt" \
  scripts/gpu_check.sh build > $OUT/build.log 2>&1; echo "build rc $? at $((SECONDS-t0)) s"; grep -E "error" $OUT/build.log | head
KERNEL_TESTS="DecodeLinear|Gpt.Cuda|AoGpt.Cuda|AnyOrderSampler.Cuda|FusedDraw|DecodeAttention.CudaKernelReplays" \
  scripts/gpu_check.sh kernels > $OUT/kernels_run.log 2>&1; echo "kernels rc $? at $((SECONDS-t0)) s"
grep -E "tests passed|tests failed|Failed|\*\*\*" $OUT/kernels_run.log | tail -12; grep -E -A10 "Failure$" $OUT/kernels_run.log | head -40
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
timeout 40 build/aobench_bench --benchmark_filter=DecodeLinear --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out=$OUT/bench_linear.json --benchmark_out_format=json > $OUT/bench_linear.log 2>&1
grep -E "^BM_.*mean" $OUT/bench_linear.log | sed -E "s/ +[0-9.]+ us +[0-9.]+ us +[0-9]+//" | cut -c1-120
(( SECONDS - t0 < 300 )) && GENSPEED_SPECS="gpt:1024:3 ao_gpt:1024:2" GENSPEED_SWEEP=0 GENSPEED_PEERS=none \
  scripts/gpu_check.sh genspeed > $OUT/genspeed.log 2>&1 && cat $OUT/genspeed/summary.md
echo "done at $((SECONDS-t0)) s"
tar czf $R/e4.tgz -C /tmp o; true
