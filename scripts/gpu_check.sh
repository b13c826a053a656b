#!/usr/bin/env bash
# GPU checks (issues A–C), run on the GPU machine from the repository root through the device tool:
#   scripts/gpu_check.sh PHASE...    phases: build kernels data speed paradigms speed2 bench resume ensemble
#                                    ensemble_sigma sedd_radd sedd_radd_rows
# Logs and results go to $OUT (device tool) or ./gpu_out. Expects the carried folders .debs/ (see
# scripts/fetch_gpu_debs.sh) and data/shared/ (a copy of the needed ../shared/data files, same layout).
set -eo pipefail
cd "$(dirname "$0")/.."
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

phase_data() {   # prepare every dataset of the paradigms experiment (the runner skips existing outputs)
  ensure_libs
  python3 - ${DATA_EXPERIMENT:-} <<'PY' > /tmp/prepare_cmds.sh
import json, shlex
import sys
for p in json.load(open(sys.argv[1] if len(sys.argv) > 1 else "configs/experiments/paradigms_tiny.json"))["prepare"]:
    args = ["build/aobench", "prepare"]
    for k, v in p.items():
        if k == "name": continue
        for x in (v if isinstance(v, list) else [v]): args += ["--" + k.replace("_", "-"), str(x)]
    print("mkdir -p " + shlex.quote(p["output"].rsplit("/", 1)[0]) + " && " + " ".join(map(shlex.quote, args)))
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
  for pair in "test_plugin_gpt:FusedOps.*" "test_plugin_sedd:DDiTFused.*" "test_plugin_ao_gpt:*"; do
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

phase_sedd_radd() {  # SEDD–RADD ablation (issue 15): five tiny encoders on paradigms_tiny's tokens, wiki_val ELBO
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

for p in "$@"; do
  echo "=== gpu_check: $p ($(date -u +%H:%M:%S))"
  "phase_$p"
done
