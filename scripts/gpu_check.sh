#!/usr/bin/env bash
# GPU checks, run on the GPU machine from the repository root through the device tool:
#   scripts/gpu_check.sh PHASE...    phases: build kernels data speed paradigms speed2 bench resume ensemble
#                                    ensemble_sigma trainspeed aoratio trainbench ddp genspeed sedd_radd
#                                    sedd_radd_rows plateau tiers lanes import
# Logs and results go to $OUT (device tool) or ./gpu_out. Expects the carried folders .debs/ (see
# scripts/fetch_gpu_debs.sh) and data/shared/ (a copy of the needed ../shared/data files, same layout).
set -eo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."  # also when sourced by a call script elsewhere
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
# The experiment files name ../shared/data; point it at the carried copy.
if [[ ! -e ../shared/data && -d data/shared ]]; then mkdir -p ../shared && ln -s "$PWD/data/shared" ../shared/data; fi
export AOBENCH_DATA_DIR=$PWD/../shared/data AOBENCH_GPT2_DIR=$PWD/../shared/data/gpt2
A=build/aobench

phase_build() {  # AOBENCH_CMAKE_ARGS / AOBENCH_TARGETS narrow it (default: no tests, every other target)
  export AOBENCH_CMAKE_ARGS="${AOBENCH_CMAKE_ARGS:--DAOBENCH_BUILD_TESTS=OFF}"
  source scripts/gpu_build.sh
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$OUT/device.txt"
  $A list | tee -a "$OUT/device.txt"
}
ensure_libs() { export LD_LIBRARY_PATH="${AOBENCH_DEB_PREFIX:-/tmp/aobench-deps}/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"; }

# Prepares every dataset of the paradigms experiment, or only $DATA_ONLY (a prepare entry's name); an entry
# whose output exists is skipped, as `aobench run` does.
phase_data() {
  ensure_libs
  python3 - ${DATA_EXPERIMENT:-} <<'PY' > /tmp/prepare_cmds.sh
import json, os, shlex, sys
e = json.load(open(sys.argv[1] if len(sys.argv) > 1 else "configs/experiments/paradigms_tiny.json"))
def path(x):  # the placeholders of harness/experiment/paths.h, for the file's own out_dir
    return os.path.normpath(x.replace("{data}", "../shared/data").replace("{out_dir}", e["out_dir"]))
for p in e["prepare"]:
    if os.environ.get("DATA_ONLY") and p["name"] != os.environ["DATA_ONLY"]: continue
    args = ["build/aobench", "prepare"]
    for k, v in p.items():
        if k == "name": continue
        for x in (v if isinstance(v, list) else [v]): args += ["--" + k.replace("_", "-"), path(str(x))]
        if k == "output": p[k] = path(v)
    print("[[ -e " + shlex.quote(p["output"]) + " ]] || { mkdir -p " + shlex.quote(p["output"].rsplit("/", 1)[0]) +
          " && " + " ".join(map(shlex.quote, args)) + "; }")
PY
  bash -e /tmp/prepare_cmds.sh 2>&1 | tee "$OUT/prepare.log"
}

phase_speed() {  # training tok/s + MFU of the small models, eval tok/s of the small GPT, one SEDD step
  ensure_libs
  local d=runs/speed; rm -rf $d; mkdir -p $d
  for m in gpt ao_gpt sigma_gpt sedd radd; do
    $A train --set model.plugin=$m --set model.flavour=small \
      --set data.train=runs/paradigms_tiny/data/wiki_train.bin --set data.val= --set data.tokenizer=gpt2 \
      --set train.out_dir=$d/$m --set train.batch_size=16 --set train.max_iters=60 --set train.warmup_iters=10 \
      --set train.lr_decay_iters=60 --set train.log_interval=10 --set train.checkpoint_interval=1000 \
      --set train.order.kind=$([[ $m == gpt ]] && echo l2r || echo mixture) 2>&1 | grep -E "^step|error" | tee "$OUT/speed_train_$m.log"
  done
  $A eval --run $d/gpt --data wikitext103=runs/paradigms_tiny/data/wikitext103.bin --set eval.batch_size=32 \
    --throughput 2>&1 | tee "$OUT/speed_eval_gpt.log"
  for m in sedd gpt ao_gpt; do
    AOBENCH_BENCH_PLUGIN=$m AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 build/aobench_bench \
      --benchmark_filter=Plugin --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>&1 \
      | tee "$OUT/bench_step_$m.log"
  done
}

phase_paradigms() {  # train + evaluate the five tiny models (resumable: re-run to continue)
  ensure_libs
  $A run configs/experiments/paradigms_tiny.json "$@" 2>&1 | tee -a "$OUT/paradigms.log" | grep -vE "^step .*[1-9]0/|^step .*[1-9]50/" || true
  tar czf "$OUT/paradigms_runs.tgz" --exclude=checkpoints --exclude=data runs/paradigms_tiny
}

