#!/usr/bin/env python3
"""Summary table of scripts/gpu_check.sh trainspeed: nanoGPT peer lines (JSON, bench/peers/nanogpt_train.py)
and `aobench train` run directories (metrics.jsonl), as Markdown on stdout.

    python3 scripts/trainspeed_table.py PEERS.jsonl RUNS_DIR [STEADY_AFTER]

A run's rate is the mean of its logged tok/s at steps > STEADY_AFTER (default 30: past compile-free warm-up,
cuBLAS/cuDNN autotuning and the allocator filling); a run logged no later than that uses its last interval.
Each row is compared with nanoGPT + torch.compile at the same micro-batch, and AO-GPT with the GPT at B = 16.
"""
import json
import os
import sys


def runs(root, after):
    out = {}
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name, "metrics.jsonl")
        if not os.path.isfile(path):
            continue
        rows = [json.loads(l) for l in open(path) if l.strip()]
        rows = [r for r in rows if "throughput/tok_s" in r]
        cfg = json.load(open(os.path.join(root, name, "config.resolved.json")))
        steady = [r for r in rows if r["step"] > after] or rows[-1:]
        if not steady:
            continue
        mean = lambda k: sum(r[k] for r in steady) / len(steady) if all(r.get(k) is not None for r in steady) else None
        B, T = cfg["train"]["batch_size"], cfg["model"].get("block_size", 1024)
        out[name] = {"tok_s": mean("throughput/tok_s"), "mfu": mean("mfu"), "batch": B, "block": T,
                     "mem": max(r.get("memory/max_allocated_gib", 0) for r in rows),
                     "loss": rows[-1]["loss/train"], "steps": [r["step"] for r in steady],
                     "what": f"aobench {cfg['model']['plugin']}/{cfg['model']['flavour']}"}
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    peers = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
    after = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    ours = runs(sys.argv[2], after)
    compiled = {p["batch"]: p["tok_s"] for p in peers if p["compile"]}
    print("| run | B | tok/s | step ms | MFU | peak GiB | vs nanoGPT+compile (same B) | note |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for p in peers:
        name = f"nanoGPT {p['model']} {'compile' if p['compile'] else 'eager'}"
        ref = compiled.get(p["batch"])
        vs = f"{p['tok_s']/ref:.2f}" if ref else "—"
        mfu = f"{100*p['mfu']:.1f} %" if p.get("mfu") is not None else "n/a"
        print(f"| {name} | {p['batch']} | {p['tok_s']/1e3:.1f} K | {p['step_ms']:.1f} | {mfu} | "
              f"{p['peak_mem_gib']:.1f} | {vs} | {p['steps']} timed steps after {p['warmup']} |")
    gpt16 = ours.get("gpt_b16", {}).get("tok_s")
    for name, r in ours.items():
        ref = compiled.get(r["batch"]) if "medium" not in name else None
        note = f"steps {r['steps'][0]}–{r['steps'][-1]} logged, final loss {r['loss']:.3f}"
        if name.startswith("ao_gpt") and "medium" not in name and gpt16:
            note += f"; {r['tok_s']/gpt16:.2f}× gpt_b16"
        step_ms = 1e3 * r["batch"] * r["block"] / r["tok_s"]
        mfu = f"{100*r['mfu']:.1f} %" if r["mfu"] is not None else "n/a"
        vs = f"{r['tok_s']/ref:.2f}" if ref else "—"
        print(f"| {r['what']} ({name}) | {r['batch']} | {r['tok_s']/1e3:.1f} K | {step_ms:.1f} | {mfu} | "
              f"{r['mem']:.1f} | {vs} | {note} |")


if __name__ == "__main__":
    main()
