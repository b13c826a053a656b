#!/usr/bin/env bash
# GPU checks on the GPU machine (repository root, through the device tool): scripts/gpu_check.sh COMMAND...
#   build       scripts/gpu_build.sh with the tests (AOBENCH_CMAKE_ARGS / AOBENCH_TARGETS override it)
#   kernels     the tests that need a GPU (each CUDA kernel and graph against its reference), through ctest
#   smoke       configs/experiments/gpu_smoke.json: every plugin trained, stopped, resumed, evaluated, sampled
#   trainspeed  `aobench train` of the small models beside nanoGPT (bench/peers/), `aobench eval --throughput`
#               beside nanoGPT's forward + per-token cross-entropy; AO_PAIRS=N alternating pairs
#   aopairs     only those pairs (AO_PAIRS, default 3): AO-GPT's training speed against the GPT's
#   genspeed    generation (BM_PluginSample, `aobench speed`) beside HF generate() and a compiled SEDD step
#   pack        N tiny trainings on one GPU against one alone, in turns and through MPS (gpu_packing.json)
#   ddp         N GPUs against 1: configs/experiments/ddp_scaling.json + torchrun (ranks in sync: gpu_ddp_check.sh)
#   prepare     `aobench prepare` of a 2 GB text on every core: tokens/s and peak memory (sharded output)
#   multinode   2 GPUs: two torchrun "nodes" (c10d rendezvous on localhost, one GPU each) against one node of 2
# Experiments at a GPU tier: scripts/gpu_run.sh. docs/results/README.md ("GPU checks") maps the old phases to these.
# Output: $OUT or ./gpu_out. Carried: .debs/ (scripts/fetch_gpu_debs.sh), data/ (../shared/data's gpt2/ and train/).
# shellcheck disable=SC2317  # the commands are called as cmd_$1
set -eo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # NVLink multicast stays off
if [[ ! -e ../shared/data && -d data ]]; then mkdir -p ../shared && ln -s "$PWD/data" ../shared/data; fi
export AOBENCH_DATA_DIR=${AOBENCH_DATA_DIR:-$PWD/../shared/data} AOBENCH_GPT2_DIR=${AOBENCH_GPT2_DIR:-$PWD/../shared/data/gpt2}
export LD_LIBRARY_PATH="${AOBENCH_DEB_PREFIX:-/tmp/aobench-deps}/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
A=build/aobench

cmd_build() {
  export AOBENCH_CMAKE_ARGS=${AOBENCH_CMAKE_ARGS:--DAOBENCH_BUILD_TESTS=ON}
  source scripts/gpu_build.sh || return 1
  { nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; git rev-parse HEAD; } | tee "$OUT/device.txt"
  $A list | tee "$OUT/plugins.txt"
}

cmd_kernels() {  # a test that needs a GPU skips without one; KERNEL_TESTS: another ctest -R
  ctest --test-dir build -R "${KERNEL_TESTS:-Cuda|FusedDraw|DDiTFused}" --no-tests=error --output-on-failure | tee "$OUT/kernels.log"
}