phase_speed2() {  # small gpt / ao_gpt training ($SPEED_ITERS steps, default 40) and gpt eval throughput, same call
  ensure_libs
  local d=runs/speed2 n=${SPEED_ITERS:-40}; rm -rf $d; mkdir -p $d
  for m in gpt ao_gpt; do
    $A train --set model.plugin=$m --set model.flavour=small \
      --set data.train=runs/ensemble_tiny/data/wiki_train.bin --set data.val= --set data.tokenizer=gpt2 \
      --set train.out_dir=$d/$m --set train.batch_size=16 --set train.max_iters=$n --set train.warmup_iters=10 \
      --set train.lr_decay_iters=$n --set train.log_interval=10 --set train.checkpoint_interval=1000 \
      --set train.order.kind=$([[ $m == gpt ]] && echo l2r || echo mixture) 2>&1 | grep -E "^step|error" | tee "$OUT/speed2_train_$m.log"
  done
  $A eval --run $d/gpt --data wikitext2=runs/ensemble_tiny/data/wikitext2.bin --set eval.batch_size=32 \
    --throughput 2>&1 | tee "$OUT/speed2_eval_gpt.log"
}

phase_kernels() {  # the CUDA kernels against their references (each test binary that was built)
  ensure_libs
  : > "$OUT/kernels.log"
  local pair bin
  for pair in "test_plugin_common:*" "test_plugin_gpt:*Cuda*" "test_plugin_ao_gpt:*"; do
    bin=build/${pair%%:*}
    [[ -x $bin ]] || continue
    "$bin" --gtest_filter="${pair#*:}" 2>&1 | tee -a "$OUT/kernels.log" || true  # failures are in the log
  done
}

phase_bench() {  # ($BENCH_PLUGINS) one training step (B = 16) and one forward (B = 32) of the small models, with kernel profiles
  ensure_libs
  build/aobench_bench --benchmark_filter=Bf16MatmulPeak 2>&1 | grep -E "^BM_|TFLOP" | tee "$OUT/bench_peak.log"
  for m in ${BENCH_PLUGINS:-gpt ao_gpt sedd}; do
    AOBENCH_BENCH_PLUGIN=$m AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_PROFILE=1 build/aobench_bench \
      --benchmark_filter=Plugin 2>&1 | grep -v "^\*\*\*WARNING" | tee "$OUT/bench_$m.log"
  done
}

phase_resume() {  # kill -9 mid-training on the GPU, --resume; losses vs an uninterrupted run and a repeat of it
  ensure_libs
  local d=runs/gpu_resume; rm -rf $d; mkdir -p $d
  local args=(--set model.plugin=gpt --set model.flavour=tiny --set data.train=runs/ensemble_tiny/data/wiki_train.bin
    --set data.val= --set data.tokenizer=gpt2 --set train.batch_size=8 --set train.max_iters=120
    --set train.warmup_iters=10 --set train.lr_decay_iters=120 --set train.log_interval=1
    --set train.checkpoint_interval=40 --set train.eval_interval=0)
  $A train "${args[@]}" --set train.out_dir=$d/straight > $d/straight.log 2>&1
  $A train "${args[@]}" --set train.out_dir=$d/repeat > $d/repeat.log 2>&1
  $A train "${args[@]}" --set train.out_dir=$d/killed > $d/killed.log 2>&1 &
  local pid=$!
  until [[ -d $d/killed/checkpoints/step_80 ]] || ! kill -0 $pid 2>/dev/null; do sleep 0.05; done
  kill -9 $pid; wait $pid || true
  ls $d/killed/checkpoints | tee "$OUT/resume.log"
  $A train "${args[@]}" --set train.out_dir=$d/killed --resume 2>&1 | grep -E "resumed|done|error" | tee -a "$OUT/resume.log"
  python3 - $d <<'PY' | tee -a "$OUT/resume.log"
import json, sys
def losses(run):
    out = {}
    for line in open(f"{sys.argv[1]}/{run}/metrics.jsonl"):
        j = json.loads(line)
        if "loss/train" in j: out[j["step"]] = j["loss/train"]
    return out
a, r, k = losses("straight"), losses("repeat"), losses("killed")
steps = sorted(a)
assert steps == sorted(k) == sorted(r) and len(steps) == 120, (len(a), len(r), len(k))
def md(x, y, s): return max(abs(x[i] - y[i]) for i in s)
first = next(i for i in steps if k[i] != a[i]) if any(k[i] != a[i] for i in steps) else None
print(f"steps 1-120 logged by all three runs; first step where killed+resumed differs from straight: {first}")
print(f"max |loss diff| straight vs repeat (no kill): steps 1-80 {md(a, r, steps[:80]):.3g}, 81-120 {md(a, r, steps[80:]):.3g}")
print(f"max |loss diff| straight vs killed+resumed:   steps 1-80 {md(a, k, steps[:80]):.3g}, 81-120 {md(a, k, steps[80:]):.3g}")
print(f"final loss: straight {a[120]:.6f} repeat {r[120]:.6f} resumed {k[120]:.6f}")
PY
}

phase_ensemble() {  # ao_gpt tiny + timed M ∈ {1,2,4,8} ensemble on WikiText-2 ($ENSEMBLE_SET: extra --set args)
  ensure_libs
  SECONDS=0
  # shellcheck disable=SC2086
  $A run configs/experiments/ensemble_tiny.json ${ENSEMBLE_SET:-} 2>&1 | grep -vE "^  [a-z_]+\." \
    | grep -vE "^step [0-9]+/" | tee "$OUT/ensemble.log"
  echo "ensemble phase: ${SECONDS} s" | tee -a "$OUT/ensemble.log"
  tar czf "$OUT/ensemble_runs.tgz" --exclude=checkpoints --exclude=data runs/ensemble_tiny
}

