#!/usr/bin/env bash
# Calls 1 and 2, each on a fresh machine: build, the GPU tests of every decode kernel, norm and sampler, whole
# samples with PDL and in plain stream order (-inorder: AOBENCH_DECODE_PDL=0), the kernel profiles, the norms under
# Nsight Compute. Call 1: the norms and attention as programmatic dependents, the norms' few rows a warp a row in
# blocks of one warp, layer 0's ln_1 in bf16 (NCU_KERNELS='split_(softmax|first|round)|add_layer_norm_warp|
# rms_step_forward' NCU_COUNT=10 CALL=call1); call 2: 576fc99's code, a block a row and a warp a chunk
# (NCU_KERNELS='add_layer_norm_warp|rms_step_forward' NCU_COUNT=4 CALL=call2).
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench aobench_gpt aobench_ao_gpt test_plugin_common test_plugin_gpt test_plugin_ao_gpt" \
  scripts/gpu_check.sh build > $OUT/build.log 2>&1; echo "build rc $? at $((SECONDS-t0)) s"; grep -E "error" $OUT/build.log | head
KERNEL_TESTS="DecodeScope|DecodeLinear|DecodeAttention|FusedOps|FusedNorms|Gpt.Cuda|AoGpt.Cuda|AnyOrderSampler.Cuda|FusedDraw" \
  scripts/gpu_check.sh kernels > $OUT/kernels_run.log 2>&1; echo "kernels rc $? at $((SECONDS-t0)) s"
grep -E "tests passed|tests failed|Failed|\*\*\*" $OUT/kernels_run.log | tail -14; grep -E -A10 "Failure$" $OUT/kernels_run.log | head -40
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GENSPEED_SPECS="gpt:1024:3 gpt-inorder:1024:3 ao_gpt:1024:3 ao_gpt-inorder:1024:3" GENSPEED_SWEEP=0 GENSPEED_PEERS=none \
  timeout 200 scripts/gpu_check.sh genspeed > $OUT/genspeed.log 2>&1; cat $OUT/genspeed/summary.md; echo "genspeed at $((SECONDS-t0)) s"
for m in gpt ao_gpt; do (( SECONDS - t0 < 520 )) && timeout 40 scripts/gpu_profile.sh ${m}_1024 $m PluginSample AOBENCH_BENCH_STEPS=1024 \
  AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_PROFILE_TOP=30 > /dev/null 2>&1; head -14 $OUT/profile_${m}_1024.txt | cut -c1-150; done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1); echo "ncu: ${NCU:-none}"
if [[ -n $NCU ]] && (( SECONDS - t0 < 500 )); then
  AOBENCH_BENCH_PLUGIN=gpt AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=8 AOBENCH_CUDA_GRAPHS=0 \
    timeout 90 $NCU --kernel-name regex:"$NCU_KERNELS" --launch-count $NCU_COUNT \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    build/aobench_bench --benchmark_filter=PluginSample --benchmark_repetitions=1 > $OUT/ncu.txt 2>&1
  grep -E "^  [a-z_].*\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Memory Throughput|Compute \(SM\)|Stall" $OUT/ncu.txt | head -80
fi
echo "done at $((SECONDS-t0)) s"
tar czf $R/$CALL.tgz -C /tmp o; true
