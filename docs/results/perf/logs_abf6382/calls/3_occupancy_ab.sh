#!/usr/bin/env bash
# One H200, an A/B of two kernels' register caps (temporary switches of this call's tree, not kept):
# AOBENCH_EXP_RSF = minimum blocks per SM of the grouped rms_step forward (0: none, 94 registers, 3 blocks
# of 192 threads; 6: 56 registers; 7: 40 registers, 8 blocks, all 1025 blocks in one wave),
# AOBENCH_EXP_QKB = the same for the QK-norm backward (0: none, 115 registers, 2 blocks of 256; 3: 80).
# Replayed-step profiles of the small AO-GPT, then `aobench train` runs alternating with the GPT.
cd "$(dirname "${BASH_SOURCE[0]}")/../../../../.."
source scripts/gpu_check.sh; set +e
L=$OUT/c3; mkdir -p $L; OUT=$L
SECONDS=0
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=OFF AOBENCH_TARGETS="aobench aobench_gpt aobench_ao_gpt aobench_bench" \
  phase_build > $L/build.log 2>&1 || { tail -40 $L/build.log; exit 1; }
set +e; ensure_libs
echo "build: $SECONDS s"
for v in "0 0" "6 0" "7 0" "0 3" "7 3"; do
  set -- $v
  AOBENCH_EXP_RSF=$1 AOBENCH_EXP_QKB=$2 AOBENCH_BENCH_PLUGIN=ao_gpt AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_PROFILE=1 \
    AOBENCH_BENCH_PROFILE_TOP=40 build/aobench_bench --benchmark_filter=PluginTrainGraphStep 2>&1 \
    | grep -v "^\*\*\*WARNING" > $L/bench_ao_gpt_rsf$1_qkb$2.log
  echo "RSF=$1 QKB=$2"; grep -E "rms_step_forward|qk_norm_backward|median" $L/bench_ao_gpt_rsf$1_qkb$2.log | cut -c1-160
done
echo "profiles: $SECONDS s"
SECONDS=0; TS_BUDGET=300
TS_DATA=runs/trainspeed/random_tokens.bin TS_LOGS=runs/trainspeed/logs
rm -rf runs/trainspeed; mkdir -p $TS_LOGS; random_tokens $TS_DATA 20000000
for i in 1 2; do
  speed_run gpt_b16_$i gpt small 16 100
  speed_run ao_gpt_b16_$i ao_gpt small 16 100
  export AOBENCH_EXP_RSF=7 AOBENCH_EXP_QKB=3; speed_run ao_gpt_caps_b16_$i ao_gpt small 16 100
  unset AOBENCH_EXP_RSF AOBENCH_EXP_QKB
done
echo "speed runs: $SECONDS s"
python3 - <<'PY' | tee $L/ratio.txt
import json
def rate(r):
    v = [m["throughput/tok_s"] for m in map(json.loads, open(f"runs/trainspeed/{r}/metrics.jsonl")) if "throughput/tok_s" in m and m["step"] > 30]
    return sum(v) / len(v)
for i in (1, 2):
    g, a, c = (rate(f"{m}_b16_{i}") for m in ("gpt", "ao_gpt", "ao_gpt_caps"))
    print(f"pair {i}: gpt {g/1e3:.1f} K, ao_gpt {a/1e3:.1f} K ({a/g:.3f}), ao_gpt with caps {c/1e3:.1f} K ({c/g:.3f})")
PY
cp -r $TS_LOGS $L/ts_logs
