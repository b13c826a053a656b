#!/usr/bin/env bash
# The NCCL CTA sweep of the captured data-parallel step (small GPT, 80 steps; run from the repository root on
# the GPU machine after `AOBENCH_TARGETS="aobench aobench_gpt" scripts/gpu_check.sh build`; logs to $OUT).
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
A=build/aobench; d=runs/ddp; data=$d/wiki_train.bin; mkdir -p $d
ln -sfn $PWD/data/shared ../shared/data 2>/dev/null || { mkdir -p ../shared; ln -sfn $PWD/data/shared ../shared/data; }
[[ -s $data ]] || $A prepare --format text --input data/shared/train/wiki_train_00.txt.xz --tokenizer gpt2 \
    --vocab-dir data/shared/gpt2 --packing none --window 1024 --output $data 2>&1 | tail -1
common=(--set model.plugin=gpt --set model.flavour=small --set data.train=$data --set data.val= --set data.tokenizer=gpt2
  --set train.max_iters=80 --set train.warmup_iters=20 --set train.lr_decay_iters=80 --set train.log_interval=10
  --set train.eval_interval=0 --set train.checkpoint_interval=0 --set train.batch_size=16)
rate() { grep -E "^step (40|50|60|70|80)/" "$1" | sed -E 's/.*\| ([0-9.]+)([kM]) tok\/s.*/\1 \2/' | awk '{s+=$1*($2=="M"?1000:1);n++} END {printf "%.1f", s/n}'; }
$A train "${common[@]}" --set train.out_dir=$d/plain > $OUT/plain.log 2>&1; echo "1gpu plain: $(rate $OUT/plain.log)k"
for n in 4 2; do for c in default 16 8 4; do
  env=(); [[ $c != default ]] && env=(NCCL_MAX_CTAS=$c NCCL_MIN_CTAS=$c)
  env "${env[@]}" torchrun --standalone --nproc_per_node=$n --no-python $A train "${common[@]}" --set train.out_dir=$d/g${n}_$c > $OUT/g${n}_$c.log 2>&1
  echo "$n gpus ctas=$c: $(rate $OUT/g${n}_$c.log)k  $(grep -c 'replay one CUDA graph' $OUT/g${n}_$c.log) graph"
done; done
