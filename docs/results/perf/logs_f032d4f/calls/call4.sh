#!/usr/bin/env bash
# Call 4 (2026-12-06, session 3): f032d4f's code (docs after it) — the `trainspeed` phase as a user runs it
# (TS_BUDGET=150: the small GPT at B = 16 and 32 and the AO-GPT beside nanoGPT + compile, then exact evaluation).
set -o pipefail
T0=$SECONDS
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee $OUT/device.txt
( AOBENCH_TARGETS="aobench aobench_bench aobench_gpt aobench_ao_gpt" source scripts/gpu_build.sh ) > $OUT/build.log 2>&1; rb=$?
echo "build rc $rb at $((SECONDS-T0)) s"; (( rb == 0 )) || { tail -40 $OUT/build.log; exit 1; }
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu
TS_BUDGET=150 timeout 330 scripts/gpu_check.sh trainspeed > $OUT/trainspeed.log 2>&1; echo "trainspeed rc $? at $((SECONDS-T0)) s"
tail -30 $OUT/trainspeed.log
