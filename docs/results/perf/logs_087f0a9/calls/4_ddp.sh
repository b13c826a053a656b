#!/usr/bin/env bash
# Device call 4 (2 GPUs): the data-parallel checks after the finish_buckets refactor, and the AO-GPT's
# captured data-parallel step.
cd "$(dirname "$0")/.."
source scripts/gpu_check.sh
set +e
L=$OUT/logs; mkdir -p $L
AOBENCH_TARGETS="aobench aobench_gpt aobench_ao_gpt" phase_build > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 1; }
ensure_libs
bash scripts/gpu_ddp_check.sh > $L/ddp_check.log 2>&1; grep -E "fnv1a|largest|captur|rror" $L/ddp_check.log | tail -12
DDP_GPUS=2 DDP_PLUGIN=ao_gpt phase_ddp > $L/ddp_phase.log 2>&1; cat $OUT/ddp_ao_gpt_2gpu.md | head -8
mv $OUT/ddp_ao_gpt_2gpu* $L/ 2>/dev/null
tar czf $OUT/ddp_logs.tgz -C $OUT logs
