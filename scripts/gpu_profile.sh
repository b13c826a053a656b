#!/usr/bin/env bash
# Kernel-time profile of aobench_bench cases with Nsight Systems, on the GPU machine after a build:
#   scripts/gpu_profile.sh NAME PLUGIN FILTER [ENV=VALUE...]   → $OUT/profile_NAME.txt (top kernels by GPU time)
# e.g. scripts/gpu_profile.sh gpt_decode gpt PluginSample AOBENCH_BENCH_STEPS=1024 AOBENCH_BENCH_BATCH=32
# Kernels inside CUDA graphs are traced one by one (--cuda-graph-trace=node).
set -eo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
name=$1 plugin=$2 filter=$3; shift 3
NSYS=${NSYS:-$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -1 || true)}
[[ -n "$NSYS" ]] || { echo "gpu_profile: nsys not found" >&2; exit 2; }
env AOBENCH_BENCH_PLUGIN="$plugin" AOBENCH_BENCH_FLAVOUR=${FLAVOUR:-small} "$@" \
  "$NSYS" profile --force-overwrite true --cuda-graph-trace=node --trace=cuda,nvtx -o "/tmp/profile_$name" \
  build/aobench_bench --benchmark_filter="$filter" --benchmark_repetitions=1 > "/tmp/profile_$name.log" 2>&1
{ grep -E "^BM_" "/tmp/profile_$name.log" || tail -5 "/tmp/profile_$name.log"
  "$NSYS" stats --force-export true --report cuda_gpu_kern_sum --format csv "/tmp/profile_$name.nsys-rep" 2>/dev/null \
    | python3 -c "
import csv, sys
rows = [r for r in csv.reader(sys.stdin) if len(r) > 8]
head, rows = rows[0], rows[1:]
t = head.index('Total Time (ns)'); n = head.index('Instances'); k = head.index('Name')
total = sum(float(r[t]) for r in rows)
print(f'total kernel time {total/1e6:.1f} ms in {sum(int(r[n]) for r in rows)} launches')
for r in rows[:25]:
    print(f'{float(r[t])/total*100:5.1f}%  {float(r[t])/1e6:9.2f} ms  {int(r[n]):7d}x  {r[k][:150]}')
"
} | tee "$OUT/profile_$name.txt"
