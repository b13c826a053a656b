# Implements: the golden fixture for the ao_gpt plugin's network (plugins/ao_gpt, docs/spec-ao-gpt.md §1.1):
# an independent plain-PyTorch forward of the reference AO-GPT (`model_AOGPT_AdaLN6_NoRep_cond_128_trunc_qknorm.py`
# of scxue/AO-GPT-MDM) written from the spec only: [None] start slot, token + current-position embeddings
# of the permuted sequence, per-slot target-position condition from wtpe (zero on the last slot), RMSNorm,
# per-head QK RMSNorm, six-vector adaLN per block (shift/scale/gate for attention and MLP), final 2-vector
# adaLN, untied lm_head with bias, causal attention over the T+1 slots, exact GELU.
# Tiny config: 2 layers, 2 heads, d 32, T 16, V 100 (padded to 128 rows like the plugin), cond_dim 16
# (128 would make the file > 200 KB; the width is a knob). Weights are random with seed 1234, biases and
# norm weights randomised, adaLN weights std 0.5 (modulations of std ~1, so swapping shift / scale / gate
# moves the logits far past the test tolerance; the script prints how far each such mistake moves them).
# Writes tests/data/ao_gpt_golden/expected.safetensors: every parameter under the plugin's names (h_i.…,
# wnonee), input_ids (2, 16), orders (2, 16) (row 0 identity, row 1 a random permutation), logits
# (2, 17, 128) for all T+1 slots (computed in float64, stored fp32), loss (mean CE of slots 0..T-1 against
# x_σ over the real V logits, as the plugin scores) and loss_padded_vocab (the same over all 128 logits, as
# the reference code does: it never masks the padded rows). The C++ side is AoGpt.LogitsMatchAnIndependent-
# PyTorchReference (plugins/ao_gpt/ao_gpt_test.cpp).
# Run: PYTHONPATH=<dir with safetensors + numpy, e.g. from pip install --target DIR safetensors numpy> \
#        /root/.cache/aobench/venv/bin/python tests/data/make_ao_gpt_golden.py
import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ao_gpt_golden")
L, H, D, T, V, C = 2, 2, 32, 16, 100, 16
VP = (V + 63) // 64 * 64  # padded vocabulary rows of wte / lm_head
EPS = 1e-5


def make_weights(g):
    """Random weights under the reference's names (nanoGPT style; plugin_name maps them for the file)."""
    def rnd(*shape, std=1.0, mean=0.0):
        return (mean + std * torch.randn(*shape, generator=g, dtype=torch.float64))

    w = {
        "wte.weight": rnd(VP, D, std=0.5),  # (VP, d)
        "wpe.weight": rnd(T + 1, D, std=0.5),  # (T+1, d), row 0 = [None], row p+1 = position p
        "wtpe.weight": rnd(T, C),  # (T, c), row p = target position p
        "wnonee.weight": rnd(1, D, std=0.5),  # (1, d)
    }
    for i in range(L):
        p = f"blocks.{i}."
        w[p + "ln_1.weight"] = rnd(D, mean=1.0, std=0.2)
        w[p + "attn.c_attn.weight"] = rnd(3 * D, D, std=D ** -0.5)  # (3d, d): q | k | v
        w[p + "attn.c_attn.bias"] = rnd(3 * D, std=0.1)
        w[p + "attn.c_proj.weight"] = rnd(D, D, std=D ** -0.5)
        w[p + "attn.c_proj.bias"] = rnd(D, std=0.1)
        w[p + "attn.q_norm.weight"] = rnd(D // H, mean=1.0, std=0.2)  # (h,) shared by all heads
        w[p + "attn.k_norm.weight"] = rnd(D // H, mean=1.0, std=0.2)
        w[p + "ln_2.weight"] = rnd(D, mean=1.0, std=0.2)
        w[p + "mlp.c_fc.weight"] = rnd(4 * D, D, std=D ** -0.5)
        w[p + "mlp.c_fc.bias"] = rnd(4 * D, std=0.1)
        w[p + "mlp.c_proj.weight"] = rnd(D, 4 * D, std=(4 * D) ** -0.5)
        w[p + "mlp.c_proj.bias"] = rnd(D, std=0.1)
        w[p + "adaLN.weight"] = rnd(6 * D, C, std=0.5)  # (6d, c)
        w[p + "adaLN.bias"] = rnd(6 * D, std=0.5)
    w["ln_f.weight"] = rnd(D, mean=1.0, std=0.2)
    w["adaLN_final.weight"] = rnd(2 * D, C, std=0.5)  # (2d, c)
    w["adaLN_final.bias"] = rnd(2 * D, std=0.5)
    w["lm_head.weight"] = rnd(VP, D, std=D ** -0.5)  # untied
    w["lm_head.bias"] = rnd(VP, std=0.5)
    return w


def plugin_name(name):
    """The ao_gpt plugin's parameter name (plugins/ao_gpt/ao_gpt.h): blocks.i. → h_i., wnonee.weight → wnonee."""
    if name.startswith("blocks."):
        i, rest = name[len("blocks."):].split(".", 1)
        return f"h_{i}.{rest}"
    return "wnonee" if name == "wnonee.weight" else name


def rmsnorm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight


def forward(w, ids, orders, mistake=None):
    """Reference AO-GPT forward. ids, orders (B, T) → logits (B, T+1, VP); slot k predicts x_σ(k) for k < T."""
    B = ids.shape[0]
    x_sigma = torch.gather(ids, 1, orders)  # (B, T): tokens in generation order
    # Slots 0..T: token part [None], x_σ(0..T-1); current position 0, σ(0..T-1)+1; target wtpe[σ(0..T-1)], zero.
    tok = torch.cat([w["wnonee.weight"].expand(B, 1, D), w["wte.weight"][x_sigma]], 1)  # (B, T+1, d)
    cur = torch.cat([torch.zeros(B, 1, dtype=torch.long), orders + 1], 1)  # (B, T+1)
    h = tok + w["wpe.weight"][cur]  # (B, T+1, d); the target position is NOT added (NoRep)
    cond = torch.cat([w["wtpe.weight"][orders], torch.zeros(B, 1, C, dtype=h.dtype)], 1)  # (B, T+1, c)
    if mistake == "last_slot_conditioned":
        cond[:, T] = w["wtpe.weight"][orders[:, -1]]
    sc = F.silu(cond)
    hd = D // H
    for i in range(L):
        p = f"blocks.{i}."
        mod = sc @ w[p + "adaLN.weight"].T + w[p + "adaLN.bias"]  # (B, T+1, 6d)
        sh1, sc1, g1, sh2, sc2, g2 = mod.chunk(6, -1)
        if mistake == "shift_scale_swapped":
            sh1, sc1, sh2, sc2 = sc1, sh1, sc2, sh2
        if mistake == "gate_shift_swapped":
            sh1, g1, sh2, g2 = g1, sh1, g2, sh2
        a = rmsnorm(h, w[p + "ln_1.weight"]) * (1 + sc1) + sh1
        qkv = a @ w[p + "attn.c_attn.weight"].T + w[p + "attn.c_attn.bias"]  # (B, T+1, 3d)
        q, k, v = (t.view(B, T + 1, H, hd).transpose(1, 2) for t in qkv.split(D, -1))  # (B, H, T+1, h)
        if mistake != "no_qk_norm":
            q = rmsnorm(q, w[p + "attn.q_norm.weight"])
            k = rmsnorm(k, w[p + "attn.k_norm.weight"])
        att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)  # (B, H, T+1, T+1)
        causal = torch.ones(T + 1, T + 1, dtype=torch.bool).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T + 1, D)
        y = y @ w[p + "attn.c_proj.weight"].T + w[p + "attn.c_proj.bias"]
        h = h + g1 * y
        m = rmsnorm(h, w[p + "ln_2.weight"]) * (1 + sc2) + sh2
        m = F.gelu(m @ w[p + "mlp.c_fc.weight"].T + w[p + "mlp.c_fc.bias"])  # exact erf GELU, (B, T+1, 4d)
        m = m @ w[p + "mlp.c_proj.weight"].T + w[p + "mlp.c_proj.bias"]
        h = h + g2 * m
    fmod = sc @ w["adaLN_final.weight"].T + w["adaLN_final.bias"]  # (B, T+1, 2d)
    fsh, fsc = fmod.chunk(2, -1)
    z = rmsnorm(h, w["ln_f.weight"]) * (1 + fsc) + fsh
    return z @ w["lm_head.weight"].T + w["lm_head.bias"]  # (B, T+1, VP)


