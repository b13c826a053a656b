#!/usr/bin/env bash
# Runs one experiment file on the GPU machine within a deadline and leaves its results (without checkpoints or
# token files) in $OUT: the way a GPU result of docs/results/ is made. A run stopped at the deadline keeps its
# checkpoints in runs/, so the same command in the next call resumes it (finished runs are skipped).
# Usage (GPU machine, repo root, .debs/ and data/ carried; data/ holds what ../shared/data would):
#   DEADLINE=540 scripts/gpu_run.sh configs/experiments/plateau.json [aobench run options...]
# DEADLINE counts seconds from the script's start; END=<epoch seconds> (date +%s) gives the end instead.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
exp=${1:?usage: scripts/gpu_run.sh EXPERIMENT.json [aobench run options...]}
shift
OUT=${OUT:-/tmp/gpu_run_out}
mkdir -p "$OUT"
# The experiment files name the shared data folder beside the checkout.
if [[ ! -e ../shared/data && -d data ]]; then mkdir -p ../shared && ln -s "$PWD/data" ../shared/data; fi
# {data} of the experiment files (harness/experiment/paths.h), whatever checkout the binary was built from.
export AOBENCH_DATA_DIR=${AOBENCH_DATA_DIR:-$(cd ../shared/data 2>/dev/null && pwd || true)}
if [[ ! -x build/aobench ]] || [[ -n "$(find . -path ./build -prune -o -newer build/aobench \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) -print -quit)" ]]; then
  export AOBENCH_CMAKE_ARGS="${AOBENCH_CMAKE_ARGS:--DAOBENCH_BUILD_TESTS=OFF}"
  source scripts/gpu_build.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  echo "gpu_run: built in $((SECONDS - start)) s"
fi
export LD_LIBRARY_PATH="${AOBENCH_DEB_PREFIX:-/tmp/aobench-deps}/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/device.txt"
git rev-parse --short HEAD >> "$OUT/device.txt" 2>/dev/null || true
if [[ -n "${END:-}" ]]; then left=$(( END - $(date +%s) )); else left=$(( ${DEADLINE:-540} - (SECONDS - start) )); fi
(( left > 0 )) || { echo "gpu_run: no time left before the deadline" >&2; exit 1; }
echo "gpu_run: aobench run $exp $* (SIGINT after ${left} s)"
rc=0
log=$OUT/${LOG_NAME:-run}.log
timeout -s INT -k 30 "$left" build/aobench run "$exp" "$@" > "$log" 2>&1 || rc=$?
tail -25 "$log"
# The experiment's folder, as aobench printed it: the lanes line, else the folder of the first run a step named
# (a tier or a "base" file may move it, so the file's own out_dir is not the one to trust).
out_dir=$(grep -o 'logs in [^ ]*/logs' "$log" | head -1 | sed 's|logs in ||; s|/logs$||' || true)
[[ -n $out_dir ]] || out_dir=$(grep -o -- '--run [^ ]*' "$log" | head -1 | sed 's|--run ||; s|/[^/]*/*$||' || true)
[[ -n $out_dir ]] || out_dir=$(grep -o 'aobench report [^ ]*' "$log" | head -1 | sed 's|aobench report ||' || true)
[[ -n $out_dir && -d $out_dir ]] || { echo "gpu_run: no experiment folder found in $log; nothing packed" >&2; exit 0; }
tar czf "$OUT/$(basename "$out_dir").tgz" --exclude=checkpoints --exclude='*.bin' --exclude='*.safetensors' "$out_dir"
echo "gpu_run: exit $rc after $((SECONDS - start)) s; $out_dir packed into \$OUT"
exit 0
