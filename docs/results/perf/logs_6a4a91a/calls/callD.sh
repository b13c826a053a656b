#!/usr/bin/env bash
# Call D: the next call on the same machine, 16 and 21 runs through MPS.
export R=$OUT OUT=/tmp/o2; mkdir -p $OUT; PACK_RUNS="16 21" PACK_SHARING="mps" scripts/gpu_check.sh pack > $OUT/pack.log 2>&1; echo rc $?; cat $OUT/pack.md; cp $OUT/pack.md $R/pack_16_21.md; cp $OUT/pack_runs.tgz $R/pack_runs_16_21.tgz; cp $OUT/pack.log $R/pack_16_21.log
