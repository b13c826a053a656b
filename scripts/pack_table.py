#!/usr/bin/env python3
"""The packing table of `scripts/gpu_check.sh pack` (Markdown on stdout): N runs of gpu_packing.json on one GPU.

Usage: pack_table.py PACK_DIR STEPS TOKENS_PER_STEP

PACK_DIR holds one folder <N>_<sharing> per `aobench run` (its runs, each with metrics.jsonl; logs/<run>.log or,
for a run trained in the command itself, command.log, whose "model …" line says whether it trained under MPS) and
wall.txt, a line "<N> <sharing> <seconds>" per command. "per run" is the
median tok/s a run logged after step 300 (warm-up, graph capture and the first validation behind it), "sum" adds
the N runs' medians (all of them were running then), "end to end" is N × STEPS × TOKENS_PER_STEP over the whole
command's wall-clock time (start-up, capture, validations, the evaluation and the report included). Both are
set against N = 1. Exit status 2 when a folder lacks a run's rates (it failed: see its log).
"""
import json
import os
import statistics
import sys


def run_rates(run):
    with open(os.path.join(run, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r["throughput/tok_s"] for r in rows if "throughput/tok_s" in r and r["step"] > 300]


def under_mps(folder, run):
    """Whether the run's own log says its device was shared through MPS (its child log, else the command's)."""
    for log in (os.path.join(folder, "logs", run + ".log"), os.path.join(folder, "command.log")):
        if os.path.exists(log):
            with open(log, errors="replace") as f:
                return any(line.startswith("model ") and " (MPS);" in line for line in f)
    return False


def main():
    pack, steps, per_step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    walls = {}
    with open(os.path.join(pack, "wall.txt")) as f:
        for line in f:
            n, sharing, seconds = line.split()
            walls[(int(n), sharing)] = float(seconds)
    rows = []
    for (n, sharing), wall in sorted(walls.items()):
        folder = os.path.join(pack, f"{n}_{sharing}")
        if not os.path.isdir(folder):
            print(f"pack_table: no folder {folder}; the command failed, see its log", file=sys.stderr)
            sys.exit(2)
        runs = sorted(d for d in os.listdir(folder) if os.path.exists(os.path.join(folder, d, "metrics.jsonl")))
        medians = []
        for r in runs:
            rates = run_rates(os.path.join(folder, r))
            if not rates:
                print(f"pack_table: {folder}/{r} logged no tok/s after step 300; see its log", file=sys.stderr)
                sys.exit(2)
            medians.append(statistics.median(rates))
        if len(medians) != n:
            print(f"pack_table: {folder} has {len(medians)} runs, not {n}", file=sys.stderr)
            sys.exit(2)
        mps = sum(under_mps(folder, r) for r in runs)
        rows.append((n, sharing, medians, wall, mps))
    alone = [r for r in rows if r[0] == 1]
    base_sum = sum(alone[0][2]) if alone else None
    base_e2e = steps * per_step / alone[0][3] if alone else None
    print("| N runs | sharing | under MPS | per run (K tok/s, min–max) | sum (K tok/s) | vs one | wall-clock (s) "
          "| end to end (K tok/s) | vs one |")
    print("|---:|---|---:|---|---:|---:|---:|---:|---:|")
    for n, sharing, medians, wall, mps in rows:
        total, e2e = sum(medians), n * steps * per_step / wall
        spread = f"{min(medians) / 1e3:.1f}–{max(medians) / 1e3:.1f}" if n > 1 else f"{medians[0] / 1e3:.1f}"
        vs = f"{total / base_sum:.2f}×" if base_sum else "—"
        vs_e2e = f"{e2e / base_e2e:.2f}×" if base_e2e else "—"
        label = sharing if n > 1 else "alone"
        print(f"| {n} | {label} | {mps} of {n} | {spread} | {total / 1e3:.0f} | {vs} | {wall:.1f} | {e2e / 1e3:.0f} "
              f"| {vs_e2e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
