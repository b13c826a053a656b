#!/usr/bin/env python3
"""The AO-GPT training-speed verdict of `AO_PAIRS=N scripts/gpu_check.sh trainspeed` from its run folders (stdout).

Usage: ao_ratio.py RUNS_DIR PAIRS [TARGET]

RUNS_DIR holds gpt_b16_<i> and ao_gpt_b16_<i> for i = 1 … PAIRS, trained alternately on one GPU. A run's rate
is the mean of its tok/s logged after step 30; each pair's ratio is AO-GPT over GPT, and the verdict compares
the ratio of the means with TARGET (default 0.9, the issue's "AO-GPT keeps ≥ 0.9× of the GPT"). Exit status 1
when it falls short, 2 when a run has no rates to judge (it failed or stopped early: see its log).
"""
import sys

import ddp_table  # its rate(): the mean tok/s logged after step 30, as every speed table here reads it


def fail(message):
    print("ao_ratio: " + message, file=sys.stderr)
    sys.exit(2)


def rate(run):
    try:
        return ddp_table.rate(run)
    except OSError as e:
        fail(f"{run}: no metrics ({e.strerror}); the run failed or never started, see its log")
    except ZeroDivisionError:
        fail(f"{run}/metrics.jsonl logs no tok/s after step 30; the run stopped early, see its log")


def main():
    runs, pairs = sys.argv[1], int(sys.argv[2])
    target = float(sys.argv[3]) if len(sys.argv) > 3 else 0.9
    g = [rate(f"{runs}/gpt_b16_{i}") for i in range(1, pairs + 1)]
    a = [rate(f"{runs}/ao_gpt_b16_{i}") for i in range(1, pairs + 1)]
    print("gpt small b16 tok/s (after step 30):", " ".join(f"{x / 1e3:.1f} K" for x in g),
          f"mean {sum(g) / pairs / 1e3:.1f} K")
    print("ao_gpt small b16 tok/s (after step 30):", " ".join(f"{x / 1e3:.1f} K" for x in a),
          f"mean {sum(a) / pairs / 1e3:.1f} K")
    ratio = sum(a) / sum(g)
    print("pairwise ratios:", " ".join(f"{y / x:.3f}" for x, y in zip(g, a)), f"; ratio of means {ratio:.3f}")
    print(f"verdict: AO-GPT at {ratio:.3f}× the GPT, target ≥ {target}: {'met' if ratio >= target else 'NOT met'}")
    return 0 if ratio >= target else 1


if __name__ == "__main__":
    sys.exit(main())
