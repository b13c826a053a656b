#!/usr/bin/env bash
# Regression benchmarking against the stored baseline (bench/baseline/): re-runs the CPU micro-benchmarks and
# the debug tier of every experiment file, then gates both with `aobench compare`:
#   quality  every experiment's report/results.json at tier=debug vs bench/baseline/debug_<experiment>.json,
#            lower/higher-is-better per metric as recorded, threshold AOBENCH_REGRESS_QUALITY (default 0.02);
#   speed    Google Benchmark JSON (median of AOBENCH_REGRESS_REPS repetitions, default 5) vs
#            bench/baseline/bench_{cpu,tokenizer}.json, lower is better: divided by the machine factor (the
#            median new / baseline ratio of the BM_Cpu* benchmarks) at threshold AOBENCH_REGRESS_SPEED
#            (default 0.5: +50 %), and as measured at AOBENCH_REGRESS_SPEED_RAW (default 3.0: +300 %).
# Usage: scripts/regress.sh [--update] [--quality-only]   (--update stores this run as the new baseline)
# Needs build/ (scripts/setup.sh) and the fortunes corpus; the tokenizer benchmark needs ../shared/data.
# Writes everything under ${AOBENCH_REGRESS_DIR:-runs/regress}; exit 1 on a regression, 2/3 on a gate error.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
A=$ROOT/build/aobench
B=$ROOT/build/aobench_bench
OUT=${AOBENCH_REGRESS_DIR:-runs/regress}
BASE=bench/baseline
Q=${AOBENCH_REGRESS_QUALITY:-0.02}
S=${AOBENCH_REGRESS_SPEED:-0.5}
R=${AOBENCH_REGRESS_SPEED_RAW:-3.0}
update=0 quality_only=0
for arg in "$@"; do
  case "$arg" in
    --update) update=1 ;;
    --quality-only) quality_only=1 ;;
    *) echo "regress: unknown argument '$arg' (usage: scripts/regress.sh [--update] [--quality-only])" >&2; exit 2 ;;
  esac
done
[[ -x $A ]] || { echo "regress: $A missing; run scripts/setup.sh first" >&2; exit 2; }
mkdir -p "$OUT"
failed=0
gate() {  # gate NEW BASELINE THRESHOLD [compare args...]
  local new=$1 base=$2 thr=$3; shift 3
  if [[ $update == 1 ]]; then
    cp "$new" "$base"
    echo "regress: stored $base"
    return
  fi
  [[ -f $base ]] || { echo "regress: no baseline $base; store one with scripts/regress.sh --update" >&2; exit 2; }
  echo "regress: $new vs $base (threshold $thr)"
  local rc=0
  "$A" compare "$base" "$new" --threshold "$thr" "$@" || rc=$?
  if [[ $rc == 1 ]]; then failed=1; elif [[ $rc != 0 ]]; then exit "$rc"; fi
}

# Quality: the debug tier of every experiment file, run from a scratch copy of configs/ so runs/ stays clean.
# AOBENCH_REGRESS_DEBUG_DIR: a folder where this build already ran them (the ctest ExperimentsDebugTier test
# with AOBENCH_KEEP_DEBUG_TIER, as .ci/run does): `aobench run` skips the finished jobs and re-reports.
if [[ -n "${AOBENCH_REGRESS_DEBUG_DIR:-}" ]]; then
  work=$AOBENCH_REGRESS_DEBUG_DIR
  [[ -d $work/configs ]] || { echo "regress: AOBENCH_REGRESS_DEBUG_DIR=$work has no configs/ (not a debug-tier run)" >&2; exit 2; }
  diff -r configs "$work/configs" >/dev/null ||
    { echo "regress: $work/configs differs from configs/; its runs are not this checkout's" >&2; exit 2; }
else
  work=$OUT/debug
  rm -rf "$work" && mkdir -p "$work" && cp -r configs "$work/"
