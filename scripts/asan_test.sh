#!/usr/bin/env bash
# Implements: AddressSanitizer + UndefinedBehaviorSanitizer run of the harness test suite.
# Configures $AOBENCH_ASAN_BUILD_DIR (default build-asan) with -DAOBENCH_SANITIZE=ON, builds the aobench
# binary, every plugin and aobench_tests (unit, conformance and integration tests), and runs aobench_tests
# in two gtest shards. The per-plugin test_plugin_* binaries are not built here: they recompile every
# plugin's sources a second time, which does not fit CI's 90 minutes on 2 cores next to the normal build.
# Extra arguments go to aobench_tests (e.g. --gtest_filter='HostileInput*').
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache: paths relative to the checkout and no cwd in the hash, so every clone shares one cache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
BUILD_DIR=${AOBENCH_ASAN_BUILD_DIR:-build-asan}
VENV=${AOBENCH_VENV:-$HOME/.cache/aobench/venv}
JOBS=${AOBENCH_JOBS:-$(nproc)}
PYTHON=python3
python3 -c "import torch" >/dev/null 2>&1 || PYTHON="$VENV/bin/python"
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)

start=$(date +%s)
# -O1 -g1: ASan's recommended optimisation, line tables for symbolised reports; about half the compile
# time of RelWithDebInfo's -O2 -g with instrumentation (LibTorch TUs dominate the build).
cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DPython3_EXECUTABLE="$PYTHON" -DAOBENCH_SANITIZE=ON \
      -DAOBENCH_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Asan -DCMAKE_CXX_FLAGS_ASAN="-O1 -g1" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS" --target aobench aobench_tests
built=$(date +%s)
echo "asan: built in $((built - start)) s"

# LibTorch is not instrumented. detect_leaks=0: the registry deliberately never unloads plugin libraries
# (registry.cpp) and LibTorch keeps process-lifetime allocations (operator registry, thread pools), which
# LeakSanitizer reports as leaks at exit; leaks are not what this run is for. Everything else (heap/stack
# overflow, use-after-free, double free, every UBSan check) stays on and aborts the test.
# The aobench processes the integration tests start inherit these settings.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export AOBENCH_PLUGIN_PATH=$(cd "$BUILD_DIR" && pwd)
if [[ -z "${AOBENCH_DATA_DIR:-}" && -d ../shared/data ]]; then
  export AOBENCH_DATA_DIR=$(cd ../shared/data && pwd)
fi

logs=$(mktemp -d)
pids=()
for i in 0 1; do
  GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i "$BUILD_DIR/aobench_tests" "$@" >"$logs/shard$i.log" 2>&1 &
  pids+=($!)
done
rc=0
for i in 0 1; do
  if ! wait "${pids[$i]}"; then rc=1; fi
  if [[ $rc -ne 0 ]] || grep -qE "Sanitizer|runtime error:" "$logs/shard$i.log"; then
    cat "$logs/shard$i.log"; rc=1
  else
    grep -E "^\[  (PASSED|SKIPPED|FAILED) " "$logs/shard$i.log" | sed "s/^/asan shard $i: /"
  fi
done
echo "asan: tests ran in $(( $(date +%s) - built )) s (total $(( $(date +%s) - start )) s)"
exit $rc
