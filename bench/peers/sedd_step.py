#!/usr/bin/env python3
"""Peer for aobench's SEDD sampler step: a plain-PyTorch DDiT encoder of SEDD small's shape
(12 blocks, 12 heads, 768 wide, cond 128, 50257 + 1 ids incl. [MASK], NeoX rotary, adaLN-Zero, bidirectional
SDPA, GELU-tanh MLP, adaLN final norm, (V+1)-wide head) compiled with torch.compile, bf16 autocast.

One timed step = the network on (batch 32, length 1024) with half the positions masked, then the reference
one-stage reverse draw in float64 over every position: q = [rate·softmax(logits[:V]), 1 − rate (stay masked)],
x' = argmax q / E, E = 1e−10 − log(U + 1e−10) (SEDD's sample_categorical), masked positions only. Random
weights (the time does not depend on them). Warm-up (compilation) excluded, device synchronised, CUDA events,
mean ± sd over --repeats. Comparison only: nothing in aobench imports this. Prints one JSON object.
"""
import argparse
import json
import math
import statistics
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Block(nn.Module):
    def __init__(self, dim, heads, cond):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=True, bias=False)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=True, bias=False)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))
        self.ada = nn.Linear(cond, 6 * dim)

    def forward(self, x, c, cos, sin):
        B, T, D = x.shape
        shift1, scale1, gate1, shift2, scale2, gate2 = self.ada(c)[:, None].chunk(6, dim=2)
        h = self.norm1(x.float()).to(x.dtype) * (1 + scale1) + shift1
        q, k, v = self.qkv(h).view(B, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        o = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, D)
        x = x + gate1 * self.out(o)
        h = self.norm2(x.float()).to(x.dtype) * (1 + scale2) + shift2
        return x + gate2 * self.mlp(h)


class DDiT(nn.Module):
    def __init__(self, vocab=50257, dim=768, layers=12, heads=12, cond=128):
        super().__init__()
        self.embed = nn.Embedding(vocab + 1, dim)
        self.sigma_map = nn.Sequential(nn.Linear(256, cond), nn.SiLU(), nn.Linear(cond, cond), nn.SiLU())
        self.blocks = nn.ModuleList(Block(dim, heads, cond) for _ in range(layers))
        self.norm = nn.LayerNorm(dim, bias=False)
        self.final_ada = nn.Linear(cond, 2 * dim)
        self.head = nn.Linear(dim, vocab + 1)
        hd = dim // heads
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.outer(torch.arange(1024).float(), inv)
        self.register_buffer("cos", torch.cat([ang, ang], -1).cos()[None, None], persistent=False)
        self.register_buffer("sin", torch.cat([ang, ang], -1).sin()[None, None], persistent=False)

    def forward(self, idx, sigma):
        half = 128
        freqs = torch.exp(-math.log(10000) * torch.arange(half, device=idx.device) / half)
        args = sigma[:, None].float() * freqs[None]
        c = self.sigma_map(torch.cat([args.cos(), args.sin()], -1))
        x = self.embed(idx)
        T = idx.shape[1]
        cos, sin = self.cos[..., :T, :].to(x.dtype), self.sin[..., :T, :].to(x.dtype)
        for b in self.blocks:
            x = b(x, c, cos, sin)
        shift, scale = self.final_ada(c)[:, None].chunk(2, dim=2)
        return self.head(self.norm(x.float()).to(x.dtype) * (1 + scale) + shift)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--length", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--mode", default="default", help="torch.compile mode")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("sedd_step: needs a CUDA device")
    V = 50257
    torch.manual_seed(0)
    model = DDiT(V).cuda().eval()

    def step(x, sigma, rate):
        with torch.autocast("cuda", torch.bfloat16):
            logits = model(x, sigma)                                            # (B, L, V+1)
        p = torch.softmax(logits[..., :V].double(), -1) * rate                   # (B, L, V) float64
        q = torch.cat([p, torch.full_like(p[..., :1], 1.0) - rate], -1)         # stay masked = id V
        e = 1e-10 - torch.log(torch.rand_like(q) + 1e-10)
        return torch.where(x == V, (q / e).argmax(-1), x)

    step_c = torch.compile(step, mode=a.mode)
    x = torch.randint(0, V, (a.batch, a.length), device="cuda")
    x = torch.where(torch.rand(x.shape, device="cuda") < 0.5, torch.full_like(x, V), x)
    sigma = torch.full((a.batch,), 2.0, device="cuda")
    rate = torch.tensor(1.0 / 1024, dtype=torch.float64, device="cuda")
    with torch.inference_mode():
        for _ in range(a.warmup):
            step_c(x, sigma, rate)
        torch.cuda.synchronize()
        times = []
        for _ in range(a.repeats):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step_c(x, sigma, rate)
            stop.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(stop) / 1e3)
    result = {"peer": "sedd_step", "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "batch": a.batch, "length": a.length, "compile_mode": a.mode, "dtype": "bfloat16 network, float64 draw",
              "mean_ms": 1e3 * statistics.mean(times), "sd_ms": 1e3 * statistics.stdev(times) if len(times) > 1 else 0.0,
              "runs_ms": [1e3 * t for t in times]}
    text = json.dumps(result, indent=1)
    print(text)
    print(f"sedd_step: {result['mean_ms']:.2f} ± {result['sd_ms']:.2f} ms per step", file=sys.stderr)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
