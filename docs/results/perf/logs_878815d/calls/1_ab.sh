#!/usr/bin/env bash
# A/B of the data-parallel step on 2 GPUs: old bucket zeroing vs copy-in, no comm, bucket size, SM carve-out.
source scripts/gpu_check.sh; set +e
L=$OUT; mkdir -p $L
nvidia-smi topo -m > $L/topo.txt 2>&1
AOBENCH_TARGETS="aobench aobench_gpt" phase_build > $L/build.log 2>&1 || { tail -40 $L/build.log; exit 1; }
set +e
ensure_libs
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cat > /tmp/nccl_bw.py <<'PY'
import os, time, torch, torch.distributed as dist
dist.init_process_group("nccl"); r = dist.get_rank(); torch.cuda.set_device(r)
for mb in (25, 154, 497):
    x = torch.randn(mb * 2**20 // 4, device="cuda")
    for _ in range(3): dist.all_reduce(x, op=dist.ReduceOp.AVG)
    torch.cuda.synchronize(); t = time.perf_counter(); n = 10
    for _ in range(n): dist.all_reduce(x, op=dist.ReduceOp.AVG)
    torch.cuda.synchronize(); dt = (time.perf_counter() - t) / n
    if r == 0: print(f"all_reduce fp32 avg {mb} MiB: {dt*1e3:.3f} ms, busbw {mb*2**20/dt/1e9:.1f} GB/s", flush=True)
dist.destroy_process_group()
PY
timeout 60 torchrun --standalone --nproc_per_node=2 /tmp/nccl_bw.py > $L/nccl_bw.log 2>&1; cat $L/nccl_bw.log | grep all_reduce
data=data/ddp/wiki_train.bin
common=(--set model.plugin=gpt --set model.flavour=small --set data.train=$data --set data.val= --set data.tokenizer=gpt2
  --set train.max_iters=100 --set train.warmup_iters=20 --set train.lr_decay_iters=100 --set train.log_interval=10
  --set train.eval_interval=0 --set train.checkpoint_interval=0 --set train.batch_size=16)
rate() { python3 - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if "throughput/tok_s" in l]
r = [x["throughput/tok_s"] for x in rows if x["step"] > 30]
print(f"{sum(r)/len(r)/1e3:.1f} K tok/s (steps 40-100: {' '.join(f'{v/1e3:.1f}' for v in r)})")
PY
}
run1() { local n=$1; shift; env "$@" timeout 90 build/aobench train "${common[@]}" --set train.out_dir=runs/ab/$n > $L/$n.log 2>&1; echo "$n [$*]: $(rate runs/ab/$n)" | tee -a $L/summary.txt; }
run2() { local n=$1; shift; env "$@" timeout 90 torchrun --standalone --nproc_per_node=2 --no-python build/aobench train "${common[@]}" --set train.out_dir=runs/ab/$n > $L/$n.log 2>&1; echo "$n [$*]: $(rate runs/ab/$n)" | tee -a $L/summary.txt; }
run1 g1 X=1
run2 g2_zero AOBENCH_DDP_AB=zero
run2 g2_copy X=1
run2 g2_nocomm AOBENCH_DDP_AB=nocomm
run2 g2_b50 AOBENCH_DDP_BUCKET_MB=50
run2 g2_b10 AOBENCH_DDP_BUCKET_MB=10
run2 g2_carve16 AOBENCH_DDP_CARVEOUT=16 TORCH_BLAS_PREFER_CUBLASLT=1
run1 g1_carve16 AOBENCH_DDP_CARVEOUT=16 TORCH_BLAS_PREFER_CUBLASLT=1
run1 g1_again X=1
run2 g2_copy_again X=1
