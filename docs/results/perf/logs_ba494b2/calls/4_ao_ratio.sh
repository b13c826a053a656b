#!/usr/bin/env bash
# One H200: small AO-GPT against small GPT at micro-batch 16, alternating, three runs each (the ratio of
# call 3 was 0.90 from one run each).
source scripts/gpu_check.sh; set +e
L=$OUT/c5; mkdir -p $L; OUT=$L
AOBENCH_TARGETS="aobench aobench_gpt aobench_ao_gpt" phase_build > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 1; }
set +e; ensure_libs
echo "build done at $SECONDS s"
SECONDS=0; TS_BUDGET=400
TS_DATA=runs/trainspeed/random_tokens.bin TS_LOGS=runs/trainspeed/logs
rm -rf runs/trainspeed; mkdir -p $TS_LOGS; random_tokens $TS_DATA 20000000
for i in 1 2 3; do
  speed_run gpt_b16_$i gpt small 16 100
  speed_run ao_gpt_b16_$i ao_gpt small 16 100
done
echo "speed runs: ${SECONDS} s"
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
tar czf $OUT/../c5.tgz --exclude=build.log -C $OUT/.. c5 && rm -rf $L
