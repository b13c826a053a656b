#!/usr/bin/env python3
"""Peer for aobench's autoregressive decode speed: Hugging Face transformers generate() on a
randomly initialised GPT-2 small (12 layers, 12 heads, 768 wide, 1024 positions, 50257 ids) in bf16.

Same workload as `aobench speed` on the `gpt` small flavour: batch 32, one given token (EOS) then
`--new-tokens` sampled ones (default 1023, so 1024 positions as in aobench's length 1024), top-p 0.95,
temperature 0.9, top-k off, EOS never stops a row. Settings timed (warm-up run excluded, device synchronised,
CUDA events, mean ± sd over --repeats):
  static_compile  cache_implementation="static" with transformers' automatic torch.compile of the decode step
  static_eager    the same static cache with compilation disabled
Comparison only: nothing in aobench imports this. Prints one JSON object (also written to --out).
"""
import argparse
import json
import statistics
import sys

import torch
import transformers
from transformers import GenerationConfig, GPT2Config, GPT2LMHeadModel


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=1023)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--temperature", type=float, default=0.9)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--eager-repeats", type=int, default=1, help="repeats of static_eager (it is slow)")
    ap.add_argument("--settings", default="static_compile,static_eager")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("hf_generate: needs a CUDA device")
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=12, n_head=12, n_embd=768, n_positions=1024, vocab_size=50257)
    model = GPT2LMHeadModel(cfg).to("cuda", torch.bfloat16).eval()
    prompt = torch.full((a.batch, 1), 50256, dtype=torch.long, device="cuda")
    attn = torch.ones_like(prompt)

    def gen_config(setting):
        g = GenerationConfig(max_new_tokens=a.new_tokens, min_new_tokens=0, do_sample=True, top_p=a.top_p,
                             temperature=a.temperature, top_k=0, eos_token_id=None, pad_token_id=50256,
                             cache_implementation="static")
        if setting == "static_eager":
            g.disable_compile = True  # transformers ≥ 4.48: no automatic compile of the static-cache step
        return g

    result = {"peer": "hf_generate", "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "transformers": transformers.__version__, "batch": a.batch, "given_tokens": 1,
              "new_tokens": a.new_tokens, "top_p": a.top_p, "temperature": a.temperature, "dtype": "bfloat16",
              "settings": {}}
    for setting in a.settings.split(","):
        g = gen_config(setting)
        repeats = a.eager_repeats if setting == "static_eager" else a.repeats
        with torch.inference_mode():
            out = model.generate(prompt, attention_mask=attn, generation_config=g)  # warm-up (and compile)
            torch.cuda.synchronize()
            assert out.shape == (a.batch, 1 + a.new_tokens), out.shape
            times = []
            for _ in range(repeats):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model.generate(prompt, attention_mask=attn, generation_config=g)
                stop.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(stop) / 1e3)
        # transformers keeps the compiled forward on the model once its automatic compile ran.
        compiled = getattr(model, "_compiled_call", None) is not None
        result["settings"][setting] = {"compiled": compiled, "mean_s": statistics.mean(times),
                                       "sd_s": statistics.stdev(times) if len(times) > 1 else 0.0,
                                       "runs_s": times}
        print(f"hf_generate {setting}: {statistics.mean(times):.3f} s per batch of {a.batch} x {a.new_tokens} "
              f"new tokens", file=sys.stderr, flush=True)
    result["best_s"] = min(s["mean_s"] for s in result["settings"].values())
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
