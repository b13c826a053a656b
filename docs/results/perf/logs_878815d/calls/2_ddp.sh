#!/usr/bin/env bash
# 2 × H200: data-parallel correctness (gpu_ddp_check.sh), the ddp phase for gpt, bucket sizes 25 / 100 MB.
source scripts/gpu_check.sh; set +e
L=$OUT/c2; mkdir -p $L; OUT=$L
nvidia-smi topo -m > $L/topo.txt 2>&1
AOBENCH_TARGETS="aobench aobench_gpt" phase_build > $L/build.log 2>&1 || { tail -40 $L/build.log; exit 1; }
set +e
ensure_libs
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$SECONDS
timeout 150 bash scripts/gpu_ddp_check.sh > $L/ddp_check.log 2>&1; echo "ddp_check rc=$? in $((SECONDS - t0)) s"
grep -E "ddp-debug|captured vs|gpu_ddp_check|FAIL|refused|rror" $L/ddp_check.log | tail -20
set +e
t0=$SECONDS
DDP_GPUS=2 DDP_SEEDS="1337 7 42 123" phase_ddp > $L/phase_ddp.out 2>&1; echo "phase_ddp in $((SECONDS - t0)) s"
set +e
cat $L/ddp_gpt_2gpu.md
d=runs/ddp
for mb in 25 100; do
  timeout 90 torchrun --standalone --nproc_per_node=2 --no-python build/aobench train --set model.plugin=gpt \
    --set model.flavour=small --set data.train=$d/wiki_train.bin --set data.val= --set data.tokenizer=gpt2 \
    --set train.warmup_iters=20 --set train.eval_interval=0 --set train.checkpoint_interval=0 --set train.batch_size=16 \
    --set train.max_iters=100 --set train.lr_decay_iters=100 --set train.log_interval=10 --set train.ddp_bucket_mb=$mb \
    --set train.out_dir=$d/gpt_rate_2gpu_b$mb > $L/rate_2gpu_b$mb.log 2>&1
  python3 -c "
import json,sys
r=[json.loads(l)['throughput/tok_s'] for l in open('$d/gpt_rate_2gpu_b$mb/metrics.jsonl') if 'throughput' in l and json.loads(l)['step']>30]
print('2 GPUs, ddp_bucket_mb=$mb:', f'{sum(r)/len(r)/1e3:.1f} K tok/s', ' '.join(f'{v/1e3:.1f}' for v in r))" | tee -a $L/buckets.txt
done
for f in $d/*/metrics.jsonl $d/*/results.json $d/*/config.resolved.json $d/*.eval.log; do cp --parents "$f" $L/; done
tar czf $OUT/../c2.tgz -C $OUT/.. c2 && rm -rf $L