cmd_smoke() {  # SMOKE_TIER=debug: the same on the CPU
  local tier=${SMOKE_TIER:-gpu} f=configs/experiments/gpu_smoke.json d=runs/gpu_smoke pid r n t0=$SECONDS
  [[ $tier == gpu ]] || d+=_$tier
  for r in "$d"/*; do [[ $r == "$d/data" ]] || rm -rf "$r"; done  # a fresh start; the prepared tokens stay
  $A run "$f" --set tier="$tier" --set runs_per_device=5 > "$OUT/smoke_stopped.log" 2>&1 & pid=$!  # all 5 at once
  # SIGINT (each run checkpoints and stops, as at a deadline) once every job has written a checkpoint; then resume.
  until (( $(find "$d" -path '*/checkpoints/step_*' -prune 2>/dev/null | cut -d/ -f3 | sort -u | wc -l) >= 5 )) ||
    ! kill -0 "$pid" 2>/dev/null || (( SECONDS - t0 > 600 )); do sleep 0.5; done
  kill -INT "$pid" 2>/dev/null || true; wait "$pid" || true
  LOG_NAME=smoke DEADLINE=${SMOKE_DEADLINE:-420} scripts/gpu_run.sh "$f" --set tier="$tier" --set runs_per_device=5
  n=$(cat "$OUT/smoke.log" "$d"/logs/*.log 2>/dev/null | grep -c "^resumed from" || true)
  echo "smoke: $n of 5 runs resumed from their checkpoint" | tee -a "$OUT/smoke.log"
  grep -q "^run: done" "$OUT/smoke.log" && (( n > 0 ))
}

# `aobench train` NAME PLUGIN FLAVOUR BATCH STEPS [--set ...] on random ids; skipped after TS_BUDGET s (default 400)
speed_run() {
  local name=$1 order=mixture
  [[ $2 == gpt ]] && order=l2r
  (( SECONDS - ts_start > ${TS_BUDGET:-400} )) && { echo "skipped $name: budget spent" | tee "$TS/$name.log"; return; }
  timeout 120 "$A" train --set model.plugin="$2" --set model.flavour="$3" --set data.train="$TS/tokens.bin" --set data.val= \
    --set data.tokenizer=gpt2 --set train.out_dir="$TS/$name" --set train.batch_size="$4" --set train.max_iters="$5" \
    --set train.warmup_iters=10 --set train.lr_decay_iters="$5" --set train.log_interval=10 --set train.eval_interval=0 \
    --set train.checkpoint_interval=0 --set train.keep_checkpoints=1 --set train.order.kind="$order" "${@:6}" \
    > "$TS/$name.log" 2>&1 || echo "speed run $name failed (rc $?)" | tee -a "$TS/$name.log"
  grep -E "^step|rror" "$TS/$name.log" | tail -2 || true
  [[ $name == gpt_b16 ]] || rm -rf "${TS:?}/$name/checkpoints"  # gpt_b16's is timed by `aobench eval --throughput`
}
peer_run() {  # bench/peers/nanogpt_train.py ARGS: one JSON line into $TS/peers.jsonl
  (( SECONDS - ts_start > ${TS_BUDGET:-400} )) && { echo "skipped nanoGPT $*: budget spent"; return; }
  timeout 180 python3 bench/peers/nanogpt_train.py "$@" --steps 40 --warmup 10 2>> "$TS/peers.err" | tee -a "$TS/peers.jsonl"
}

cmd_trainspeed() {  # the most important comparisons first (the budget skips the tail); table in $OUT/trainspeed.md
  local i m TS=runs/trainspeed ts_start=$SECONDS
  rm -rf "$TS"; mkdir -p "$TS/pairs"
  python3 bench/peers/nanogpt_train.py --write-tokens "$TS/tokens.bin" --tokens 20000000
  build/aobench_bench --benchmark_filter=Bf16MatmulPeak 2>&1 | grep -E "^BM_|TFLOP" | tee "$OUT/bench_peak.log"
  peer_run --batch 16 --compile; speed_run gpt_b16 gpt small 16 60
  peer_run --batch 32 --compile; speed_run gpt_b32 gpt small 32 50
  speed_run ao_gpt_b16 ao_gpt small 16 60
  speed_run gpt_b16_uncaptured gpt small 16 60 --set perf.cuda_graphs=false
  speed_run gpt_medium_b16 gpt medium 16 30
  speed_run ao_gpt_medium_b16 ao_gpt medium 16 30
  speed_run gpt_b16_reference gpt small 16 60 --set perf.fused_ce=false --set perf.fused_ln=false --set perf.fused_adamw=false \
    --set perf.fused_linear=false
  for m in sigma_gpt sedd radd; do speed_run "${m}_b16" "$m" small 16 60; done
  peer_run --batch 16
  python3 scripts/trainspeed_table.py "$TS/peers.jsonl" "$TS" 30 | tee "$OUT/trainspeed.md"
  $A eval --run "$TS/gpt_b16" --data random="$TS/tokens.bin" --set eval.batch_size=32 --throughput | tee "$OUT/eval_throughput.log"
  timeout 180 python3 bench/peers/nanogpt_train.py --eval --batch 32 --compile --steps 40 --warmup 10 \
    2>> "$TS/peers.err" | tee "$OUT/peer_eval.jsonl"  # its peer, right after it
  (( ${AO_PAIRS:-0} == 0 )) || cmd_aopairs
  tar czf "$OUT/trainspeed_logs.tgz" --exclude=tokens.bin --exclude=checkpoints "$TS"
}

cmd_aopairs() {  # AO_PAIRS (default 3) alternating GPT / AO-GPT trainings, small B16; the ratio in $OUT/ao_ratio.txt
  local i n=${AO_PAIRS:-3} TS=${TS:-runs/trainspeed} ts_start=${ts_start:-$SECONDS}  # trainspeed's budget holds
  rm -rf "$TS/pairs"; mkdir -p "$TS/pairs"
  [[ -f $TS/tokens.bin ]] || python3 bench/peers/nanogpt_train.py --write-tokens "$TS/tokens.bin" --tokens 20000000
  ln -sf ../tokens.bin "$TS/pairs/tokens.bin"  # speed_run reads $TS/tokens.bin
  for ((i = 1; i <= n; i++)); do  # alternating, so that clock drift hits both
    TS=$TS/pairs speed_run "gpt_b16_$i" gpt small 16 100; TS=$TS/pairs speed_run "ao_gpt_b16_$i" ao_gpt small 16 100
  done
  python3 scripts/ao_ratio.py "$TS/pairs" "$n" 0.95 | tee "$OUT/ao_ratio.txt"
}

cmd_genspeed() {  # one whole sample() of 32 × 1024 (small, bf16), ours and the peers', in one call; $OUT/genspeed/
  local d=$OUT/genspeed spec name steps reps plugin key env; mkdir -p "$d"
  for spec in ${GENSPEED_SPECS:-gpt:1024:3 gpt-onerow:1024:3 ao_gpt:1024:3 ao_gpt-onerow:1024:3 ao_gpt:64:2 sedd:64:1 \
              sedd:1024:1 gpt-nographs:1024:1 gpt-nofused:1024:1 ao_gpt-nographs:1024:1}; do
    IFS=: read -r name steps reps <<< "$spec"
    plugin=${name%%-*} key=$name env=(); [[ $plugin == gpt ]] || key=${name}_$steps
    case $name in *-nographs) env=(AOBENCH_CUDA_GRAPHS=0) ;; *-nofused) env=(AOBENCH_FUSED_SAMPLING=0) ;;
                  *-onerow) env=(AOBENCH_DRAW_SPLIT=0) ;; *-nodecode) env=(AOBENCH_FUSED_DECODE=0) ;;
                  *-radix) env=(AOBENCH_DRAW_CANDIDATES=0) ;; *-cublas) env=(AOBENCH_DECODE_GEMM=0) ;;
                  *-inorder) env=(AOBENCH_DECODE_PDL=0) ;; *-phases) env=(AOBENCH_DRAW_RESIDENT=0) ;; esac
    env "${env[@]}" AOBENCH_BENCH_PLUGIN="$plugin" AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 \
      AOBENCH_BENCH_STEPS="$steps" timeout 200 build/aobench_bench --benchmark_filter=PluginSample \
      --benchmark_repetitions="$reps" --benchmark_out="$d/bench_sample_$key.json" --benchmark_out_format=json \
      2>&1 | grep -E "^BM_|rror" | tee "$d/bench_sample_$key.log"
  done
  for spec in 'gpt:[1024]:3' 'ao_gpt:[64,128,256,512,1024]:2' 'sedd:[64,128]:1'; do  # GENSPEED_SWEEP=0 skips it
    [[ ${GENSPEED_SWEEP:-1} == 1 ]] || break
    IFS=: read -r plugin steps reps <<< "$spec"
    timeout 120 "$A" speed --set model.plugin="$plugin" --set model.flavour=small --set "speed.steps=$steps" \
      --set speed.batch_size=32 --set speed.length=1024 --set speed.repeats="$reps" --set speed.warmup=1 \
      --out "$d/speed_$plugin.json" 2>&1 | tail -n 20 | tee "$d/speed_$plugin.log"
  done
  # shellcheck disable=SC2086  # the peers (GENSPEED_PEERS; GENSPEED_HF_ARGS: several words), compilation untimed
  [[ ${GENSPEED_PEERS:-hf sedd} != *hf* ]] || timeout 240 python3 bench/peers/hf_generate.py ${GENSPEED_HF_ARGS:-} \
    --out "$d/peer_hf_generate.json" 2>&1 | tail -n 40 | tee "$d/peer_hf_generate.log"
  [[ ${GENSPEED_PEERS:-hf sedd} != *sedd* ]] || timeout 150 python3 bench/peers/sedd_step.py \
    --out "$d/peer_sedd_step.json" 2>&1 | tail -n 20 | tee "$d/peer_sedd_step.log"
  python3 bench/peers/genspeed_summary.py "$d" | tee "$d/summary.md"
}

cmd_pack() {  # N copies of the tier's AO-GPT side by side, in turns and through MPS; table in $OUT/pack.md
  local n s shares rc=0 f=configs/experiments/gpu_packing.json d=runs/gpu_packing p=runs/pack t0
  rm -rf "$p" "$d"; mkdir -p "$p"
  $A run "$f" --prepare-only > "$p/prepare.log" 2>&1 || { tail "$p/prepare.log"; return 1; }  # untimed
  for n in ${PACK_RUNS:-1 4 8 12}; do
    shares=${PACK_SHARING:-time_slicing mps}; (( n > 1 )) || shares=${shares%% *}  # one run alone shares nothing
    for s in $shares; do
      rm -rf "$d"; t0=$(date +%s.%N)
      $A run "$f" --set seeds="$n" --set runs_per_device="$n" --set gpu_sharing="$s" > "$p/command.log" 2>&1 \
        || { echo "pack: $n runs, $s: failed (rc $?)"; rc=1; }
      echo "$n $s $(python3 -c "print(f'{$(date +%s.%N) - $t0:.2f}')")" >> "$p/wall.txt"
      grep -E "^run: (GPU sharing|[0-9]+ runs in)" "$p/command.log" || true
      if [[ -d $d ]]; then mv "$d" "$p/${n}_$s"; else mkdir -p "$p/${n}_$s"; fi
      mv "$p/command.log" "$p/${n}_$s/"
    done
  done
  python3 scripts/pack_table.py "$p" 1000 2048 > "$OUT/pack.md" || rc=1
  cat "$OUT/pack.md"
  tar czf "$OUT/pack_runs.tgz" --exclude=checkpoints --exclude='*.bin' "$p"
  return $rc
}

cmd_ddp() {  # DDP_GPUS (default: all), DDP_PLUGIN=ao_gpt (the AO-GPT, mixture orders)
  local n m=${DDP_PLUGIN:-gpt} f=configs/experiments/ddp_scaling.json d set=() tr=(torchrun)
  n=${DDP_GPUS:-$(nvidia-smi -L | wc -l)}; d=runs/ddp_x$n
  (( n >= 2 )) || { echo "ddp: needs ≥ 2 GPUs, found $n"; return 1; }
  [[ $m == gpt ]] || set=(--set model.plugin="$m" --set train.order.kind=mixture)
  command -v torchrun > /dev/null || tr=(python3 -m torch.distributed.run)
  tr+=(--standalone --nproc_per_node="$n" --no-python "$A" train); rm -rf "$d"
  # Linear scaling's reference alone on one GPU, then the same config on N GPUs (micro-batch 16 each).
  $A run "$f" --set tier=x"$n" "${set[@]}" --jobs rate_1gpu > "$OUT/ddp_rate_1gpu.log" 2>&1 || return 1
  "${tr[@]}" --config "$d/rate_1gpu/config.resolved.json" --set train.out_dir="$d/rate_${n}gpu" > "$OUT/ddp_rate_${n}gpu.log" 2>&1
  # The 1-GPU curves (N accumulated micro-batches: the same global batch), one per GPU at a time, each scored on
  # the whole validation file; then the N-GPU curve from the same config with seed 1 (none of theirs), scored alike.
  $A run "$f" --set tier=x"$n" "${set[@]}" > "$OUT/ddp_curves_1gpu.log" 2>&1 || return 1
  "${tr[@]}" --config "$d/curve_1gpu_seed1337/config.resolved.json" --set train.gradient_accumulation_steps=1 \
    --set train.seed=1 --set train.out_dir="$d/curve_${n}gpu" > "$OUT/ddp_curve_${n}gpu.log" 2>&1
  $A eval --run "$d/curve_${n}gpu" --data val=runs/ddp_data/wiki_val.bin > "$OUT/ddp_eval_${n}gpu.log" 2>&1
  tar czf "$OUT/ddp_${m}_${n}gpu.tgz" --exclude=checkpoints "$d"
  python3 scripts/ddp_table.py "$d" "$n" | tee "$OUT/ddp_${m}_${n}gpu.md"
}

cmd_prepare() {  # PREPARE_GB (default 2): the Wikipedia shard repeated to that size; docs/results/data/README.md
  local d=/tmp/prepare_rate gb=${PREPARE_GB:-2}
  rm -rf "$d"; mkdir -p "$d"
  xz -dc "$AOBENCH_DATA_DIR/train/wiki_train_00.txt.xz" > "$d/round.txt"
  while (( $(stat -c %s "$d/in.txt" 2> /dev/null || echo 0) < gb * 1000000000 )); do cat "$d/round.txt" >> "$d/in.txt"; done
  echo "input: $(stat -c %s "$d/in.txt") bytes, ${PREPARE_THREADS:-$(nproc)} threads of $(nproc)" | tee "$OUT/prepare_rate.txt"
  $A prepare --format text --input "$d/in.txt" --tokenizer gpt2 --vocab-dir "$AOBENCH_GPT2_DIR" --output "$d/out" \
    --shard-tokens 100000000 --threads "${PREPARE_THREADS:-$(nproc)}" 2>&1 | tail -n 3 | tee -a "$OUT/prepare_rate.txt"
  rm -rf "$d"
}

cmd_multinode() {  # the same global batch three ways (ddp_scaling.json's seed-1337 curve, 200 steps of the small GPT)
  local f=configs/experiments/ddp_scaling.json d=runs/multinode c port=${MULTINODE_PORT:-29517} node pids=()
  (( $(nvidia-smi -L | wc -l) >= 2 )) || { echo "multinode: needs 2 GPUs"; return 1; }
  local tr=(torchrun); command -v torchrun > /dev/null || tr=(python3 -m torch.distributed.run)
  rm -rf "$d" runs/ddp_x2/curve_1gpu_seed1337
  # 1 GPU, 2 accumulated micro-batches of 16; its resolved config is the torchrun runs' too.
  $A run "$f" --set tier=x2 --jobs curve_1gpu_seed1337 > "$d.log" 2>&1 || return 1
  c=runs/ddp_x2/curve_1gpu_seed1337/config.resolved.json
  mkdir -p "$d" && cp -r runs/ddp_x2/curve_1gpu_seed1337 "$d/one_gpu"
  # The torchrun runs state the global batch (train.global_batch_size 32: one micro-batch of 16 per rank); the same
  # one-node launch twice measures the run-to-run noise of the GPU kernels themselves.
  local global=(--set train.gradient_accumulation_steps=1 --set train.global_batch_size=32)
  for r in one_node one_node_repeat; do
    "${tr[@]}" --standalone --nproc_per_node=2 --no-python "$A" train --config "$c" "${global[@]}" \
      --set train.out_dir="$d/$r" > "$d/$r.log" 2>&1 || return 1
  done
  # Two agents, one per "node", each seeing its own GPU (LOCAL_RANK 0 on both), one rendezvous; global rank 0
  # writes the run (checkpoint at step 100 and 200).
  for node in 0 1; do
    CUDA_VISIBLE_DEVICES=$node "${tr[@]}" --nnodes=2 --node-rank="$node" --nproc-per-node=1 --rdzv-backend=c10d \
      --rdzv-endpoint=localhost:"$port" --rdzv-id=aobench_multinode --no-python "$A" train --config "$c" \
      "${global[@]}" --set train.checkpoint_interval=100 --set train.out_dir="$d/two_nodes" \
      > "$d/node$node.log" 2>&1 & pids+=($!)
  done
  wait "${pids[0]}" && wait "${pids[1]}" || return 1
  ls "$d/two_nodes/checkpoints" | tee "$d/two_nodes_checkpoints.txt"
  mv "$d.log" "$d/one_gpu.log"; tar czf "$OUT/multinode_runs.tgz" --exclude=checkpoints "$d"  # logs inside
  python3 scripts/multinode_table.py "$d" | tee "$OUT/multinode.md"
}

for c in "$@"; do declare -F "cmd_$c" > /dev/null || { echo "gpu_check: no command '$c' (see $0)" >&2; exit 2; }; done
rc=0; for c in "$@"; do
  echo "=== gpu_check: $c ($(date -u +%H:%M:%S))"
  "cmd_$c" || { echo "=== gpu_check: $c FAILED"; rc=1; }
done
exit $rc
