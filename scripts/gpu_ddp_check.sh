#!/usr/bin/env bash
# Implements: the GPU check of data-parallel training (DESIGN.md §6; harness/train/distributed.h). On a machine
# with ≥ 2 GPUs: build aobench + the GPT plugin, make a byte-token corpus from the repository's own sources,
# train the debug GPT for 50 steps with 1 process and with torchrun N processes (AOBENCH_DDP_PROCS, default 2;
# AOBENCH_DEBUG_DDP=1 prints each rank's step-1 loss and final parameter checksum: equal checksums = ranks
# stayed in sync).
# Usage (repo root, GPU machine, .debs/ carried):  [AOBENCH_DDP_PROCS=4] bash scripts/gpu_ddp_check.sh
set -eo pipefail
export AOBENCH_TARGETS="aobench aobench_gpt"
source scripts/gpu_build.sh
set -eo pipefail
export AOBENCH_PLUGIN_PATH=$PWD/build
W=${AOBENCH_DDP_WORK:-/tmp/aobench_ddp}
STEPS=${AOBENCH_DDP_STEPS:-50}
NP=${AOBENCH_DDP_PROCS:-2}
rm -rf "$W" && mkdir -p "$W"

cat harness/*.cpp harness/*.h datasets/*.cpp plugins/*/*.cpp docs/*.md 2>/dev/null > "$W/corpus.txt" || true
build/aobench prepare --format lines --tokenizer bytes --input "$W/corpus.txt" --output "$W/train.bin" \
  --val-output "$W/val.bin" --val-fraction 0.05

cat > "$W/config.json" <<EOF
{"model": {"plugin": "gpt", "flavour": "debug"},
 "data": {"train": "$W/train.bin", "val": "$W/val.bin", "tokenizer": "bytes"},
 "train": {"device": "cuda", "batch_size": 16, "max_iters": $STEPS, "learning_rate": 1e-3, "min_lr": 1e-4,
           "warmup_iters": 5, "lr_decay_iters": $STEPS, "eval_interval": 25, "eval_iters": 4,
           "log_interval": 10, "checkpoint_interval": 25}}
EOF

if command -v torchrun >/dev/null; then TORCHRUN=(torchrun); else TORCHRUN=(python3 -m torch.distributed.run); fi
export AOBENCH_DEBUG_DDP=1
# Runs torchrun with $NP processes, then fails unless all $NP ranks printed the same final checksum.
ranks_in_sync() {
  "${TORCHRUN[@]}" --standalone --nproc_per_node=$NP --no-python build/aobench train "$@" 2>&1 | tee "$W/ranks.log"
  local sums
  sums=$(grep -oE "rank [0-9]+/$NP final parameters: fnv1a [0-9a-f]+" "$W/ranks.log" | awk '{print $NF}' | sort | uniq -c)
  [[ $(wc -l <<< "$sums") == 1 && $(awk '{print $1}' <<< "$sums") == "$NP" ]] \
    || { echo "FAIL: the $NP ranks' final checksums differ or are missing: ${sums:-none}"; exit 1; }
  echo "ranks in sync: $NP × fnv1a $(awk '{print $2}' <<< "$sums")"
}
echo "=== 1 process (cuda:0) ==="
build/aobench train --config "$W/config.json" --set train.out_dir="$W/run1"
echo "=== $NP processes (torchrun --standalone --nproc_per_node=$NP) ==="
ranks_in_sync --config "$W/config.json" --set train.out_dir="$W/run2"
echo "=== $NP processes, --resume for 10 more steps from step $STEPS ==="
ranks_in_sync --config "$W/config.json" \
  --set train.out_dir="$W/run2" --set train.max_iters=$((STEPS + 10)) --set train.lr_decay_iters=$((STEPS + 10)) \
  --resume --resume-with-changes
echo "=== $NP processes, uncaptured (AOBENCH_CUDA_GRAPHS=0): the captured run's losses within bf16 tolerance ==="
AOBENCH_CUDA_GRAPHS=0 ranks_in_sync --config "$W/config.json" --set train.out_dir="$W/run2_uncaptured"
python3 - "$W/run2" "$W/run2_uncaptured" <<'PY'
import json, sys
def losses(run):
    return {r["step"]: r["loss/train"] for r in map(json.loads, open(run + "/metrics.jsonl")) if "loss/train" in r}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
worst = max(abs(a[s] - b[s]) / abs(b[s]) for s in b if s in a)
print(f"captured vs uncaptured: {len(b)} logged steps, largest relative loss difference {worst:.2e}")
sys.exit(0 if worst < 1e-2 else 1)
PY
echo "=== WORLD_SIZE=2 on CPU must be refused ==="
if WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 build/aobench train --config "$W/config.json" \
     --set train.device=cpu --set train.out_dir="$W/run_cpu"; then
  echo "FAIL: CPU multi-process was not refused"; exit 1
fi
echo "gpu_ddp_check: done"
