#!/usr/bin/env bash
# Call 3: the tile rule against the one before (AOBENCH_TMP_OLD_TILES=1: 1 or 2 column tiles, no split; the
# patch in call3_old_tiles_switch.patch, not committed), alternating, in one build; our SEDD, Hugging Face
# generate, the floors of `aobench speed`.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=OFF AOBENCH_TARGETS="aobench aobench_bench aobench_gpt aobench_ao_gpt aobench_sedd" \
  scripts/gpu_check.sh build > $OUT/build.log 2>&1; echo "build rc $? at $((SECONDS-t0)) s"; grep -E "error" $OUT/build.log | head
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
for rep in 1 2; do for old in "" 1; do
  g=/tmp/o/gs_${rep}_old$old; mkdir -p $g
  OUT=$g AOBENCH_TMP_OLD_TILES=$old GENSPEED_SPECS="gpt:1024:3 ao_gpt:1024:3" GENSPEED_SWEEP=0 GENSPEED_PEERS=none \
    timeout 100 scripts/gpu_check.sh genspeed > $g/genspeed.log 2>&1
  echo "rep $rep old=$old"; grep "aobench" $g/genspeed/summary.md; echo "at $((SECONDS-t0)) s"
done; done
d=$OUT/genspeed; mkdir -p $d
GENSPEED_SPECS="sedd:1024:1" GENSPEED_SWEEP=0 GENSPEED_PEERS=none timeout 80 scripts/gpu_check.sh genspeed > $OUT/genspeed_sedd.log 2>&1
echo "sedd at $((SECONDS-t0)) s"
(( SECONDS - t0 < 400 )) && timeout 100 python3 bench/peers/hf_generate.py --settings static_compile --out $d/peer_hf_generate.json 2>&1 | tail -n 12 \
  | tee $d/peer_hf_generate.log; echo "hf at $((SECONDS-t0)) s"
(( SECONDS - t0 < 500 )) && timeout 50 build/aobench speed --set model.plugin=gpt --set model.flavour=small --set "speed.steps=[1024]" \
    --set speed.batch_size=32 --set speed.length=1024 --set speed.repeats=3 --set speed.warmup=1 \
    --out $d/speed_gpt.json 2>&1 | tail -n 8 | tee $d/speed_gpt.log
cp /tmp/o/gs_1_old/genspeed/bench_sample_*.json $d/ 2>/dev/null
python3 bench/peers/genspeed_summary.py $d | tee $d/summary.md
echo "done at $((SECONDS-t0)) s"
tar czf $R/call3.tgz -C /tmp o; true
