#!/usr/bin/env bash
# Call B: the packing table, N = 1, 4, 8, 12 in turns and through MPS.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
scripts/gpu_check.sh pack 2>&1 | tee $OUT/pack.log; echo "pack rc $?"
cp $OUT/pack.md $OUT/pack_runs.tgz $OUT/pack.log $R/ 2>/dev/null; true
