# Peer (comparison only, not the product path): an independent plain-PyTorch AO-GPT, the network of
# tests/data/make_ao_gpt_golden.py written from the spec (docs/spec-ao-gpt.md §1.1), trained at the tiny_t256
# setting of configs/experiments/architecture_ablation.json (6 layers, 6 heads, d 384, T 256, V 50257 padded to
# 50304, cond 128; B 64, AdamW 0.9/0.95, lr 6e-4, warm-up 300, cosine to 6e-5 at the last step, weight decay
# 0.05 on ≥ 2-dim parameters, clip 1, bf16 autocast, orders L2R with p 0.1 else uniform; truncated-normal 0.02
# init, residual projections 0.02/sqrt(2L), biases 0). It shows whether the slow start of the adaLN injection
# is the design or the plugin: variants adaln (the spec), input (a full-width target-position table added at
# the input, no adaLN) and adaln_open (the spec with every gate bias starting at 1).
# Run on a GPU: python3 bench/peers/ao_gpt_reference_train.py VARIANT STEPS TRAIN.bin VAL.bin
# with TRAIN.bin / VAL.bin written by `aobench prepare` (VAL.bin packed into 256-token windows).
# Prints every 250 steps the training loss, the validation loss on 20 × 64 windows in fresh random orders
# (no L2R) and the mean |gate| of each block's attention / MLP modulation.
import math
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

variant = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
L, H, D, T, V, C = 6, 6, 384, 256, 50257, 128
VP = (V + 63) // 64 * 64
B, LR, MIN_LR, WARM, WD = 64, 6e-4, 6e-5, 300, 0.05
dev = "cuda" if torch.cuda.is_available() else "cpu"
if dev == "cpu":
    B = 2  # smoke test only
torch.manual_seed(1337)


def load(path):
    raw = np.fromfile(path, dtype=np.uint8)
    hdr = raw[:1024].view(np.int32)
    assert hdr[0] == 20240520 and hdr[1] == 1, hdr[:6]
    return torch.from_numpy(raw[1024:].view(np.uint16).astype(np.int64))


train = load(sys.argv[3]).to(dev)
val = load(sys.argv[4]).to(dev).view(-1, T)  # (windows, 256)


def tn(t, std):
    return nn.init.trunc_normal_(t, 0.0, std, -3 * std, 3 * std)