phase_ensemble_sigma() {  # σ-GPT tiny with ensemble_tiny.json's data and optimiser (uniform random orders), same timed ensemble
  ensure_libs
  local d=runs/ensemble_sigma; mkdir -p $d
  python3 - <<'PY' > $d/config.json
import json
e = json.load(open("configs/experiments/ensemble_tiny.json"))
c = e["common"]
for k in ("train", "val"):  # the placeholders of harness/experiment/paths.h
    c["data"][k] = c["data"][k].replace("{out_dir}/../", "runs/").replace("{out_dir}", e["out_dir"])
c["model"] = {"plugin": "sigma_gpt", "flavour": "tiny"}
c["train"]["order"]["kind"] = "random"
c["train"]["out_dir"] = "runs/ensemble_sigma/sigma_gpt"
print(json.dumps(c, indent=1))
PY
  SECONDS=0
  $A train --config $d/config.json 2>&1 | grep -E "val loss|done|error" | tee "$OUT/ensemble_sigma.log"
  for mode in '--set eval.mode=l2r' '--set eval.mode=ensemble --set eval.ensemble=[1,2,4,8] --set eval.batch_size=64'; do
    # shellcheck disable=SC2086
    $A eval --run $d/sigma_gpt --data wikitext2=runs/ensemble_tiny/data/wikitext2.bin --set eval.first_token=skip \
      $mode 2>&1 | tee -a "$OUT/ensemble_sigma.log"
  done
  echo "ensemble_sigma phase: ${SECONDS} s" | tee -a "$OUT/ensemble_sigma.log"
  cp $d/sigma_gpt/results.json $d/sigma_gpt/metrics.jsonl "$OUT/" 2>/dev/null || true
}

# --- training speed against nanoGPT, and data-parallel scaling ------------------------------------
# Random uint32 tokens (llm.c header, version 2) for speed runs: the rate does not depend on the ids.
random_tokens() {  # FILE COUNT
  [[ -s $1 ]] && return 0
  mkdir -p "$(dirname "$1")"
  python3 - "$1" "$2" <<'PY'
import struct, sys, torch
path, n = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
buf = bytearray(4 * n)
torch.frombuffer(buf, dtype=torch.int32).copy_(torch.randint(0, 50257, (n,), dtype=torch.int32))
with open(path, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 2, n, 50257, 0, -1, *([0] * 250)))
    f.write(buf)
PY
}

# One `aobench train` speed run: NAME PLUGIN FLAVOUR BATCH STEPS [extra --set ...]; log in $TS_LOGS/NAME.log,
# run folder $TS_RUNS/NAME (default runs/trainspeed/NAME).
# Skipped once the phase has used $TS_BUDGET seconds (default 400), so the phase fits one device call.
speed_run() {
  local name=$1 m=$2 fl=$3 b=$4 n=$5; shift 5
  if (( SECONDS > ${TS_BUDGET:-400} )); then echo "skipped $name: phase budget spent" | tee "$TS_LOGS/$name.log"; return; fi
  timeout 120 $A train --set model.plugin=$m --set model.flavour=$fl --set data.train=$TS_DATA --set data.val= \
    --set data.tokenizer=gpt2 --set train.out_dir=${TS_RUNS:-runs/trainspeed}/$name --set train.batch_size=$b \
    --set train.max_iters=$n --set train.warmup_iters=10 --set train.lr_decay_iters=$n --set train.log_interval=10 \
    --set train.eval_interval=0 --set train.checkpoint_interval=0 --set train.keep_checkpoints=1 \
    --set train.order.kind=$([[ $m == gpt ]] && echo l2r || echo mixture) "$@" > "$TS_LOGS/$name.log" 2>&1 \
    || echo "speed run $name failed (rc $?)" | tee -a "$TS_LOGS/$name.log"
  grep -E "^step|rror" "$TS_LOGS/$name.log" | tail -2 || true
  rm -rf "${TS_RUNS:-runs/trainspeed}/$name/checkpoints"
}
peer_run() {  # nanogpt_train.py arguments; one JSON line appended to $OUT/ts_peers.jsonl
  if (( SECONDS > ${TS_BUDGET:-400} )); then echo "skipped nanoGPT $*: phase budget spent"; return; fi
  timeout 180 python3 bench/peers/nanogpt_train.py "$@" --steps 40 --warmup 10 2>>"$TS_LOGS/peers.err" \
    | tee -a "$OUT/ts_peers.jsonl" || echo "nanoGPT $* failed" | tee -a "$TS_LOGS/peers.err"
}

