#!/usr/bin/env bash
# Call 2 (2026-12-06), the same warm H100 as call 1 (its build kept): the peers beside our samples.
set -o pipefail
O=/tmp/o2; rm -rf $O; mkdir -p $O; T0=$SECONDS
pack() { tar czf "$OUT/call2.tgz" -C /tmp o2; }
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu
sample() {  # NAME PLUGIN STEPS REPS
  local name=$1 p=$2 steps=$3 reps=$4
  AOBENCH_BENCH_PLUGIN=$p AOBENCH_BENCH_FLAVOUR=small AOBENCH_BENCH_BATCH=32 AOBENCH_BENCH_STEPS=$steps \
    timeout 150 build/aobench_bench --benchmark_filter=PluginSample --benchmark_repetitions=$reps \
    --benchmark_out=$O/sample_$name.json --benchmark_out_format=json > $O/sample_$name.log 2>&1
  echo "$name: $(grep -E '^BM_' $O/sample_$name.log | grep -v -E '_(mean|median|stddev|cv)' | awk '{printf "%s ", $2}') at $((SECONDS-T0)) s"
}
sample gpt_r3 gpt 1024 3; sample ao_gpt_r3 ao_gpt 1024 3; sample ao_gpt_256 ao_gpt 256 3; sample sedd_256 sedd 256 1; pack
timeout 280 python3 bench/peers/hf_generate.py --settings static_compile --out $O/peer_hf_generate.json 2>&1 | tail -n 30 | tee $O/peer_hf_generate.log
pack; echo "hf done at $((SECONDS-T0)) s"
sample gpt_r4 gpt 1024 3; sample ao_gpt_r4 ao_gpt 1024 3; pack
(( SECONDS - T0 < 480 )) && timeout 60 python3 bench/peers/sedd_step.py --out $O/peer_sedd_step.json 2>&1 | tail -n 20 | tee $O/peer_sedd_step.log
echo "end at $((SECONDS-T0)) s"; pack
