#!/usr/bin/env bash
# 4 × H200: build, the data-parallel check on 4 ranks (gpu_ddp_check.sh), the ddp phase on 4 GPUs when the
# build left time for it. Every output in one archive ($OUT/c1.tgz).
source scripts/gpu_check.sh; set +e
L=$OUT/c1; mkdir -p $L; OUT=$L
nvidia-smi topo -m > $L/topo.txt 2>&1
AOBENCH_TARGETS="aobench aobench_gpt" phase_build > $L/build.log 2>&1 || { tail -40 $L/build.log; exit 1; }
set +e
echo "build done at $SECONDS s"
ensure_libs
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p runs/ddp
$A prepare --format text --input ../shared/data/train/wiki_train_00.txt.xz --tokenizer gpt2 \
  --vocab-dir ../shared/data/gpt2 --packing none --window 1024 --output runs/ddp/wiki_train.bin 2>&1 | tail -1
$A prepare --format text --input ../shared/data/train/wiki_val.txt.xz --tokenizer gpt2 \
  --vocab-dir ../shared/data/gpt2 --packing none --window 1024 --output runs/ddp/wiki_val.bin 2>&1 | tail -1
echo "data done at $SECONDS s"
AOBENCH_DDP_PROCS=4 timeout 200 bash scripts/gpu_ddp_check.sh > $L/ddp_check4.log 2>&1; echo "ddp_check (4 ranks) rc=$?"
grep -E "ranks in sync|captured vs|gpu_ddp_check|FAIL|refused|rror" $L/ddp_check4.log | tail -12
echo "check done at $SECONDS s"
if (( SECONDS < 200 )); then
  DDP_GPUS=4 DDP_SEEDS="1337 7 42 123" phase_ddp > $L/phase_ddp4.out 2>&1; echo "phase_ddp (4) done at $SECONDS s"
  cat $L/phase_ddp4.out
fi
d=runs/ddp
for f in $d/*/metrics.jsonl $d/*/results.json $d/*/config.resolved.json; do [[ -e $f ]] && cp --parents "$f" $L/; done
tar czf $OUT/../c1.tgz -C $OUT/.. c1 && rm -rf $L
