#!/usr/bin/env bash
# Call A: build with the tests, the GPU tests, an MPS smoke (2 runs, 100 steps), the AO-GPT / GPT pairs.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{ command -v nvidia-cuda-mps-control; ls /usr/local/nvidia/bin 2>&1; ls /usr/bin | grep -i mps; nvidia-smi --query-gpu=name,compute_mode --format=csv; } > $OUT/mps_probe.txt 2>&1
cat $OUT/mps_probe.txt
scripts/gpu_check.sh build kernels > $OUT/build_kernels.log 2>&1; echo "build kernels rc $?"
grep -E "tests passed|tests failed|Failed|\*\*\*" $OUT/build_kernels.log | tail -5
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-} AOBENCH_DATA_DIR=$PWD/data
ctest --test-dir build -R "GpuSharing|Experiment.GpuSharing" --output-on-failure > $OUT/gpu_sharing_tests.log 2>&1; echo "gpu_sharing tests rc $?"; tail -3 $OUT/gpu_sharing_tests.log
timeout -s INT -k 20 150 build/aobench run configs/experiments/gpu_packing.json --set seeds=2 --set runs_per_device=2 --set gpu_sharing=mps \
  --set train.max_iters=100 --set train.lr_decay_iters=100 --set train.warmup_iters=10 --set train.eval_interval=50 \
  --set train.checkpoint_interval=100 > $OUT/mps_smoke.log 2>&1; echo "mps smoke rc $?"
grep -E "^run: (GPU|[0-9]+ runs)|error|HINT" $OUT/mps_smoke.log | head; grep -h "^model \|^done" runs/gpu_packing/logs/*.log
cp -r runs/gpu_packing/logs $OUT/mps_smoke_logs 2>/dev/null; ls /tmp/aobench-mps-* 2>&1 | head -3; pgrep -a nvidia-cuda-mps || echo "no mps process left"
rm -rf runs/gpu_packing
AO_PAIRS=3 scripts/gpu_check.sh aopairs > $OUT/aopairs.log 2>&1; echo "aopairs rc $?"; cat $OUT/ao_ratio.txt
tar czf $R/callA.tgz -C /tmp o; cp $OUT/ao_ratio.txt $OUT/mps_probe.txt $R/ 2>/dev/null; true
