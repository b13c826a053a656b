#!/usr/bin/env bash
# Call 2 (2026-12-06, session 3): the training Linear with GELU backward + bias sums in one kernel —
# GPU tests, replayed-step profiles with AOBENCH_FUSED_LINEAR=1/0, trainings beside nanoGPT + compile.
set -o pipefail
O=/tmp/o2; rm -rf $O; mkdir -p $O; T0=$SECONDS
pack() { tar czf "$OUT/call2.tgz" --exclude=tokens.bin --exclude=checkpoints -C /tmp o2; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; } > $O/device.txt; cat $O/device.txt
( AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench aobench_bench test_plugin_common test_plugin_gpt test_plugin_ao_gpt aobench_tests aobench_gpt aobench_ao_gpt aobench_sedd" \
  source scripts/gpu_build.sh ) > $O/build.log 2>&1; rb=$?
echo "build rc $rb at $((SECONDS-T0)) s"; (( rb == 0 )) || { tail -40 $O/build.log; pack; exit 1; }
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu
bin() { find build -name "$1" -type f -perm -u+x | head -1; }
t() {  # NAME BINARY FILTER
  timeout 120 $(bin $2) --gtest_filter="$3" > $O/test_$1.log 2>&1
  echo "test $1 rc $? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $O/test_$1.log | tr '\n' ' ') at $((SECONDS-T0)) s"
}
t common test_plugin_common 'FusedOps.*:DDiT*'
t gpt test_plugin_gpt 'Gpt.*'
t ao_gpt test_plugin_ao_gpt '*'
t train aobench_tests 'TrainTest.CudaGraph*:AdamW.*'
pack
prof() {  # PLUGIN SWITCH
  AOBENCH_FUSED_LINEAR=$2 AOBENCH_BENCH_PLUGIN=$1 AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_PROFILE=1 AOBENCH_BENCH_PROFILE_TOP=40 \
    timeout 90 build/aobench_bench --benchmark_filter=PluginTrainGraphStep 2>&1 | grep -v "^\*\*\*WARNING" > $O/bench_$1_fl$2.log
  echo "$1 fused_linear=$2: $(grep -E '^profile' $O/bench_$1_fl$2.log | head -1 | cut -c1-90) | $(grep -E '^BM_' $O/bench_$1_fl$2.log | head -3 | awk '{printf "%s %s; ", $2, $3}') at $((SECONDS-T0)) s"
}
prof gpt 1; prof gpt 0; prof ao_gpt 1; prof ao_gpt 0; pack
TS=$O/ts; mkdir -p $TS
python3 bench/peers/nanogpt_train.py --write-tokens "$TS/tokens.bin" --tokens 20000000 > /dev/null
run() {  # NAME PLUGIN SWITCH
  local order=mixture; [[ $2 == gpt ]] && order=l2r
  timeout 100 build/aobench train --set model.plugin="$2" --set model.flavour=small --set data.train="$TS/tokens.bin" --set data.val= \
    --set data.tokenizer=gpt2 --set train.out_dir="$TS/$1" --set train.batch_size=16 --set train.max_iters=60 \
    --set train.warmup_iters=10 --set train.lr_decay_iters=60 --set train.log_interval=10 --set train.eval_interval=0 \
    --set train.checkpoint_interval=0 --set train.keep_checkpoints=1 --set train.order.kind="$order" --set perf.fused_linear=$3 \
    > "$TS/$1.log" 2>&1 || echo "run $1 failed (rc $?)"
  rm -rf "$TS/$1/checkpoints"
  echo "$1: $(grep -E '^step' $TS/$1.log | tail -3 | tr '\n' '|') at $((SECONDS-T0)) s"
}
peer() { timeout 150 python3 bench/peers/nanogpt_train.py --batch $1 --compile --steps 40 --warmup 10 2>> $TS/peers.err | tee -a $TS/peers.jsonl | cut -c1-200; echo "nanoGPT B$1 at $((SECONDS-T0)) s"; }
(( SECONDS - T0 < 400 )) && peer 16
for r in 1 2; do
  (( SECONDS - T0 < 470 )) && run gpt_on_$r gpt true
  (( SECONDS - T0 < 480 )) && run gpt_off_$r gpt false
done
(( SECONDS - T0 < 490 )) && run ao_on_1 ao_gpt true
(( SECONDS - T0 < 500 )) && run ao_off_1 ao_gpt false
(( SECONDS - T0 < 510 )) && peer 16
(( SECONDS - T0 < 530 )) && run sedd_on_1 sedd true
(( SECONDS - T0 < 545 )) && run sedd_off_1 sedd false
echo "end at $((SECONDS-T0)) s"; pack
