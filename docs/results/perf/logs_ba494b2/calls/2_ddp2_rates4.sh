#!/usr/bin/env bash
# 4 × H200, the build and tokens of call 1 kept: the ddp phase on 2 GPUs (four 1-GPU seeds), then the 4-GPU
# rate again beside a second 1-GPU rate, with 50 (default) and 100 MB buckets.
source scripts/gpu_check.sh; set +e
L=$OUT/c3; mkdir -p $L; OUT=$L
ensure_libs
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
DDP_GPUS=2 DDP_SEEDS="1337 7 42 123" phase_ddp > $L/phase_ddp2.out 2>&1; echo "phase_ddp (2) done at $SECONDS s"
cat $L/phase_ddp2.out
d=runs/ddp
for f in $d/*/metrics.jsonl $d/*/results.json $d/*/config.resolved.json; do [[ -e $f ]] && cp --parents "$f" $L/; done
rate=(--set model.plugin=gpt --set model.flavour=small --set data.train=$d/wiki_train.bin --set data.val=
  --set data.tokenizer=gpt2 --set train.warmup_iters=20 --set train.eval_interval=0 --set train.checkpoint_interval=0
  --set train.batch_size=16 --set train.max_iters=100 --set train.lr_decay_iters=100 --set train.log_interval=10)
mean() { python3 -c "
import json,sys
r=[json.loads(l)['throughput/tok_s'] for l in open('$1/metrics.jsonl') if 'throughput' in l and json.loads(l)['step']>30]
print(f'{sum(r)/len(r)/1e3:.1f}')"; }
timeout 120 $A train "${rate[@]}" --set train.out_dir=$d/again_1gpu > $L/again_1gpu.log 2>&1
r1=$(mean $d/again_1gpu)
for mb in 50 100; do
  timeout 120 torchrun --standalone --nproc_per_node=4 --no-python $A train "${rate[@]}" --set train.ddp_bucket_mb=$mb \
    --set train.out_dir=$d/again_4gpu_b$mb > $L/again_4gpu_b$mb.log 2>&1
  r4=$(mean $d/again_4gpu_b$mb)
  echo "again: 1 GPU $r1 K, 4 GPUs (ddp_bucket_mb $mb) $r4 K: $(python3 -c "print(f'{100*$r4/(4*$r1):.1f}')") % of linear" | tee -a $L/again.txt
done
for f in $d/again_*/metrics.jsonl; do cp --parents "$f" $L/; done
tar czf $OUT/../c3.tgz -C $OUT/.. c3 && rm -rf $L
