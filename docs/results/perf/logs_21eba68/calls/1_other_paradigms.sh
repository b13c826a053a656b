#!/usr/bin/env bash
# One H200: `aobench train` rate, MFU and peak memory of the small σ-GPT, SEDD and RADD beside the small GPT
# (B = 16, random tokens, bf16, 60 steps, rates of the logged steps 40–60), one table (trainspeed_table.py).
cd "$(dirname "${BASH_SOURCE[0]}")/../../../../.."
source scripts/gpu_check.sh; set +e
L=$OUT/c1; mkdir -p $L; OUT=$L
SECONDS=0
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=OFF AOBENCH_TARGETS="aobench aobench_gpt aobench_sigma_gpt aobench_sedd aobench_radd" \
  phase_build > $L/build.log 2>&1 || { tail -40 $L/build.log; exit 1; }
set +e; ensure_libs
echo "build: $SECONDS s"
SECONDS=0; TS_BUDGET=200
TS_DATA=runs/trainspeed/random_tokens.bin TS_LOGS=runs/trainspeed/logs
rm -rf runs/trainspeed; mkdir -p $TS_LOGS; random_tokens $TS_DATA 20000000
for m in gpt sigma_gpt sedd radd; do speed_run ${m}_b16 $m small 16 60; done
echo "speed runs: $SECONDS s"
: > $L/ts_peers.jsonl
python3 scripts/trainspeed_table.py $L/ts_peers.jsonl runs/trainspeed 30 | tee $L/trainspeed.md
cp -r $TS_LOGS $L/ts_logs
for r in runs/trainspeed/*_b16; do mkdir -p $L/runs/$(basename $r); cp $r/metrics.jsonl $r/config.resolved.json $L/runs/$(basename $r)/; done
tar czf $OUT/../c1.tgz -C $OUT/.. c1 && rm -rf $L/runs $L/ts_logs
