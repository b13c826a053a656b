#!/usr/bin/env bash
# Call 2 (exploration): the draw's variants (AOBENCH_X_DRAW bit 0 two-pass softmax, bit 1 no float bound) with
# one Philox evaluation per uniform, timed alone (BM_FusedDraw) and profiled with Nsight Compute.
R=$OUT; export OUT=/tmp/o3; rm -rf $OUT; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench aobench_gpt aobench_ao_gpt aobench_sedd test_plugin_common" \
  scripts/gpu_check.sh build > $OUT/build.log 2>&1; echo "build rc $? at $((SECONDS-t0)) s"; tail -3 $OUT/build.log
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
T=$(find build -name test_plugin_common -type f | head -1)
timeout 120 $T --gtest_filter='FusedDraw.*:Sampling.*' > $OUT/tests.log 2>&1; echo "tests rc $? at $((SECONDS-t0)) s"; grep -E "PASSED|FAILED|OK \]" $OUT/tests.log | head
for X in 0 1 2 3; do
  AOBENCH_X_DRAW=$X timeout 60 build/aobench_bench --benchmark_filter='FusedDraw/rows:(32|128)/' \
    --benchmark_out=$OUT/draw_x$X.json --benchmark_out_format=json > $OUT/draw_x$X.log 2>&1
  echo "variant $X rc $?"; grep -E "^BM_" $OUT/draw_x$X.log | sed -E 's/ +[0-9]+ us +[0-9]+ us//' | cut -c1-120
done
echo "draw benches at $((SECONDS-t0)) s"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}"
if [[ -n $NCU ]]; then
  timeout 150 $NCU --kernel-name regex:'split_(first|round|softmax)|fused_draw' --launch-count 4 \
    --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats \
    build/aobench_bench --benchmark_filter='FusedDraw/rows:32/top_p%:95/rounds:3/sd%:5' --benchmark_min_time=0.01s \
    > $OUT/ncu.txt 2>&1; echo "ncu rc $? at $((SECONDS-t0)) s"
  grep -E "split_|fused_draw|Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Stall|Executed Ipc A|Warp Cycles Per Issued" $OUT/ncu.txt | head -60
fi
for X in 0 1; do
  AOBENCH_X_DRAW=$X GENSPEED_SPECS="gpt:1024:2 ao_gpt:256:2" GENSPEED_SWEEP=0 GENSPEED_PEERS=none OUT=$OUT/x$X \
    scripts/gpu_check.sh genspeed > $OUT/genspeed_x$X.log 2>&1; grep -E "aobench" $OUT/x$X/genspeed/summary.md
done
echo "done at $((SECONDS-t0)) s"
tar czf $R/call2.tgz -C /tmp o3; true
