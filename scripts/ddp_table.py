#!/usr/bin/env python3
"""The data-parallel verdicts of `scripts/gpu_check.sh ddp` from its run folders (Markdown on stdout).

Usage: ddp_table.py RUNS_DIR N

RUNS_DIR is the out_dir of configs/experiments/ddp_scaling.json at tier xN: rate_1gpu and curve_1gpu_seed<S>
(one per seed), trained by `aobench run`, beside rate_<N>gpu (and rate_<N>gpu_uncaptured) and curve_<N>gpu,
trained by torchrun (scripts/gpu_check.sh ddp). The plugin is rate_1gpu's.

Scaling: N-GPU tok/s over N × the 1-GPU tok/s at micro-batch 16 (means of the rates logged after step 30).
Loss curve: the per-step training losses, averaged over 20-step windows after warm-up, of the N-GPU run and
of 1-GPU runs (one per seed) at the same global batch. A 1-GPU seed equal to the N-GPU run's seed shares its
initialisation and data order, so it is left out of the comparison (it would make the check lenient). Two runs'
distance is the mean |difference| of their window means. Run-to-run tolerance is the leave-one-out spread of the
seeds: for each seed, its mean distance to the other seeds; the widest of those is the tolerance. The N-GPU
curve is within it when its mean distance to the seeds is no larger, i.e. it is no more of an outlier among the
1-GPU runs than the most outlying seed.
The final validation NLL (the whole validation file, the same windows for every run) is judged the same way.
"""
import glob
import json
import sys

WINDOW = 20


def metrics(run):
    with open(run + "/metrics.jsonl") as f:
        return [json.loads(line) for line in f]


def rate(run):
    r = [m["throughput/tok_s"] for m in metrics(run) if "throughput/tok_s" in m and m["step"] > 30]
    return sum(r) / len(r)


def windows(run, warmup):
    loss = {m["step"]: m["loss/train"] for m in metrics(run) if "loss/train" in m}
    last = max(loss)
    out = {}
    for lo in range(warmup + 1, last + 1, WINDOW):
        steps = [s for s in range(lo, lo + WINDOW) if s in loss]
        if len(steps) == WINDOW:
            out[lo + WINDOW - 1] = sum(loss[s] for s in steps) / WINDOW
    return out


def config(run):
    with open(run + "/config.resolved.json") as f:
        return json.load(f)


def val_nll(run):
    """The one `val/nll…` metric of the run's whole-file evaluation (its name depends on the eval mode)."""
    with open(run + "/results.json") as f:
        found = json.load(f)["runs"][run.rstrip("/").split("/")[-1]]["metrics"]
    keys = [k for k in found if k.startswith("val/nll")]
    if len(keys) != 1:
        sys.exit(f"ddp_table.py: {run}/results.json: expected one val/nll… metric, found {keys or list(found)}")
    return found[keys[0]]["value"]


def loo(values, dist):
    """Per seed: its mean distance to the other seeds."""
    keys = list(values)
    spread = {k: sum(dist(values[k], values[o]) for o in keys if o != k) / (len(keys) - 1) for k in keys}
    return spread


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    d, n = sys.argv[1].rstrip("/"), int(sys.argv[2])
    prefix = f"{d}/curve_1gpu_seed"
    seeds = sorted((p[len(prefix):] for p in glob.glob(prefix + "*")), key=int)
    if len(seeds) < 3:
        sys.exit(f"ddp_table.py: the run-to-run spread needs at least 3 seeds, {d} has {len(seeds)}")
    one, many = f"{d}/rate_1gpu", f"{d}/rate_{n}gpu"
    m = config(one)["model"]["plugin"]
    r1, rn = rate(one), rate(many)
    print(f"## {m}, {n} GPUs\n")
    print("| run | tok/s (mean of logged steps > 30) | per GPU | efficiency |\n|---|---:|---:|---:|")
    print(f"| 1 GPU, micro-batch 16 | {r1 / 1e3:.1f} K | {r1 / 1e3:.1f} K | (reference) |")
    print(f"| {n} GPUs, micro-batch 16 each | {rn / 1e3:.1f} K | {rn / n / 1e3:.1f} K | **{100 * rn / (n * r1):.1f} %** |")
    try:
        ru = rate(f"{d}/rate_{n}gpu_uncaptured")
        print(f"| {n} GPUs, uncaptured (AOBENCH_CUDA_GRAPHS=0) | {ru / 1e3:.1f} K | {ru / n / 1e3:.1f} K | "
              f"{100 * ru / (n * r1):.1f} % |")
    except OSError:
        pass
    print(f"\nscaling efficiency {100 * rn / (n * r1):.1f} % of linear ({'≥' if rn >= 0.9 * n * r1 else '<'} 90 %)\n")

    cand = f"{d}/curve_{n}gpu"
    train = config(cand)["train"]
    warmup, cand_seed = train["warmup_iters"], str(train["seed"])
    if cand_seed in seeds:
        print(f"1 GPU seed {cand_seed} left out: the {n}-GPU run has the same seed (initialisation, data order)\n")
        seeds = [s for s in seeds if s != cand_seed]
    if len(seeds) < 3:
        sys.exit(f"ddp_table.py: the run-to-run spread needs at least 3 seeds other than the {n}-GPU run's {cand_seed}")
    runs = {f"1 GPU seed {s}": f"{prefix}{s}" for s in seeds}
    curves = {k: windows(r, warmup) for k, r in runs.items()}
    cc = windows(cand, warmup)
    ends = sorted(set(cc).intersection(*[set(c) for c in curves.values()]))
    if not ends:
        sys.exit("ddp_table.py: no complete 20-step window shared by every curve")

    def curve_dist(a, b):
        return sum(abs(a[e] - b[e]) for e in ends) / len(ends)

    label = f"{n} GPUs (seed {cand_seed})"
    print(f"Training loss, mean over steps e−{WINDOW - 1}..e (global batch {16 * n} × 1024 tokens):\n")
    print("| e | " + " | ".join([label] + list(curves)) + " |")
    print("|---:|" + "---:|" * (len(curves) + 1))
    for e in ends:
        print(f"| {e} | " + " | ".join(f"{c[e]:.4f}" for c in [cc] + list(curves.values())) + " |")

    def verdict(what, cand_values, seed_values, dist):
        spread = loo(seed_values, dist)
        tol = max(spread.values())
        mine = sum(dist(cand_values, v) for v in seed_values.values()) / len(seed_values)
        print(f"\n{what}: mean distance of each 1-GPU seed to the other seeds "
              + ", ".join(f"{k.split()[-1]} {v:.4f}" for k, v in spread.items())
              + f"; tolerance (widest) {tol:.4f}; {n} GPUs to the seeds {mine:.4f} → "
              + ("within run-to-run tolerance" if mine <= tol else "OUTSIDE run-to-run tolerance"))

    verdict("Loss curve", cc, curves, curve_dist)
    vals = {k: val_nll(r) for k, r in runs.items()}
    vc = val_nll(cand)
    print(f"\nFinal validation NLL (whole file): {label} {vc:.4f}; "
          + ", ".join(f"{k} {v:.4f}" for k, v in vals.items()))
    verdict("Final validation NLL", vc, vals, lambda a, b: abs(a - b))


if __name__ == "__main__":
    main()
