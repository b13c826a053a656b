#!/usr/bin/env bash
# Call 4, a fresh machine (call 3's machine had gone cold: it ran only the peers): the code of call 2, built
# without tests; whole samples beside Hugging Face generate and our SEDD, the floors, the DDiT step.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0
t0=$SECONDS; d=$OUT/genspeed
AOBENCH_CMAKE_ARGS=-DAOBENCH_BUILD_TESTS=OFF AOBENCH_TARGETS="aobench aobench_bench aobench_gpt aobench_ao_gpt aobench_sedd" \
  scripts/gpu_check.sh build > $OUT/build.log 2>&1; echo "build rc $? at $((SECONDS-t0)) s"; grep -E "error" $OUT/build.log | head
export LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GENSPEED_SPECS="gpt:1024:3 ao_gpt:1024:3 sedd:1024:1 ao_gpt:256:3 sedd:256:1" GENSPEED_SWEEP=0 GENSPEED_PEERS=none \
  timeout 170 scripts/gpu_check.sh genspeed > $OUT/genspeed.log 2>&1; echo "samples at $((SECONDS-t0)) s"
timeout 90 python3 bench/peers/hf_generate.py --settings static_compile --out $d/peer_hf_generate.json 2>&1 | tail -n 12 \
  | tee $d/peer_hf_generate.log; echo "hf at $((SECONDS-t0)) s"
for spec in 'gpt:[1024]:3' 'ao_gpt:[256,1024]:2'; do IFS=: read -r plugin steps reps <<< "$spec"
  (( SECONDS - t0 < 440 )) && timeout 50 build/aobench speed --set model.plugin=$plugin --set model.flavour=small --set "speed.steps=$steps" \
    --set speed.batch_size=32 --set speed.length=1024 --set speed.repeats=$reps --set speed.warmup=1 \
    --out $d/speed_$plugin.json 2>&1 | tail -n 8 | tee $d/speed_$plugin.log
done; echo "speed at $((SECONDS-t0)) s"
(( SECONDS - t0 < 450 )) && timeout 45 python3 bench/peers/sedd_step.py --out $d/peer_sedd_step.json 2>&1 | tail -n 3 \
  | tee $d/peer_sedd_step.log
python3 bench/peers/genspeed_summary.py $d | tee $d/summary.md
echo "done at $((SECONDS-t0)) s"
tar czf $R/call4.tgz -C /tmp o; true
