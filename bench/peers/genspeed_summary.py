#!/usr/bin/env python3
"""Side-by-side table of scripts/gpu_check.sh genspeed: our BM_PluginSample times (Google Benchmark JSON) and
the peers' JSON (hf_generate.py, sedd_step.py) from one call on one GPU, with the issue-12 ratios.
Usage: genspeed_summary.py DIR  (reads DIR/bench_sample_*.json, DIR/peer_*.json; prints Markdown, writes
DIR/summary.json)."""
import glob
import json
import os
import statistics
import sys


def ours(path):
    """(mean s, sd s, n, calls, label) of the BM_PluginSample runs in one benchmark JSON file."""
    runs = [b for b in json.load(open(path))["benchmarks"]
            if b["name"].startswith("BM_PluginSample") and b.get("run_type") == "iteration" and "error_occurred" not in b]
    if not runs:
        return None
    scale = {"ms": 1e-3, "us": 1e-6, "ns": 1e-9, "s": 1.0}[runs[0]["time_unit"]]
    t = [r["real_time"] * scale for r in runs]
    return {"mean_s": statistics.mean(t), "sd_s": statistics.stdev(t) if len(t) > 1 else 0.0, "n": len(t),
            "calls": runs[0].get("calls"), "label": runs[0].get("label", "")}


def main():
    d = sys.argv[1]
    rows, summary = [], {"ours": {}, "peers": {}}
    for path in sorted(glob.glob(os.path.join(d, "bench_sample_*.json"))):
        key = os.path.basename(path)[len("bench_sample_"):-len(".json")]
        r = ours(path)
        if r:
            summary["ours"][key] = r
            per_call = 1e3 * r["mean_s"] / r["calls"] if r["calls"] else float("nan")
            rows.append(f"| aobench {key} | {r['label']} | {r['mean_s']:.3f} ± {r['sd_s']:.3f} s (n={r['n']}) "
                        f"| {r['calls']:.0f} calls, {per_call:.2f} ms/call |")
    for path in sorted(glob.glob(os.path.join(d, "peer_*.json"))):
        p = json.load(open(path))
        summary["peers"][p["peer"]] = p
        if p["peer"] == "hf_generate":
            for k, s in p["settings"].items():
                rows.append(f"| HF generate {k} | B={p['batch']} new={p['new_tokens']} transformers "
                            f"{p['transformers']} | {s['mean_s']:.3f} ± {s['sd_s']:.3f} s (n={len(s['runs_s'])}) | |")
        if p["peer"] == "sedd_step":
            rows.append(f"| compiled PyTorch DDiT step | B={p['batch']} L={p['length']} | "
                        f"{p['mean_ms']:.2f} ± {p['sd_ms']:.2f} ms/step | |")
    print("| what | shape | time | |\n|---|---|---|---|")
    print("\n".join(rows))
    o, hf, sp = summary["ours"], summary["peers"].get("hf_generate"), summary["peers"].get("sedd_step")
    ratios = {}
    # Every variant (gpu_check.sh genspeed: -onerow AOBENCH_DRAW_SPLIT=0, -nodecode AOBENCH_FUSED_DECODE=0,
    # -radix AOBENCH_DRAW_CANDIDATES=0, …): a GPT against HF, an AO-GPT against our SEDD at the same steps.
    for key in sorted(o):
        if (key == "gpt" or key.startswith("gpt-")) and hf:
            ratios[f"hf_best_over_{key}"] = hf["best_s"] / o[key]["mean_s"]
        steps = key.rsplit("_", 1)[-1]
        if key.startswith("ao_gpt") and f"sedd_{steps}" in o:
            ratios[f"sedd_{steps}_over_{key}"] = o[f"sedd_{steps}"]["mean_s"] / o[key]["mean_s"]
    if "sedd_1024" in o and sp and o["sedd_1024"]["calls"]:
        ratios["sedd_step_ms"] = 1e3 * o["sedd_1024"]["mean_s"] / o["sedd_1024"]["calls"]
        ratios["peer_step_ms"] = sp["mean_ms"]
    summary["ratios"] = ratios
    print("\n" + "\n".join(f"- {k}: {v:.3f}" for k, v in ratios.items()))
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