fi
for f in configs/experiments/*.json; do
  name=$(basename "$f" .json)
  (cd "$work" && "$A" run "configs/experiments/$name.json" --set tier=debug > "$name.log" 2>&1) ||
    { echo "regress: $name at tier=debug failed; see $work/$name.log" >&2; exit 2; }
  out_dir=$(python3 -c 'import json,os,sys; e=json.load(open(sys.argv[1])); d=e["tiers"]["debug"]
print(d.get("out_dir") or json.load(open(os.path.join(os.path.dirname(sys.argv[1]), e["base"])))["tiers"]["debug"]["out_dir"])' "$f")
  cp "$work/$out_dir/report/results.json" "$OUT/debug_$name.json"
  # Likelihoods where the experiment evaluates, generation perplexity where it samples (not its timings), as
  # the baseline holds them (a report of an out_dir shared with an experiment run later may hold more).
  ref=$BASE/debug_$name.json
  [[ $update == 1 || ! -f $ref ]] && ref=$OUT/debug_$name.json
  metrics=()
  grep -q '/nll' "$ref" && metrics+=('nll*' 'ppl*')
  grep -q '/genppl"' "$ref" && metrics+=('genppl')
  (( ${#metrics[@]} )) || { echo "regress: $name at tier=debug has no metric to gate" >&2; exit 2; }
  metrics=$(IFS=,; echo "${metrics[*]}")
  gate "$OUT/debug_$name.json" "$BASE/debug_$name.json" "$Q" --metrics "$metrics"
done

if [[ $quality_only == 0 ]]; then
  [[ -x $B ]] || { echo "regress: $B missing (AOBENCH_BUILD_BENCH=ON)" >&2; exit 2; }
  reps=${AOBENCH_REGRESS_REPS:-5}
  data=${AOBENCH_DATA_DIR:-$ROOT/../shared/data}
  tokenizer=0
  measure_speed() {
    # Data loader, and per plugin at debug size: one training step, one evaluation forward, one generation
    # (bench/cpu_regress_bench.cpp).
    # One thread: the gate compares the CPU time of the benchmark thread (cpu_ms), which other processes on
    # a shared machine move far less than wall time (README: measured spreads).
    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 "$B" --benchmark_filter='BM_Cpu' --benchmark_repetitions="$reps" \
      --benchmark_out="$OUT/bench_cpu.json" --benchmark_out_format=json > "$OUT/bench_cpu.log"
    # GPT-2 tokenizer and WikiText detokenizer (prepare_bench.cpp): they need the shared data (gpt2/, wikitext/).
    if [[ -d $data/gpt2 && -d $data/wikitext ]]; then
      AOBENCH_DATA_DIR=$data "$B" --benchmark_filter='BM_Gpt2EncodeOneThread|BM_WikitextDetokenize' \
        --benchmark_repetitions="$reps" --benchmark_out="$OUT/bench_tokenizer.json" --benchmark_out_format=json \
        > "$OUT/bench_tokenizer.log"
      tokenizer=1
    else
      echo "regress: $data/gpt2 absent; tokenizer benchmarks skipped"
    fi
  }
  # Another machine, or this one on another day, runs every benchmark faster or slower alike (seen: all 16
  # BM_Cpu* medians +26 % … +106 % on one slow day, code unchanged). The machine factor is the median over
  # the BM_Cpu* benchmarks of new / baseline median CPU time; each of them is gated at $S after dividing by it
  # (one part of the code slower than the rest), and unscaled at $R (everything slower alike). The tokenizer
  # benchmarks (string code, not tensor code) do not follow that factor from one CPU model to another (seen
  # 2026-11-30: the unchanged WikiText detokenizer at 1.4–2.1× its baseline, two modes 48 / 62 ms between
  # processes, on a host whose BM_Cpu* factor was 0.90): they are gated unscaled at $R only.
  speed_gates() {
    python3 - "$OUT/bench_cpu.json" "$BASE/bench_cpu.json" "$OUT" <<'PY'
import json, os, statistics, sys
new_path, base_path, out = sys.argv[1:]
def medians(path):
    return {b["run_name"]: b["cpu_time"] for b in json.load(open(path))["benchmarks"]
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median"}
new, base = medians(new_path), medians(base_path)
ratios = [new[k] / base[k] for k in new if k in base and base[k] > 0]
if not ratios:
    sys.exit("regress: no BM_Cpu* median common to " + new_path + " and " + base_path)
factor = statistics.median(ratios)
print(f"regress: machine factor {factor:.3f} (median of {len(ratios)} BM_Cpu* ratios new / baseline)")
for name in ("bench_cpu",):
    path = os.path.join(out, name + ".json")
    if not os.path.exists(path):
        continue
    j = json.load(open(path))
    for b in j["benchmarks"]:
        for key in ("cpu_time", "real_time"):
            if key in b:
                b[key] /= factor
    j.setdefault("context", {})["aobench_machine_factor"] = factor
    json.dump(j, open(os.path.join(out, name + "_scaled.json"), "w"), indent=1)
PY
    gate "$OUT/bench_cpu_scaled.json" "$BASE/bench_cpu.json" "$S" --metrics cpu_ms
    gate "$OUT/bench_cpu.json" "$BASE/bench_cpu.json" "$R" --metrics cpu_ms
    if [[ $tokenizer == 1 ]]; then gate "$OUT/bench_tokenizer.json" "$BASE/bench_tokenizer.json" "$R" --metrics cpu_ms; fi
  }
  measure_speed
  if [[ $update == 1 ]]; then
    gate "$OUT/bench_cpu.json" "$BASE/bench_cpu.json" "$S"
    if [[ $tokenizer == 1 ]]; then gate "$OUT/bench_tokenizer.json" "$BASE/bench_tokenizer.json" "$S"; fi
  else
    # A speed gate that fails is measured once more: a slowdown of the code fails again, a noisy moment of a
    # shared machine (seen: one 0.03 ms benchmark's median of 5 at 2.5× in one run, 1.2× in the next) does not.
    quality_failed=$failed
    failed=0
    speed_gates
    if [[ $failed == 1 ]]; then
      echo "regress: a speed gate failed; measuring every benchmark once more to confirm it"
      failed=0
      measure_speed
      speed_gates
    fi
    if [[ $quality_failed == 1 ]]; then failed=1; fi
  fi
fi
if [[ $failed == 1 ]]; then
  echo "regress: REGRESSION (quality threshold $Q, speed threshold $S scaled, $R unscaled)"
  exit 1
fi
echo "regress: no regression (quality threshold $Q, speed threshold $S scaled, $R unscaled)"