phase_trainspeed() {  # nanoGPT (compile, eager) vs `aobench train` small models side by side; table in $OUT/trainspeed.md
  ensure_libs
  SECONDS=0
  TS_DATA=runs/trainspeed/random_tokens.bin TS_LOGS=runs/trainspeed/logs
  rm -rf runs/trainspeed; mkdir -p $TS_LOGS; random_tokens $TS_DATA 20000000
  { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; git rev-parse HEAD; } \
    2>/dev/null | tee "$OUT/trainspeed_device.txt"
  : > "$OUT/ts_peers.jsonl"
  # Most important comparisons first (the budget skips the tail).
  peer_run --batch 16 --compile
  speed_run gpt_b16 gpt small 16 60
  peer_run --batch 32 --compile
  speed_run gpt_b32 gpt small 32 50
  speed_run ao_gpt_b16 ao_gpt small 16 60
  AOBENCH_CUDA_GRAPHS=0 speed_run gpt_b16_uncaptured gpt small 16 60
  speed_run gpt_medium_b16 gpt medium 16 30
  speed_run ao_gpt_medium_b16 ao_gpt medium 16 30
  AOBENCH_FUSED_CE=0 AOBENCH_FUSED_LN=0 AOBENCH_FUSED_ADAMW=0 speed_run gpt_b16_reference gpt small 16 60
  for m in sigma_gpt sedd radd; do speed_run ${m}_b16 $m small 16 60; done
  peer_run --batch 16
  python3 scripts/trainspeed_table.py "$OUT/ts_peers.jsonl" runs/trainspeed 30 | tee "$OUT/trainspeed.md" || true
  # The training kernels and the optimizer against their references on this GPU (each binary that was built).
  : > "$OUT/ts_tests.log"
  [[ -x build/test_plugin_common ]] && build/test_plugin_common --gtest_filter='FusedOps.*' 2>&1 | tail -30 | tee -a "$OUT/ts_tests.log"
  [[ -x build/test_plugin_gpt ]] && build/test_plugin_gpt --gtest_filter='Gpt.Cuda*' 2>&1 | tail -30 | tee -a "$OUT/ts_tests.log"
  [[ -x build/aobench_tests ]] && build/aobench_tests --gtest_filter='AdamW.*' 2>&1 | tail -8 | tee -a "$OUT/ts_tests.log"
  echo "trainspeed phase: ${SECONDS} s"
  # Few files come back from a device call: every log and metrics.jsonl in one archive.
  tar czf "$OUT/trainspeed_logs.tgz" --exclude=random_tokens.bin --exclude=checkpoints runs/trainspeed
}

phase_aoratio() {  # AO_RATIO_PAIRS (3) alternating `aobench train` pairs, small GPT and AO-GPT, B = 16; $OUT/ao_ratio.txt
  ensure_libs
  SECONDS=0
  local i n=${AO_RATIO_PAIRS:-3} TS_BUDGET=100000 TS_RUNS=runs/aoratio
  local TS_DATA=runs/aoratio/random_tokens.bin TS_LOGS=runs/aoratio/logs
  rm -rf runs/aoratio; mkdir -p $TS_LOGS; random_tokens $TS_DATA 20000000
  for ((i = 1; i <= n; i++)); do
    speed_run gpt_b16_$i gpt small 16 100
    speed_run ao_gpt_b16_$i ao_gpt small 16 100
  done
  echo "aoratio phase: ${SECONDS} s"
  tar czf "$OUT/aoratio_logs.tgz" --exclude=random_tokens.bin --exclude=checkpoints runs/aoratio
  # A verdict short of the target (exit 1) or a failed run (exit 2) is reported; the phases after this one run.
  python3 scripts/ao_ratio.py runs/aoratio $n | tee "$OUT/ao_ratio.txt" || echo "aoratio phase: no verdict of 'met' (see above)"
}

phase_trainbench() {  # aobench_bench full step per plugin (small, B = 16) merged into $OUT/bench_results.json
  ensure_libs
  for m in ${BENCH_PLUGINS:-gpt ao_gpt sigma_gpt sedd radd}; do
    AOBENCH_BENCH_PLUGIN=$m AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=16 \
      AOBENCH_BENCH_RESULTS="$OUT/bench_results.json" build/aobench_bench --benchmark_filter=PluginTrainFullStep \
      --benchmark_repetitions=1 2>&1 | grep -E "^BM_|rror" | tee -a "$OUT/trainbench.log"
  done
}

