#!/usr/bin/env bash
# Call 3: 80b2191 built without tests; training beside nanoGPT + compile, exact evaluation beside its compiled
# forward + per-token cross-entropy (scripts/gpu_check.sh trainspeed, budget TS_BUDGET).
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=OFF AOBENCH_TARGETS="aobench aobench_bench aobench_gpt aobench_ao_gpt aobench_sedd aobench_sigma_gpt aobench_radd" \
  scripts/gpu_check.sh build > $OUT/build.log 2>&1; echo "build rc $? at $((SECONDS-t0)) s"; grep -E "error" $OUT/build.log | head
TS_BUDGET=${TS_BUDGET:-290} timeout $((590 - (SECONDS - t0))) scripts/gpu_check.sh trainspeed > $OUT/trainspeed_run.log 2>&1
echo "trainspeed rc $? at $((SECONDS-t0)) s"
cat $OUT/trainspeed.md; cat $OUT/bench_peak.log; tail -5 $OUT/eval_throughput.log; cat $OUT/peer_eval.jsonl
echo "done at $((SECONDS-t0)) s"
tar czf $R/call3.tgz -C /tmp o; true
