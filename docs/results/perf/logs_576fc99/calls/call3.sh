#!/usr/bin/env bash
# Call 3, the same machine as call 2: Hugging Face generate (static cache + compile) beside the GPT's decode, the floors
# (`aobench speed`), our SEDD at 256 and 1 024 steps beside AO-GPT, the compiled plain-PyTorch DDiT step beside
# our SEDD's; the summary of both calls.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/tmp/aobench-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
t0=$SECONDS; d=$OUT/genspeed
GENSPEED_SPECS="gpt:1024:3 ao_gpt:256:3 sedd:256:1 sedd:1024:1" GENSPEED_SWEEP=0 GENSPEED_PEERS=none \
  timeout 200 scripts/gpu_check.sh genspeed > $OUT/genspeed2.log 2>&1; echo "samples at $((SECONDS-t0)) s"
timeout 200 python3 bench/peers/hf_generate.py --settings static_compile --out $d/peer_hf_generate.json 2>&1 | tail -n 12 \
  | tee $d/peer_hf_generate.log; echo "hf at $((SECONDS-t0)) s"
for spec in 'gpt:[1024]:3' 'ao_gpt:[256,1024]:2'; do IFS=: read -r plugin steps reps <<< "$spec"
  timeout 80 build/aobench speed --set model.plugin=$plugin --set model.flavour=small --set "speed.steps=$steps" \
    --set speed.batch_size=32 --set speed.length=1024 --set speed.repeats=$reps --set speed.warmup=1 \
    --out $d/speed_$plugin.json 2>&1 | tail -n 8 | tee $d/speed_$plugin.log
done; echo "speed at $((SECONDS-t0)) s"
(( SECONDS - t0 < 470 )) && timeout 100 python3 bench/peers/sedd_step.py --out $d/peer_sedd_step.json 2>&1 | tail -n 5 \
  | tee $d/peer_sedd_step.log
python3 bench/peers/genspeed_summary.py $d | tee $d/summary.md
echo "done at $((SECONDS-t0)) s"
tar czf $R/call3.tgz -C /tmp o; true