phase_ddp() {  # N GPUs (DDP_GPUS, default all) against 1: tok/s scaling and the loss curve against the seed spread; $OUT/ddp_<plugin>_<N>gpu.md
  ensure_libs
  local g n m=${DDP_PLUGIN:-gpt} d=runs/ddp steps=${DDP_STEPS:-100} csteps=${DDP_CURVE_STEPS:-200}
  g=$(nvidia-smi -L | wc -l); n=${DDP_GPUS:-$g}
  (( n >= 2 )) || { echo "ddp phase: needs ≥ 2 GPUs, found $n"; return 1; }
  local data=$d/wiki_train.bin val=$d/wiki_val.bin p=$OUT/ddp_${m}_${n}gpu  # outputs: $p.md, ${p}_*.log
  rm -rf $d/${m}_*; mkdir -p $d
  # The tokens: carried in data/ddp/ (prepared with these commands), else prepared here from ../shared/data.
  local f; for f in wiki_train wiki_val; do
    [[ -s $d/$f.bin || ! -s data/ddp/$f.bin ]] || cp data/ddp/$f.bin* $d/
  done
  [[ -s $data ]] || $A prepare --format text --input ../shared/data/train/wiki_train_00.txt.xz --tokenizer gpt2 \
    --vocab-dir ../shared/data/gpt2 --packing none --window 1024 --output $data 2>&1 | tail -1
  [[ -s $val ]] || $A prepare --format text --input ../shared/data/train/wiki_val.txt.xz --tokenizer gpt2 \
    --vocab-dir ../shared/data/gpt2 --packing none --window 1024 --output $val 2>&1 | tail -1
  if command -v torchrun >/dev/null; then TR=(torchrun); else TR=(python3 -m torch.distributed.run); fi
  TR+=(--standalone --nproc_per_node=$n --no-python $A train)
  local common=(--set model.plugin=$m --set model.flavour=small --set data.train=$data --set data.val=
    --set data.tokenizer=gpt2 --set train.warmup_iters=20 --set train.eval_interval=0 --set train.checkpoint_interval=0
    --set train.batch_size=16)
  [[ $m == gpt ]] || common+=(--set train.order.kind=mixture)
  # Rates, logged every 10 steps: linear scaling's reference is N × 1 GPU at micro-batch 16 (its fastest
  # setting: the step replayed from a CUDA graph); N GPUs run micro-batch 16 each. DDP_UNCAPTURED=1 adds the
  # N-GPU run with AOBENCH_CUDA_GRAPHS=0.
  local rate=("${common[@]}" --set train.max_iters=$steps --set train.lr_decay_iters=$steps --set train.log_interval=10)
  timeout 300 $A train "${rate[@]}" --set train.out_dir=$d/${m}_rate_1gpu 2>&1 | grep -E "^step|rror" > "${p}_rate_1gpu.log" || true
  timeout 300 "${TR[@]}" "${rate[@]}" --set train.out_dir=$d/${m}_rate_${n}gpu 2>&1 \
    | grep -E "^step|rror|data parallel|CUDA graph" > "${p}_rate.log" || true
  [[ ${DDP_UNCAPTURED:-0} != 1 ]] || AOBENCH_CUDA_GRAPHS=0 timeout 300 "${TR[@]}" "${rate[@]}" \
    --set train.out_dir=$d/${m}_rate_${n}gpu_uncaptured 2>&1 | grep -E "^step|rror" > "${p}_rate_uncaptured.log" || true
  # Loss curves, every step logged: N GPUs (seed DDP_CURVE_SEED, not one of the 1-GPU seeds: a shared seed
  # shares the initialisation and data order) and, for each seed of DDP_SEEDS, 1 GPU accumulating N
  # micro-batches of 16 (the same global batch), the 1-GPU runs one per GPU at a time. Then every run is
  # scored on the whole validation file (the same windows for all). A run that fails is named, with its log.
  local curve=("${common[@]}" --set train.max_iters=$csteps --set train.lr_decay_iters=$csteps --set train.log_interval=1)
  timeout 400 "${TR[@]}" "${curve[@]}" --set train.seed=${DDP_CURVE_SEED:-1} --set train.out_dir=$d/${m}_curve_${n}gpu \
    > "${p}_curve.log" 2>&1 || echo "ddp phase: the ${n}-GPU curve run failed (${p}_curve.log)"
  local seeds=(${DDP_SEEDS:-1337 7 42 123 2024}) i=0 s r pids=() names=()
  wait_all() {  # waits for each background job, naming the ones that failed
    local k; for k in "${!pids[@]}"; do wait "${pids[$k]}" || echo "ddp phase: ${names[$k]} failed"; done
    pids=(); names=()
  }
  for s in "${seeds[@]}"; do
    CUDA_VISIBLE_DEVICES=$((i % g)) timeout 400 $A train "${curve[@]}" --set train.gradient_accumulation_steps=$n \
      --set train.seed=$s --set train.out_dir=$d/${m}_curve_1gpu_seed$s > "${p}_curve_1gpu_seed$s.log" 2>&1 &
    pids+=($!); names+=("1-GPU curve seed $s (${p}_curve_1gpu_seed$s.log)")
    i=$((i + 1)); (( i % g )) || wait_all
  done
  wait_all
  i=0
  for r in $d/${m}_curve_${n}gpu $d/${m}_curve_1gpu_seed*; do
    CUDA_VISIBLE_DEVICES=$((i % g)) timeout 300 $A eval --run $r --data val=$val > "${p}_eval_${r##*/}.log" 2>&1 &
    pids+=($!); names+=("eval of $r (${p}_eval_${r##*/}.log)")
    i=$((i + 1)); (( i % g )) || wait_all
  done
  wait_all
  python3 scripts/ddp_table.py $d $m $n "${seeds[@]}" | tee "$p.md"
}

