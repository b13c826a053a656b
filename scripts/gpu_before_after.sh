#!/usr/bin/env bash
# A build of this tree against a build of an earlier tree (runs/prev: `git archive REV | tar -x -C runs/prev`,
# carried to the GPU machine), side by side on one GPU: the small GPT and AO-GPT full training step
# (aobench_bench, CUDA events), `aobench train` tok/s, `aobench eval --throughput` and one whole sample() of
# 32 × 1024 (`aobench speed`, GPT and AO-GPT small, 1024 steps), alternating before/after so clock drift hits both. Proves a refactor is no slower. Output: $OUT/before_after.md.
set -eo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
PREV=${PREV:-runs/prev}
[[ -d $PREV/harness ]] || { echo "before_after: no earlier tree in $PREV; HINT: git archive REV | tar -x -C $PREV" >&2; exit 2; }
export AOBENCH_TARGETS="aobench aobench_bench aobench_gpt aobench_ao_gpt" AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=OFF
( source scripts/gpu_build.sh ) > "$OUT/build_after.log" 2>&1 &
after_pid=$!
( cp -r .debs "$PREV/" && cd "$PREV" && AOBENCH_DEB_PREFIX=/tmp/aobench-deps-prev source scripts/gpu_build.sh ) \
  > "$OUT/build_before.log" 2>&1
wait $after_pid
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
W=runs/before_after; rm -rf $W; mkdir -p $W
python3 bench/peers/nanogpt_train.py --write-tokens $W/tokens.bin --tokens 8000000  # random GPT-2 ids
echo "# before ($PREV) vs after (this tree) on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
  > "$OUT/before_after.md"
for rep in 1 2; do
  for side in before after; do
    B=$([[ $side == before ]] && echo $PREV/build || echo build)
    for m in gpt ao_gpt; do
      AOBENCH_BENCH_PLUGIN=$m AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=16 $B/aobench_bench \
        --benchmark_filter=PluginTrainFullStep --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
        2>&1 | grep -E "_median|rror" | sed "s/^/$side rep$rep $m: /" | tee -a "$OUT/before_after.md"
    done
    $B/aobench train --set model.plugin=gpt --set model.flavour=small --set data.train=$W/tokens.bin \
      --set data.val= --set data.tokenizer=gpt2 --set train.out_dir=$W/${side}_$rep --set train.batch_size=16 \
      --set train.max_iters=50 --set train.warmup_iters=10 --set train.lr_decay_iters=50 --set train.log_interval=10 \
      --set train.eval_interval=0 --set train.checkpoint_interval=50 > $W/train_${side}_$rep.log 2>&1 || true
    grep -E "^step" $W/train_${side}_$rep.log | tail -2 | sed "s/^/$side rep$rep train: /" | tee -a "$OUT/before_after.md"
    $B/aobench eval --run $W/${side}_$rep --data random=$W/tokens.bin --set eval.batch_size=32 \
      --throughput 2>&1 | grep -iE "tok/s|rror" | sed "s/^/$side rep$rep eval: /" \
      | tee -a "$OUT/before_after.md"
    for m in gpt ao_gpt; do
      $B/aobench speed --set model.plugin=$m --set model.flavour=small --set "speed.steps=[1024]" \
        --set speed.batch_size=32 --set speed.length=1024 --set speed.repeats=3 --set speed.warmup=1 \
        --out $W/speed_${side}_${rep}_$m.json 2>&1 | grep -E "^ +1024 |rror" | sed "s/^/$side rep$rep sample $m: /" \
        | tee -a "$OUT/before_after.md"
    done
  done
done
tar czf "$OUT/before_after_logs.tgz" $W/*.log "$OUT"/build_*.log
