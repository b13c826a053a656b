#!/usr/bin/env bash
# One H200: every adaLN table of the AO-GPT from one GEMM with the biases riding it, the QK-norm forward
# loading q, k and v before its reductions. GPU tests of the changed code; the replayed-step profiles of
# the small GPT and AO-GPT; then three GPT and three AO-GPT `aobench train` runs alternating (B = 16).
cd "$(dirname "${BASH_SOURCE[0]}")/../../../../.."
source scripts/gpu_check.sh; set +e
L=$OUT/c2; mkdir -p $L; OUT=$L
SECONDS=0
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=ON \
  AOBENCH_TARGETS="aobench aobench_gpt aobench_ao_gpt aobench_bench test_plugin_common test_plugin_ao_gpt" \
  phase_build > $L/build.log 2>&1 || { tail -40 $L/build.log; exit 1; }
set +e; ensure_libs
echo "build: $SECONDS s"
build/test_plugin_common --gtest_filter='FusedOps.*:FusedNorms.*' > $L/test_common.log 2>&1; tail -3 $L/test_common.log
build/test_plugin_ao_gpt > $L/test_ao_gpt.log 2>&1; tail -3 $L/test_ao_gpt.log
grep -E "^\[  FAILED|Failure" $L/test_*.log | head
for m in gpt ao_gpt; do
  AOBENCH_BENCH_PLUGIN=$m AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_PROFILE=1 AOBENCH_BENCH_PROFILE_TOP=200 \
    build/aobench_bench --benchmark_filter=PluginTrainGraphStep 2>&1 | grep -v "^\*\*\*WARNING" > $L/bench_$m.log
  grep -E "profile|median" $L/bench_$m.log
done
echo "tests and profiles: $SECONDS s"
SECONDS=0; TS_BUDGET=300
TS_DATA=runs/trainspeed/random_tokens.bin TS_LOGS=runs/trainspeed/logs
rm -rf runs/trainspeed; mkdir -p $TS_LOGS; random_tokens $TS_DATA 20000000
for i in 1 2 3; do
  speed_run gpt_b16_$i gpt small 16 100
  speed_run ao_gpt_b16_$i ao_gpt small 16 100
done
echo "speed runs: $SECONDS s"
python3 - <<'PY' | tee $L/ratio.txt
import json
def rate(r):
    v = [m["throughput/tok_s"] for m in map(json.loads, open(f"runs/trainspeed/{r}/metrics.jsonl")) if "throughput/tok_s" in m and m["step"] > 30]
    return sum(v) / len(v)
g = [rate(f"gpt_b16_{i}") for i in (1, 2, 3)]
a = [rate(f"ao_gpt_b16_{i}") for i in (1, 2, 3)]
print("gpt small b16 tok/s (steps 40-100):", " ".join(f"{x/1e3:.1f} K" for x in g), f"mean {sum(g)/3/1e3:.1f} K")
print("ao_gpt small b16 tok/s (steps 40-100):", " ".join(f"{x/1e3:.1f} K" for x in a), f"mean {sum(a)/3/1e3:.1f} K")
print("pairwise ratios:", " ".join(f"{y/x:.3f}" for x, y in zip(g, a)), f"; ratio of means {sum(a)/sum(g):.3f}")
PY
cp -r $TS_LOGS $L/ts_logs
for r in runs/trainspeed/*_b16_*; do mkdir -p $L/runs/$(basename $r); cp $r/metrics.jsonl $r/config.resolved.json $L/runs/$(basename $r)/ 2>/dev/null; done