phase_genspeed() {  # generation speed, ours and the peers' (bench/peers) in one call; $OUT/genspeed
  ensure_libs
  local d=$OUT/genspeed; mkdir -p "$d"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$d/device.txt"
  # The GPU tests of the fused draw and the captured decode steps, where the test binaries were built.
  local pair
  for pair in "test_plugin_common:FusedDraw.*:Sampling.*:DecodeAttention.*" "test_plugin_gpt:Gpt.CudaGraph*" "test_plugin_ao_gpt:AoGpt.CudaGraph*"; do
    [[ -x build/${pair%%:*} ]] || continue
    build/${pair%%:*} --gtest_filter="${pair#*:}" 2>&1 | tail -n 25 | tee -a "$d/tests.log" || true
  done
  # Ours: one whole sample() of 32 × 1024 (small shapes, bf16, float64 draws, top-p 0.95, T 0.9).
  local spec
  for spec in ${GENSPEED_SPECS:-gpt:1024:3 gpt-onerow:1024:3 ao_gpt:1024:3 ao_gpt-onerow:1024:3 ao_gpt:64:2 sedd:64:1 \
              sedd:1024:1 gpt-nographs:1024:1 gpt-nofused:1024:1 ao_gpt-nographs:1024:1}; do
    IFS=: read -r name steps reps <<< "$spec"
    local env=() plugin=${name%%-*}
    [[ $name == *-nographs ]] && env=(AOBENCH_CUDA_GRAPHS=0)
    [[ $name == *-nofused ]] && env=(AOBENCH_FUSED_SAMPLING=0)
    [[ $name == *-onerow ]] && env=(AOBENCH_DRAW_SPLIT=0)
    [[ $name == *-nodecode ]] && env=(AOBENCH_FUSED_DECODE=0)
    local key=$name; [[ $plugin != gpt ]] && key=${name}_$steps
    env "${env[@]}" AOBENCH_BENCH_PLUGIN=$plugin AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 \
      AOBENCH_BENCH_STEPS=$steps timeout 200 build/aobench_bench --benchmark_filter=PluginSample \
      --benchmark_repetitions="$reps" --benchmark_out="$d/bench_sample_$key.json" \
      --benchmark_out_format=json \
      2>&1 | grep -E "^BM_|rror" | tee "$d/bench_sample_$key.log" || true
  done
  # The `aobench speed` sweep (steps 64 … 1024) where this build has the command.
  if [[ ${GENSPEED_SWEEP:-1} == 1 ]] && $A speed --help >/dev/null 2>&1; then
    for spec in gpt:[1024]:3 ao_gpt:[64,128,256,512,1024]:2 sedd:[64,128]:1; do
      IFS=: read -r plugin steps reps <<< "$spec"
      timeout 120 $A speed --set model.plugin=$plugin --set model.flavour=small --set "speed.steps=$steps" \
        --set speed.batch_size=32 --set speed.length=1024 --set speed.repeats=$reps --set speed.warmup=1 \
        --out "$d/speed_$plugin.json" 2>&1 | tail -n 20 | tee "$d/speed_$plugin.log" || true
    done
  fi
  # The peers, same GPU, same call (comparison only; their compilation is excluded from their times).
  [[ ${GENSPEED_PEERS:-hf sedd} == *hf* ]] && timeout 240 python3 bench/peers/hf_generate.py ${GENSPEED_HF_ARGS:-} --out "$d/peer_hf_generate.json" 2>&1 | tail -n 40 \
    | tee "$d/peer_hf_generate.log" || true
  [[ ${GENSPEED_PEERS:-hf sedd} == *sedd* ]] && timeout 150 python3 bench/peers/sedd_step.py --out "$d/peer_sedd_step.json" 2>&1 | tail -n 20 \
    | tee "$d/peer_sedd_step.log" || true
  python3 bench/peers/genspeed_summary.py "$d" | tee "$d/summary.md"
}

phase_sedd_radd() {  # SEDD–RADD ablation: five tiny encoders on paradigms_tiny's tokens, wiki_val ELBO
  ensure_libs
  SECONDS=0
  $A run configs/experiments/sedd_radd_ablation.json 2>&1 | grep -vE "^  [a-z_]+\." \
    | awk '!/^step [0-9]+\/[0-9]+ \|/ || /^step (250|500|750|1000|1250|1500)\//' | tee "$OUT/sedd_radd.log"
  echo "sedd_radd phase: ${SECONDS} s" | tee -a "$OUT/sedd_radd.log"
  tar czf "$OUT/sedd_radd_runs.tgz" --exclude=checkpoints --exclude=data runs/sedd_radd_ablation
}

phase_sedd_radd_rows() {  # after sedd_radd (and data): its sedd and radd jobs under paradigms_tiny's evaluation
  ensure_libs
  SECONDS=0
  local d=runs/paradigms_tiny/data m
  local all=(--data wiki_val=$d/wiki_val.bin --data wikitext2=$d/wikitext2.bin --data wikitext103=$d/wikitext103.bin
             --data ptb=$d/ptb.bin --data lambada=$d/lambada.bin --data lm1b=$d/lm1b.bin)
  local exact=(--data wiki_val=$d/wiki_val.bin --data wikitext2=$d/wikitext2.bin --data ptb=$d/ptb.bin
               --set eval.first_token=skip --set eval.max_batches=1)
  for m in radd sedd; do
    $A eval --run runs/sedd_radd_ablation/$m "${all[@]}" --set eval.mode=elbo --set eval.mc_steps=16 2>&1 \
      | tee -a "$OUT/sedd_radd_rows.log"
    $A eval --run runs/sedd_radd_ablation/$m "${exact[@]}" --set eval.mode=l2r 2>&1 | tee -a "$OUT/sedd_radd_rows.log"
    $A eval --run runs/sedd_radd_ablation/$m "${exact[@]}" --set eval.mode=random --set eval.orders=1 2>&1 \
      | tee -a "$OUT/sedd_radd_rows.log"
  done
  echo "sedd_radd_rows phase: ${SECONDS} s" | tee -a "$OUT/sedd_radd_rows.log"
  cp runs/sedd_radd_ablation/radd/results.json "$OUT/radd_results.json"
  cp runs/sedd_radd_ablation/sedd/results.json "$OUT/sedd_results.json"
}

