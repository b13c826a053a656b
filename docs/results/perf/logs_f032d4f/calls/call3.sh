#!/usr/bin/env bash
# Call 3 (2026-12-06, session 3): f032d4f as committed — GPU tests of the common kernels and SEDD/RADD, then the
# small GPT beside nanoGPT + compile at B = 32 and B = 16 with perf.fused_linear on and off, and the AO-GPT.
set -o pipefail
O=/tmp/o3; rm -rf $O; mkdir -p $O; T0=$SECONDS
pack() { tar czf "$OUT/call3.tgz" --exclude=tokens.bin --exclude=checkpoints -C /tmp o3; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; } > $O/device.txt; cat $O/device.txt
( AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON AOBENCH_TARGETS="aobench test_plugin_common test_plugin_sedd test_plugin_radd aobench_gpt aobench_ao_gpt aobench_sedd aobench_radd" \
  source scripts/gpu_build.sh ) > $O/build.log 2>&1; rb=$?
echo "build rc $rb at $((SECONDS-T0)) s"; (( rb == 0 )) || { tail -40 $O/build.log; pack; exit 1; }
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu
bin() { find build -name "$1" -type f -perm -u+x | head -1; }
t() {  # NAME BINARY FILTER
  timeout 150 $(bin $2) --gtest_filter="$3" > $O/test_$1.log 2>&1
  echo "test $1 rc $? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $O/test_$1.log | tr '\n' ' ') at $((SECONDS-T0)) s"
}
t common test_plugin_common 'FusedOps.*:DDiT*'
t sedd test_plugin_sedd '*'
t radd test_plugin_radd '*'
pack
TS=$O/ts; mkdir -p $TS
python3 bench/peers/nanogpt_train.py --write-tokens "$TS/tokens.bin" --tokens 20000000 > /dev/null
run() {  # NAME PLUGIN SWITCH BATCH STEPS
  local order=mixture; [[ $2 == gpt ]] && order=l2r
  timeout 100 build/aobench train --set model.plugin="$2" --set model.flavour=small --set data.train="$TS/tokens.bin" --set data.val= \
    --set data.tokenizer=gpt2 --set train.out_dir="$TS/$1" --set train.batch_size=$4 --set train.max_iters=$5 \
    --set train.warmup_iters=10 --set train.lr_decay_iters=$5 --set train.log_interval=10 --set train.eval_interval=0 \
    --set train.checkpoint_interval=0 --set train.keep_checkpoints=1 --set train.order.kind="$order" --set perf.fused_linear=$3 \
    > "$TS/$1.log" 2>&1 || echo "run $1 failed (rc $?)"
  rm -rf "$TS/$1/checkpoints"
  echo "$1: $(grep -E '^step' $TS/$1.log | tail -3 | sed -E 's/.*step ([0-9]+).*\| ([0-9.]+k) tok.*/\1: \2/' | tr '\n' ' ') at $((SECONDS-T0)) s"
}
peer() { timeout 150 python3 bench/peers/nanogpt_train.py --batch $1 --compile --steps 40 --warmup 10 2>> $TS/peers.err | tee -a $TS/peers.jsonl | cut -c1-160; echo "nanoGPT B$1 at $((SECONDS-T0)) s"; }
(( SECONDS - T0 < 330 )) && peer 32
(( SECONDS - T0 < 400 )) && run gpt32_on_1 gpt true 32 50
(( SECONDS - T0 < 415 )) && run gpt32_off_1 gpt false 32 50
(( SECONDS - T0 < 430 )) && run gpt32_on_2 gpt true 32 50
(( SECONDS - T0 < 450 )) && peer 16
for r in 1 2; do
  (( SECONDS - T0 < 520 )) && run gpt16_on_$r gpt true 16 60
  (( SECONDS - T0 < 535 )) && run ao16_on_$r ao_gpt true 16 60
done
echo "end at $((SECONDS-T0)) s"; pack
