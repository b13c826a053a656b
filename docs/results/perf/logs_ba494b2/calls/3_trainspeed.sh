#!/usr/bin/env bash
# One H200 (a fresh machine: it builds aobench and the gpt and ao_gpt plugins): nanoGPT + torch.compile
# against `aobench train` small GPT (micro-batch 16 and 32) and small AO-GPT (16), side by side in this call.
source scripts/gpu_check.sh; set +e
L=$OUT/c4; mkdir -p $L; OUT=$L
AOBENCH_TARGETS="aobench aobench_gpt aobench_ao_gpt" phase_build > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 1; }
set +e; ensure_libs
echo "build done at $SECONDS s"
SECONDS=0; TS_BUDGET=330
TS_DATA=runs/trainspeed/random_tokens.bin TS_LOGS=runs/trainspeed/logs
rm -rf runs/trainspeed; mkdir -p $TS_LOGS; random_tokens $TS_DATA 20000000
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader -i 0; git rev-parse HEAD; } | tee $L/trainspeed_device.txt
: > "$OUT/ts_peers.jsonl"
export CUDA_VISIBLE_DEVICES=0
peer_run --batch 16 --compile
speed_run gpt_b16 gpt small 16 100
speed_run ao_gpt_b16 ao_gpt small 16 100
peer_run --batch 32 --compile
speed_run gpt_b32 gpt small 32 60
echo "speed runs: ${SECONDS} s"
python3 scripts/trainspeed_table.py "$OUT/ts_peers.jsonl" runs/trainspeed 30 | tee $L/trainspeed.md
cp -r $TS_LOGS $L/ts_logs
for f in runs/trainspeed/*/metrics.jsonl; do cp --parents "$f" $L/; done
tar czf $OUT/../c4.tgz --exclude=build.log -C $OUT/.. c4 && rm -rf $L