class RMS(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        return F.rms_norm(x.float(), (x.shape[-1],), self.weight, 1e-5).to(x.dtype)


class Block(nn.Module):
    def __init__(self, adaln):
        super().__init__()
        self.ln_1, self.ln_2 = RMS(D), RMS(D)
        self.c_attn, self.attn_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.q_norm, self.k_norm = RMS(D // H), RMS(D // H)
        self.c_fc, self.mlp_proj = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.adaLN = nn.Linear(C, 6 * D) if adaln else None

    def forward(self, h, sc):
        Bq, S, _ = h.shape
        if self.adaLN is not None:
            sh1, s1, g1, sh2, s2, g2 = self.adaLN(sc).chunk(6, -1)
        else:
            sh1 = s1 = sh2 = s2 = 0.0
            g1 = g2 = 1.0
        a = self.ln_1(h) * (1 + s1) + sh1
        q, k, v = (t.view(Bq, S, H, D // H) for t in self.c_attn(a).split(D, -1))
        q, k = self.q_norm(q), self.k_norm(k)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        h = h + g1 * self.attn_proj(y.transpose(1, 2).reshape(Bq, S, D))
        m = self.ln_2(h) * (1 + s2) + sh2
        return h + g2 * self.mlp_proj(F.gelu(self.c_fc(m)))


class AOGPT(nn.Module):
    def __init__(self, variant):
        super().__init__()
        self.adaln = variant.startswith("adaln")
        self.wte, self.wpe = nn.Embedding(VP, D), nn.Embedding(T + 1, D)
        self.wtpe = nn.Embedding(T, C if self.adaln else D)
        self.wnonee = nn.Parameter(torch.zeros(1, D))
        self.blocks = nn.ModuleList(Block(self.adaln) for _ in range(L))
        self.ln_f = RMS(D)
        self.adaLN_final = nn.Linear(C, 2 * D) if self.adaln else None
        self.lm_head = nn.Linear(D, VP)
        with torch.no_grad():
            for n, p in self.named_parameters():
                if p.dim() >= 2:
                    tn(p, 0.02 / math.sqrt(2 * L) if n.endswith("_proj.weight") else 0.02)
                elif n.endswith("bias"):
                    p.zero_()
            if variant == "adaln_open":
                for b in self.blocks:
                    b.adaLN.bias[2 * D:3 * D] = 1.0
                    b.adaLN.bias[5 * D:6 * D] = 1.0

    def forward(self, ids, order):  # (B, T) each → loss over slots 0..T-1
        Bq = ids.shape[0]
        xs = ids.gather(1, order)
        tok = torch.cat([self.wnonee.expand(Bq, 1, D), self.wte(xs[:, :-1])], 1)  # slots 0..T-1
        cur = torch.cat([torch.zeros(Bq, 1, dtype=torch.long, device=ids.device), order[:, :-1] + 1], 1)
        h = tok + self.wpe(cur)
        sc = None
        if self.adaln:
            sc = F.silu(self.wtpe(order))
        else:
            h = h + self.wtpe(order)
        for b in self.blocks:
            h = b(h, sc)
        z = self.ln_f(h)
        if self.adaln:
            fsh, fsc = self.adaLN_final(sc).chunk(2, -1)
            z = z * (1 + fsc) + fsh
        logits = self.lm_head(z)[..., :V].float()
        return F.cross_entropy(logits.reshape(-1, V), xs.reshape(-1))

    def gates(self):
        if not self.adaln:
            return ""
        with torch.no_grad():
            sc = F.silu(self.wtpe.weight)
            out = []
            for b in self.blocks:
                m = b.adaLN(sc).chunk(6, -1)
                out.append(f"{m[2].abs().mean():.3f}/{m[5].abs().mean():.3f}")
            return "gates |a1|/|a2| per layer " + " ".join(out)


model = AOGPT(variant).to(dev)
decay = [p for p in model.parameters() if p.dim() >= 2]
other = [p for p in model.parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": other, "weight_decay": 0.0}],
                        lr=LR, betas=(0.9, 0.95), eps=1e-8, fused=dev == "cuda")
g = torch.Generator(device=dev).manual_seed(0)


def orders_for(n, gen, p_l2r=0.1):
    o = torch.rand(n, T, device=dev, generator=gen).argsort(1)
    l2r = torch.rand(n, device=dev, generator=gen) < p_l2r
    return torch.where(l2r[:, None], torch.arange(T, device=dev).expand(n, T), o)


@torch.no_grad()
def evaluate():
    model.eval()
    vg = torch.Generator(device=dev).manual_seed(1234)
    tot = 0.0
    for i in range(20 if dev == "cuda" else 1):
        ids = val[i * 64:(i + 1) * 64] if dev == "cuda" else val[:2]
        with torch.autocast(dev, torch.bfloat16):
            tot += model(ids, orders_for(ids.shape[0], vg, 0.0)).item()
    model.train()
    return tot / (20 if dev == "cuda" else 1)


print(f"{variant}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M params; {model.gates()}", flush=True)
t0 = time.time()
for step in range(1, steps + 1):
    lr = LR * step / WARM if step <= WARM else MIN_LR + 0.5 * (LR - MIN_LR) * (
        1 + math.cos(math.pi * (step - WARM) / (steps - WARM)))
    for grp in opt.param_groups:
        grp["lr"] = lr
    starts = torch.randint(0, train.numel() - T, (B,), device=dev, generator=g)
    ids = train[starts[:, None] + torch.arange(T, device=dev)]
    with torch.autocast(dev, torch.bfloat16):
        loss = model(ids, orders_for(B, g))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if step % 250 == 0 or step == 1:
        print(f"{variant} step {step} | loss {loss.item():.4f} | grad_norm {gn.item():.2f} | val (random orders) "
              f"{evaluate():.4f} | {time.time() - t0:.0f}s | {model.gates()}", flush=True)