phase_plateau() {  # σ-GPT / AO-GPT debug on a 16-letter Markov chain: validation loss vs steps at T = 32 … 1024
  ensure_libs
  SECONDS=0
  local d=runs/plateau; rm -rf $d; mkdir -p $d
  # Each letter is followed by the letter 1 or 5 places on, ½ each: unigram ln 16 = 2.773 nats, optimum ln 2.
  python3 - $d <<'PY'
import struct, sys, torch
d = sys.argv[1]
g = torch.Generator().manual_seed(0)
for name, n in (("train", 4_000_000), ("val", 131_072)):
    step = torch.where(torch.rand(n, generator=g) < 0.5, 1, 5)
    x = ((torch.cumsum(step, 0) + int(torch.randint(0, 16, (1,), generator=g))) % 16).to(torch.int32)
    buf = bytearray(4 * n)
    torch.frombuffer(buf, dtype=torch.int32).copy_(x)
    with open(f"{d}/{name}.bin", "wb") as f:
        f.write(struct.pack("<256i", 20240520, 2, n, 16, 0, -1, *([0] * 250)))
        f.write(buf)
PY
  local m T n
  for m in sigma_gpt ao_gpt; do
    for T in 32 128 256 1024; do
      n=$(( T == 1024 ? 2500 : 1500 ))
      timeout 150 $A train --set model.plugin=$m --set model.flavour=debug --set model.block_size=$T \
        --set data.train=$d/train.bin --set data.val=$d/val.bin --set train.out_dir=$d/${m}_T$T \
        --set train.batch_size=32 --set train.max_iters=$n --set train.learning_rate=0.003 --set train.min_lr=0.0003 \
        --set train.warmup_iters=$(( n / 20 )) --set train.lr_decay_iters=$n --set train.weight_decay=0 \
        --set train.order.kind=random --set train.log_interval=50 --set train.eval_interval=50 \
        --set train.eval_iters=4 --set train.checkpoint_interval=0 --set train.keep_checkpoints=1 \
        > $d/${m}_T$T.log 2>&1 || echo "plateau run ${m} T=$T failed (rc $?)"
      grep -E "^done:|rror" $d/${m}_T$T.log | tail -1
    done
  done
  python3 - $d <<'PY' | tee "$OUT/plateau.md"
import glob, json, os, sys
d = sys.argv[1]
print("| model | T | steps | first step with val loss < 2.60 | val loss at 500 / 1000 / end |\n|---|---:|---:|---:|---|")
for m in ("sigma_gpt", "ao_gpt"):
    for T in (32, 128, 256, 1024):
        f = f"{d}/{m}_T{T}/metrics.jsonl"
        if not os.path.exists(f): print(f"| {m} | {T} | – | run missing | |"); continue
        val = [(r["step"], r["loss/val"]) for r in map(json.loads, open(f)) if "loss/val" in r]
        first = next((s for s, v in val if v < 2.60), None)
        at = {s: v for s, v in val}
        pick = lambda s: f"{at[s]:.3f}" if s in at else "–"
        print(f"| {m} | {T} | {val[-1][0]} | {first if first is not None else 'not left'} | "
              f"{pick(500)} / {pick(1000)} / {val[-1][1]:.3f} |")
PY
  tar czf "$OUT/plateau_runs.tgz" --exclude=checkpoints --exclude='*.bin' $d
  echo "plateau phase: ${SECONDS} s"
}

