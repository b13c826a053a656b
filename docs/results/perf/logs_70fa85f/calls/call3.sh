#!/usr/bin/env bash
# Call 3 (2026-12-06, session 2): the decode Linears' tiles in whole GPT samples, PDL on. decode_linear_tile with a
# temporary override (AOBENCH_TMP_TILE_<N>_<K>=col_tiles,k_split; not committed); one profiled sample a variant
# (the kernels' added-to-the-timeline time), the current tiles three times among them; then plain samples.
set -o pipefail
O=/tmp/o3; rm -rf $O; mkdir -p $O; T0=$SECONDS
pack() { tar czf "$OUT/call3.tgz" -C /tmp o3; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; git rev-parse HEAD 2>/dev/null; } > $O/device.txt; cat $O/device.txt
( AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=OFF AOBENCH_TARGETS="aobench_bench aobench_gpt aobench_ao_gpt" \
  source scripts/gpu_build.sh ) > $O/build.log 2>&1; rb=$?
echo "build rc $rb at $((SECONDS-T0)) s"; (( rb == 0 )) || { tail -40 $O/build.log; pack; exit 1; }
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu
prof() {  # NAME PLUGIN [ENV=VALUE ...]
  local name=$1 p=$2; shift 2
  env "$@" AOBENCH_BENCH_PROFILE=1 AOBENCH_BENCH_PROFILE_TOP=12 AOBENCH_BENCH_PLUGIN=$p AOBENCH_BENCH_FLAVOUR=small \
    AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=1024 timeout 100 build/aobench_bench --benchmark_filter=PluginSample \
    --benchmark_repetitions=1 > $O/profile_$name.txt 2>&1
  echo "$name rc $?: $(grep '^profile' $O/profile_$name.txt | sed -e 's/.*GPU time in//') at $((SECONDS-T0)) s"
}
P=AOBENCH_TMP_TILE_768_3072 F=AOBENCH_TMP_TILE_3072_768 A=AOBENCH_TMP_TILE_2304_768 C=AOBENCH_TMP_TILE_768_768
prof base1 gpt
for v in 1,1 2,1 4,1 1,2 2,2 4,2 2,4; do prof mlpproj_${v/,/_} gpt $P=$v; done; pack
prof base2 gpt
for v in 1,1 4,1; do prof fc_${v/,/_} gpt $F=$v; prof attn_${v/,/_} gpt $A=$v; done
for v in 2,1 1,2; do prof proj_${v/,/_} gpt $C=$v; done; pack
prof base3 gpt
echo "sweep end at $((SECONDS-T0)) s"; pack
