#!/usr/bin/env python3
"""The peer of `aobench train` for training speed: nanoGPT's model.py (Karpathy, MIT), written
inline so the script runs without network or a checkout, trained the way nanoGPT's train.py does it on one
GPU: bf16 autocast, bias=True, vocabulary padded to 50304, weight tying, AdamW(fused=True) with nanoGPT's
decay / no-decay groups, grad clip 1.0, optional torch.compile. Tokens are uniform random ids (speed only).

    python3 bench/peers/nanogpt_train.py --batch 16 --compile        # one JSON line on stdout
    python3 bench/peers/nanogpt_train.py --eval --batch 32 --compile # the peer of `aobench eval --throughput`
    python3 bench/peers/nanogpt_train.py --write-tokens F.bin        # the same kind of ids for `aobench train`

--eval times the exact left-to-right evaluation instead: the forward and the per-token cross-entropy
(reduction "none", summed on the device) under inference_mode and bf16 autocast, no optimizer, --steps
batches after --warmup.

--write-tokens writes --tokens uniform random ids (seed --seed) in the harness's token-file format (llm.c
header, version 2: uint32 ids; datasets/token_file.h) and exits, so that aobench trains on ids like the peer's.

The rate is tokens/s over the steps after --warmup (compile and cuDNN/cuBLAS autotuning fall in the
warm-up), with one device synchronisation at the end of the timed window (nanoGPT reads the loss once per
log interval too). MFU uses the harness's FLOP count (6·params without wpe + 12·L·d·T per token) and its
peak table (H100/H200 SXM 989 TFLOP/s bf16 dense; --peak-tflops overrides).
"""
import argparse
import json
import math
import struct
import sys
import time

import torch
import torch.nn as nn
from torch.nn import functional as F

SHAPES = {"small": (12, 12, 768), "medium": (24, 16, 1024), "tiny": (6, 6, 384)}


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, bias):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd, bias):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, bias):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd, bias)
        self.attn = CausalSelfAttention(n_embd, n_head, bias)
        self.ln_2 = LayerNorm(n_embd, bias)
        self.mlp = MLP(n_embd, bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size=1024, vocab_size=50304, bias=True):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head, bias) for _ in range(n_layer)]),
            ln_f=LayerNorm(n_embd, bias)))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets, reduction="mean"):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1,
                               reduction=reduction)

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = [p for p in self.parameters() if p.requires_grad]
        decay = [p for p in params if p.dim() >= 2]
        nodecay = [p for p in params if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": nodecay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=True)


def peak_flops(name):
    if "H200" in name or ("H100" in name and "PCIe" not in name):
        return 989e12
    if "H100" in name:
        return 756e12
    if "A100" in name:
        return 312e12
    return float("nan")


def write_tokens(path, n, seed):
    """n uniform ids in [0, 50257) as a token file: 256 int32 header (magic, version 2, count, vocab) + uint32."""
    g = torch.Generator().manual_seed(seed)
    buf = bytearray(4 * n)
    torch.frombuffer(buf, dtype=torch.int32).copy_(torch.randint(0, 50257, (n,), dtype=torch.int32, generator=g))
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 2, n, 50257, 0, -1, *([0] * 250)))
        f.write(buf)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(SHAPES), default="small")
    ap.add_argument("--batch", type=int, default=16, help="micro-batch (sequences of --block tokens)")
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=40, help="timed optimizer steps after the warm-up")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (nanoGPT's default)")
    ap.add_argument("--eval", action="store_true", help="time forward + per-token cross-entropy, no training")
    ap.add_argument("--peak-tflops", type=float, default=0.0, help="bf16 peak for MFU (default: by device name)")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--write-tokens", default="", metavar="FILE", help="write random ids to FILE and exit (no GPU)")
    ap.add_argument("--tokens", type=int, default=20_000_000, help="how many ids --write-tokens writes")
    a = ap.parse_args()
    if a.write_tokens:
        write_tokens(a.write_tokens, a.tokens, a.seed)
        return
    if not torch.cuda.is_available():
        sys.exit("nanogpt_train.py: no CUDA device; this peer measures GPU training speed")
    if a.batch < 1 or a.steps < 1 or a.warmup < 0 or a.block < 2:
        sys.exit("nanogpt_train.py: --batch, --steps ≥ 1, --warmup ≥ 0, --block ≥ 2")

    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    dev = "cuda"
    L, H, d = SHAPES[a.model]
    model = GPT(L, H, d, block_size=a.block).to(dev)
    opt = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95))
    step_fn = torch.compile(model) if a.compile else model
    n_params = sum(p.numel() for p in model.parameters()) - model.transformer.wpe.weight.numel()
    flops_tok = 6 * n_params + 12 * L * d * a.block
    name = torch.cuda.get_device_name()
    peak = a.peak_tflops * 1e12 if a.peak_tflops > 0 else peak_flops(name)
    data = torch.randint(0, 50257, (a.warmup + a.steps, a.batch, a.block + 1), device=dev)

    total = torch.zeros((), device=dev, dtype=torch.float64)  # --eval: Σ per-token NLL, read once at the end

    def step(i):
        x, y = data[i, :, :-1].contiguous(), data[i, :, 1:].contiguous()  # nanoGPT get_batch stacks: contiguous
        if a.eval:
            with torch.inference_mode(), torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                total.add_(step_fn(x, y, "none").sum())  # (B·T) per-token NLL
            return total
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    t_compile = time.perf_counter()
    for i in range(a.warmup):
        step(i)
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - t_compile
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for i in range(a.warmup, a.warmup + a.steps):
        loss = step(i)
    final_loss = loss.item()  # the one host read of the timed window
    dt = time.perf_counter() - t0
    tok_s = a.batch * a.block * a.steps / dt
    if a.eval:  # the mean NLL per token over every batch run, warm-up included
        final_loss /= a.batch * a.block * (a.warmup + a.steps)
        flops_tok //= 3  # forward only
    print(json.dumps({
        "peer": "nanogpt", "mode": "eval" if a.eval else "train", "model": a.model, "compile": a.compile,
        "batch": a.batch, "block": a.block,
        "steps": a.steps, "warmup": a.warmup, "tok_s": tok_s, "step_ms": 1e3 * dt / a.steps,
        "mfu": flops_tok * tok_s / peak if math.isfinite(peak) else None,
        "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30, "final_loss": final_loss,
        "warmup_s": warmup_s, "device": name, "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
