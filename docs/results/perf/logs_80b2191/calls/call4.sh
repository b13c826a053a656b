#!/usr/bin/env bash
# Call 4: 80b2191 built without tests; where a decode step's time goes, kernel by kernel: Nsight Compute at the
# GPU's own clocks (--clock-control none) on the GPT's decode Linears, attention, add + LayerNorm and draw at
# step ≈ 512 of 1 024 (32 rows), and the Linears alone (BM_DecodeLinear).
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=OFF AOBENCH_TARGETS="aobench aobench_bench aobench_gpt" \
  scripts/gpu_check.sh build > $OUT/build.log 2>&1; echo "build rc $? at $((SECONDS-t0)) s"; grep -E "error" $OUT/build.log | head
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
timeout 60 build/aobench_bench --benchmark_filter=BM_DecodeLinear --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  2>&1 | grep -E "^BM_.*_mean" | tee $OUT/bench_linear.log; echo "linear bench at $((SECONDS-t0)) s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1); echo "ncu: ${NCU:-none}"
# name regex, launches of it to skip (about step 512 of the warm-up request), launches to profile
for spec in "decode_linear_kernel:24576:8" "decode_attention_kernel:6144:4" "add_layer_norm_warp_kernel:12800:4" \
            "split_first_kernel|split_round_kernel|split_softmax_kernel:2048:10"; do
  IFS=: read -r name skip count <<< "$spec"; tag=${name%%_kernel*}
  (( SECONDS - t0 < 520 )) || break
  AOBENCH_BENCH_PLUGIN=gpt AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=1024 AOBENCH_CUDA_GRAPHS=0 \
    timeout $(( 590 - (SECONDS - t0) < 110 ? 590 - (SECONDS - t0) : 110 )) $NCU --clock-control none --kernel-name regex:"$name" \
    --launch-skip $skip --launch-count $count --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis \
    build/aobench_bench --benchmark_filter=PluginSample --benchmark_repetitions=1 > $OUT/ncu_$tag.txt 2>&1
  echo "ncu $tag rc $? at $((SECONDS-t0)) s"
  grep -E "^  [a-z_].*\(|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Waves Per SM|Grid Size|Stall Long|Stall Barrier|Stall Wait|L2 Hit|Mem Busy" $OUT/ncu_$tag.txt | head -60
done
echo "done at $((SECONDS-t0)) s"
tar czf $R/call4.tgz -C /tmp o; true