def loss_of(logits, ids, orders, vocab):
    """Mean cross-entropy of slots 0..T-1 against x_σ, over the first `vocab` logits."""
    targets = torch.gather(ids, 1, orders)  # (B, T)
    return F.cross_entropy(logits[:, :T, :vocab].reshape(-1, vocab), targets.reshape(-1))


def main():
    g = torch.Generator().manual_seed(1234)
    w = make_weights(g)
    ids = torch.randint(0, V, (2, T), generator=g)  # (2, T)
    orders = torch.stack([torch.arange(T), torch.randperm(T, generator=g)])  # (2, T): identity, random
    with torch.no_grad():
        logits = forward(w, ids, orders)
        loss = loss_of(logits, ids, orders, V)
        loss_padded = loss_of(logits, ids, orders, VP)
        mod_std = (F.silu(w["wtpe.weight"]) @ w["blocks.0.adaLN.weight"].T + w["blocks.0.adaLN.bias"]).std()
        print(f"logits |max| {logits.abs().max():.3f}, loss {loss:.6f} (padded vocab {loss_padded:.6f}), "
              f"block-0 modulation std {mod_std:.3f}")
        # A fixture that cannot tell these mistakes apart is useless: each must move the slot 0..T-1 logits
        # (the ones every test can read) by far more than the 1e-4 tolerance, except the last-slot
        # condition, which by causality only changes slot T.
        for mistake in ["shift_scale_swapped", "gate_shift_swapped", "no_qk_norm", "last_slot_conditioned"]:
            other = forward(w, ids, orders, mistake)
            print(f"  {mistake:22s} moves slots 0..T-1 by {(other - logits)[:, :T].abs().max():.3e}, "
                  f"slot T by {(other - logits)[:, T].abs().max():.3e}")
    tensors = {plugin_name(k): v.float().contiguous() for k, v in w.items()}
    tensors.update(input_ids=ids.to(torch.int64), orders=orders.to(torch.int64),
                   logits=logits.float().contiguous(), loss=loss.float().reshape(1),
                   loss_padded_vocab=loss_padded.float().reshape(1))
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "expected.safetensors")
    # One metadata key: safetensors writes several in hash order, so the file would differ run to run.
    save_file(tensors, path, metadata={"source": f"make_ao_gpt_golden.py: n_layer {L}, n_head {H}, n_embd {D}, "
                                                 f"block_size {T}, vocab_size {V}, cond_dim {C}"})
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
