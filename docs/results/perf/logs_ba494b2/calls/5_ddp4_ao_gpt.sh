#!/usr/bin/env bash
# 4 × H200 (a fresh machine): the ddp phase for the small AO-GPT (mixture orders) on 4 GPUs, four 1-GPU seeds.
source scripts/gpu_check.sh; set +e
L=$OUT/c5; mkdir -p $L; OUT=$L
AOBENCH_TARGETS="aobench aobench_ao_gpt" phase_build > $L/build.log 2>&1 || { tail -40 $L/build.log; exit 1; }
set +e
echo "build done at $SECONDS s"
ensure_libs
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
DDP_PLUGIN=ao_gpt DDP_GPUS=4 DDP_SEEDS="1337 7 42 123" phase_ddp > $L/phase_ddp4_ao_gpt.out 2>&1
echo "phase_ddp (ao_gpt, 4) done at $SECONDS s"
cat $L/phase_ddp4_ao_gpt.out
d=runs/ddp
for f in $d/*/metrics.jsonl $d/*/results.json $d/*/config.resolved.json; do [[ -e $f ]] && cp --parents "$f" $L/; done
tar czf $OUT/../c5.tgz --exclude=build.log -C $OUT/.. c5 && rm -rf $L
