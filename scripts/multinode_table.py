#!/usr/bin/env python3
"""The verdict of `scripts/gpu_check.sh multinode` from its run folders (Markdown on stdout; exit 1 on a failure).

Usage: multinode_table.py RUNS_DIR

RUNS_DIR holds four runs of one config (the same seed, global batch 32 × 1024 tokens per step):
  two_nodes        torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d (two agents on one host, a GPU each)
  one_node         torchrun --standalone --nproc_per_node 2
  one_node_repeat  the same launch again: the run-to-run noise of the GPU kernels (atomics in some backwards)
  one_gpu          1 process, 2 accumulated micro-batches of 16
two_nodes and one_node have the same ranks, so the same initial weights, batches and reductions: their per-step
training losses must agree to bf16 noise (relative 1e-2, as scripts/gpu_ddp_check.sh's captured vs uncaptured
check), and the table sets their difference beside one_node's against its repeat. one_gpu draws its
micro-batches from the whole file where each rank draws from its own half, so it is another sample of the same
recipe: its distance is printed as context, not judged (ddp_table.py judges one against many GPUs over seeds).
"""
import json
import sys

from ddp_table import WINDOW, windows  # beside this script


def losses(run):
    with open(run + "/metrics.jsonl") as f:
        return {m["step"]: m["loss/train"] for m in map(json.loads, f) if "loss/train" in m}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1].rstrip("/")
    two, one, rep = (losses(f"{d}/{r}") for r in ("two_nodes", "one_node", "one_node_repeat"))
    steps = sorted(set(two) & set(one) & set(rep))
    if len(steps) < len(one) or not steps:
        sys.exit(f"multinode_table.py: two_nodes logged {len(two)} steps, one_node {len(one)}, its repeat "
                 f"{len(rep)}: the runs differ")

    def apart(a, b):
        """Largest relative per-step difference, and the steps with equal losses."""
        return max(abs(a[s] - b[s]) / abs(b[s]) for s in steps), sum(a[s] == b[s] for s in steps)

    rel, same = apart(two, one)
    noise, noise_same = apart(rep, one)
    wt, wo, wg = (windows(f"{d}/{r}", 0) for r in ("two_nodes", "one_node", "one_gpu"))
    print("Training loss, mean over steps e−19..e (global batch 32 × 1024 tokens, seed of the config):\n")
    print("| e | 2 nodes × 1 GPU | 1 node × 2 GPUs | 1 GPU, 2 × 16 accumulated |\n|---:|---:|---:|---:|")
    for e in sorted(set(wt) & set(wo) & set(wg)):
        print(f"| {e} | {wt[e]:.4f} | {wo[e]:.4f} | {wg[e]:.4f} |")
    ok = rel < 1e-2
    print(f"\n1 node vs the same launch again: {len(steps)} steps, {noise_same} identical, largest relative difference "
          f"{noise:.2e} (the kernels' own run-to-run noise)")
    print(f"2 nodes vs 1 node: {len(steps)} steps, {same} identical, largest relative difference {rel:.2e} → "
          + ("the same curve" if ok else "DIFFERENT curves (> 1e-2)"))
    shared = sorted(set(wt) & set(wg))
    if shared:
        far = sum(abs(wt[e] - wg[e]) for e in shared) / len(shared)
        print(f"2 nodes vs 1 GPU (another sample: its own data order): mean |Δ| of the window means {far:.4f}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
