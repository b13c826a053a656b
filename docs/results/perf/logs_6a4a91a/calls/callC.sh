#!/usr/bin/env bash
# Call C: generation speed beside HF generate (static cache + compile) and the compiled SEDD step; the floors.
R=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export GENSPEED_SPECS="gpt:1024:3 ao_gpt:1024:3 ao_gpt:256:2 sedd:256:1 sedd:1024:1" GENSPEED_HF_ARGS="--settings static_compile"
scripts/gpu_check.sh genspeed > $OUT/genspeed.log 2>&1; echo "genspeed rc $?"
cat $OUT/genspeed/summary.md; grep -h -E "floor|steps" $OUT/genspeed/speed_*.log | head -40
tar czf $R/genspeed.tgz -C /tmp o; cp $OUT/genspeed/summary.md $R/genspeed_summary.md 2>/dev/null; true