# One experiment at one tier ($3: optional job names, comma-separated, for `aobench run --jobs`): loss curves,
# verdicts and the run folder (without checkpoints) into $OUT. Stopped (SIGINT: the trainer checkpoints) once
# $LANE_DEADLINE seconds of this script have passed; the report then shows what finished, and a later call
# resumes the experiment.
run_tier() {
  local exp=$1 tier=$2 jobs=${3:-} d left=$(( ${LANE_DEADLINE:-100000} - SECONDS )) tag=${1}_$2${3:+_${3//,/_}}
  d=$(python3 - configs/experiments/$exp.json $tier <<'PY'
import json, sys
def out_dir(path, tier):  # the tier's out_dir, else the body's, else the "base" file's at the same tier
    e = json.load(open(path))
    return e["tiers"][tier].get("out_dir") or e.get("out_dir") or out_dir("configs/experiments/" + e["base"], tier)
print(out_dir(sys.argv[1], sys.argv[2]))
PY
)
  if (( left > 0 )); then
    timeout --signal=INT --kill-after=30 $left $A run configs/experiments/$exp.json --set tier=$tier \
      ${jobs:+--jobs $jobs} 2>&1 | tee "$OUT/tiers_$tag.log" | grep -E "^done:|val loss|verdict|rror|^run: done" || true
  fi
  # A run cut by the deadline, or skipped (the lanes' final pass), wrote no report of everything there.
  grep -q "^run: done" "$OUT/tiers_$tag.log" 2>/dev/null || $A report $d > /dev/null 2>&1 || true
  # Neither may stop a lane: no summary yet (deadline), or files another lane is writing while tar reads them.
  sed -n '/## Findings/,/^- Deviations/p' $d/report/summary.md 2>/dev/null | tee "$OUT/tiers_${tag}_verdicts.md" || true
  tar czf "$OUT/tiers_$tag.tgz" --exclude=checkpoints --exclude=data $d || echo "run_tier: tar of $d incomplete"
}

phase_tiers() {  # $TIER_EXPERIMENTS (default finding1_loss) at each of $TIERS (default tiny_t256): loss curves + verdicts
  ensure_libs
  for exp in ${TIER_EXPERIMENTS:-finding1_loss}; do
    for tier in ${TIERS:-tiny_t256}; do run_tier $exp $tier; done
  done
  echo "tiers phase: ${SECONDS} s"
}

# $TIER_LANES at tier $TIER (default tiny_t256): space-separated lanes, each a comma-separated list of
# experiments run one after another, an experiment optionally narrowed to some of its jobs with
# EXP:JOB+JOB (`aobench run --jobs`), e.g. "order_ablation:l2r+fixed1+fixed2 order_ablation:fixed3+random".
# The lanes run at the same time, lane i on GPU i mod (GPU count). The shared training pack is prepared once
# first so that no two lanes write it; at the end every experiment is reported again over all its lanes' jobs,
# then the experiments of $TIER_AFTER run one after another (e.g. generation_tiny, which needs every model of
# paradigms_tiny trained).
phase_lanes() {
  ensure_libs
  local ngpu i=0 tier=${TIER:-tiny_t256} item exps="" pids=() pid
  ngpu=$(nvidia-smi -L | wc -l)
  DATA_ONLY=${LANES_DATA:-wiki_train} phase_data
  for lane in $TIER_LANES; do
    (export CUDA_VISIBLE_DEVICES=$(( i % ngpu ))
     for item in ${lane//,/ }; do
       if [[ $item == *:* ]]; then j=${item#*:}; run_tier ${item%%:*} $tier ${j//+/,}; else run_tier $item $tier; fi
     done) &
    pids+=($!)
    i=$(( i + 1 ))
    for item in ${lane//,/ }; do exps+=" ${item%%:*}"; done
  done
  for pid in "${pids[@]}"; do wait "$pid" || echo "lanes: lane (pid $pid) failed"; done
  for exp in $(printf '%s\n' $exps | sort -u); do
    if [[ $TIER_LANES == *"$exp:"* ]]; then LANE_DEADLINE=0 run_tier $exp $tier; fi   # report + archive only
  done
  for exp in ${TIER_AFTER:-}; do run_tier $exp $tier; done
  echo "lanes phase: ${SECONDS} s"
}

phase_import() {  # the authors' fixtures (tests/data/import) imported and scored on the GPU: l2r NLL of each
  # golden identity-order row against the authors' forward, fp32 (1e-4, as the CPU tests) and bf16 (reported)
  ensure_libs
  local d=/tmp/import_check; rm -rf $d; mkdir -p $d
  for m in ao_gpt sigma_gpt sedd radd; do
    local vocab=""; [[ $m == ao_gpt || $m == sigma_gpt ]] && vocab="--set model.vocab_size=50"
    python3 - $m $d/$m.bin <<'PY'
import json, struct, sys, torch
m, out = sys.argv[1], sys.argv[2]
raw = open(f"tests/data/import/{m}/golden.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])["input_ids"]
ids = torch.frombuffer(bytearray(raw[8 + n + h["data_offsets"][0]:8 + n + h["data_offsets"][1]]), dtype=torch.int64)
row = ids.view(h["shape"])[0].tolist()
# datasets/token_file.h: 256 int32 (magic, version 1 = uint16 ids, count, vocab, window, eos, tokenizer name at [6..13])
head = struct.pack("<6i", 20240520, 1, len(row), 50, 0, -1) + b"gpt2".ljust(32, b"\0")
open(out, "wb").write(head.ljust(1024, b"\0") + struct.pack(f"<{len(row)}H", *row))
PY
    for dt in float32 bfloat16; do
      $A import --model $m --from tests/data/import/$m --out $d/${m}_$dt --set train.dtype=$dt $vocab > $d/${m}_$dt.log 2>&1
      $A eval --run $d/${m}_$dt --data row=$d/$m.bin --set eval.first_token=score --set eval.batch_size=1 \
        >> $d/${m}_$dt.log 2>&1 || { echo "import: $m $dt failed"; tail -5 $d/${m}_$dt.log; }
    done
  done
  python3 - $d <<'PY' | tee "$OUT/import.txt"
import json, struct, sys, torch
d = sys.argv[1]
def golden(m):
    raw = open(f"tests/data/import/{m}/golden.safetensors", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]; head = json.loads(raw[8:8 + n]); out = {}
    for k, h in head.items():
        if k == "__metadata__": continue
        dt = {"F32": torch.float32, "I64": torch.int64}[h["dtype"]]
        b = bytearray(raw[8 + n + h["data_offsets"][0]:8 + n + h["data_offsets"][1]])
        out[k] = torch.frombuffer(b, dtype=dt).view(h["shape"])
    return out
for m in ("ao_gpt", "sigma_gpt", "sedd", "radd"):
    g = golden(m); x = g["input_ids"][0]
    if m in ("ao_gpt", "sigma_gpt"):
        lp = torch.log_softmax(g["logits_ema" if m == "ao_gpt" else "logits"][0, :16, :50], -1)
    else:
        lp = g["logp_ema" if m == "radd" else "logp"][0]
    want = -lp.gather(1, x[:, None]).mean().item()
    for dt in ("float32", "bfloat16"):
        try:
            r = json.load(open(f"{d}/{m}_{dt}/results.json"))["runs"][f"{m}_{dt}"]["metrics"]["row/nll"]["value"]
            verdict = "ok" if dt == "bfloat16" or abs(r - want) < 1e-4 else "FAIL"
            print(f"import {m:9s} {dt:8s} eval nll {r:.6f} authors {want:.6f} |d| {abs(r - want):.2e} {verdict}")
        except Exception as e:
            print(f"import {m:9s} {dt:8s} FAIL: {e}")
PY
}

for p in "$@"; do
  echo "=== gpu_check: $p ($(date -u +%H:%M:%S))"
  "phase_$p"
done
