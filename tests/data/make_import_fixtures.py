# Implements: the fixtures of `aobench import` (tests/unit/import_test.cpp; harness/import/): tiny random models built
# with the AUTHORS' OWN model files, saved in the authors' own checkpoint formats, converted by
# scripts/convert_torch_checkpoint.py, plus golden outputs of the authors' own forwards. Nothing of their code is copied
# here: the repositories are imported from the checkouts named on the command line.
#   ao_gpt/     scxue/AO-GPT-MDM model_AOGPT_AdaLN6_NoRep_cond_128_trunc_qknorm.py, one training step as
#               train_AOGPT_CL.py takes it (AdamW from configure_optimizers, EMA from ema.py), saved as its
#               checkpoint dict {model, ema_model, ema_rate, optimizer, model_args, iter_num, config}, converted.
#               2 layers, 2 heads, n_embd 8 (the adaLN width 128 is fixed in their file and dominates the size),
#               block 16, vocab 50 padded to 64 rows. golden.safetensors: input_ids (2, 16), orders (2, 16) (row 0
#               identity, row 1 random), logits_ema / logits_raw (2, 17, 64) of their forward(idx, mode=None, orders)
#               with the EMA shadows copied in by position (as eval_ppl_AOGPT.py does) / with the raw weights.
#   sigma_gpt/  the same repository's model_sigmaGPT.py (bias False, tied head), the train_CADD.py checkpoint dict
#               {model, optimizer, model_args, iter_num, config} (no EMA), 2 layers × 16. logits (2, 17, 64) of
#               forward_fn(idx, orders) (their forward(mode=None) names an undefined variable: spec-ao-gpt §6.8).
#   sedd/       louaaron/Score-Entropy-Discrete-Diffusion SEDD (absorb, loglinear, scale_by_sigma) saved by its
#               Hugging Face mixin (config.json + model.safetensors), read back with SEDD.from_pretrained. 2 blocks ×
#               16, 2 heads, cond_dim 16, length 16, vocab 50 (+ mask id 50).
#   radd/       ML-GSAI/RADD RADD after one t_DCE training step (their loss, optimizer and EMA), saved as their run
#               folder (checkpoints-meta/checkpoint.pth {optimizer, model, ema, step} + .hydra/config.yaml), read
#               back with their load_model_local (which copies the EMA in), converted with --config.
# Encoder goldens (sedd, radd): for each of 2 orders σ (identity, random) and each step k, the input with positions
# σ(k..T-1) masked and — SEDD — σ_noise = -log(1 - min((T-k)/T, 1 - 1e-3)) (the masked fraction as the log-linear
# schedule's total noise: aobench's exact chain likelihood, plugins/common/diffusion_common.h): logp (2, 16, 50) =
# log_softmax over the 50 real tokens of their output at position σ(k) (SEDD: the log score, whose σ offset cancels;
# RADD: model.logits). RADD has logp_ema and logp_raw.
# Every parameter is redrawn before anything else (their inits zero the SEDD/RADD heads and adaLN: all-zero logits).
# flash-attn is CUDA only: for SEDD the script registers a stand-in flash_attn_varlen_qkvpacked_func that computes
# the same (softmax(q kᵀ/√d) v per sequence, no mask, no dropout) with torch SDPA for equal-length sequences.
# Run (CPU, a minute): python deps in a folder on PYTHONPATH (pip install --target DIR einops omegaconf
#   huggingface_hub safetensors numpy pyyaml), then
#   PYTHONPATH=DIR /root/.cache/aobench/venv/bin/python tests/data/make_import_fixtures.py \
#     --ao-gpt-repo AO-GPT-MDM --sedd-repo Score-Entropy-Discrete-Diffusion --radd-repo RADD
# with checkouts at the commits of docs/spec-ao-gpt.md (3a02e3b) and docs/spec-sedd-radd.md (0605786, 60b772d).
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import types

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "import")
ROOT = os.path.dirname(os.path.dirname(HERE))
CONVERTER = os.path.join(ROOT, "scripts", "convert_torch_checkpoint.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import convert_torch_checkpoint as converter  # noqa: E402  (its safetensors writer, for the goldens)

T, V, VP, B = 16, 50, 64, 2  # block size, real vocabulary, AO-GPT / σ-GPT rows (padded to 64), batch
AUTHOR_MODULES = ("model", "utils", "noise_lib", "losses", "graph_lib", "catsample", "load_model", "sampling", "ema",
                  "data", "model_AOGPT_AdaLN6_NoRep_cond_128_trunc_qknorm", "model_sigmaGPT", "flash_attn")


REPOS_ON_PATH = []


def use_repo(path):
    """Puts one authors' repository first on sys.path, forgetting modules another one loaded under the same names."""
    for name in list(sys.modules):
        if name.split(".")[0] in AUTHOR_MODULES:
            del sys.modules[name]
    sys.path = [p for p in sys.path if p not in REPOS_ON_PATH]
    REPOS_ON_PATH.append(os.path.abspath(path))
    sys.path.insert(0, REPOS_ON_PATH[-1])


def randomize(model, g):
    """Every parameter redrawn: norm weights 1 ± 0.3, biases ± 0.3, matrices std 1/√fan_in, tables std 1."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                base = 1.0 if ("norm" in name or "ln_" in name) and name.endswith("weight") else 0.0
                p.copy_(base + 0.3 * torch.randn(p.shape, generator=g))
            elif "wte" in name or "wpe" in name or "wtpe" in name or "wnonee" in name or "embedding" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * p.shape[-1] ** -0.5)


def convert(src, out_dir, config=None):
    """The real CLI of the converter, arguments as a list (no shell)."""
    cmd = [sys.executable, CONVERTER, src, out_dir, "--force"] + (["--config", config] if config else [])
    subprocess.run(cmd, check=True)


def save_golden(folder, tensors):
    converter.write_safetensors(os.path.join(folder, "golden.safetensors"),
                                [(k, v.detach().contiguous()) for k, v in tensors.items()])


def inputs(g):
    ids = torch.randint(0, V, (B, T), generator=g)
    orders = torch.stack([torch.arange(T), torch.randperm(T, generator=g)])
    return ids, orders


def nanogpt_config(repo, config_file, **tiny):
    """The `config` dict their training scripts save: the config file's assignments (the script's defaults that it
    does not override are left out), with the tiny shape."""
    cfg = {}
    if config_file:
        with open(os.path.join(repo, config_file)) as f:
            exec(f.read(), {}, cfg)  # plain assignments (configurator.py execs the same file)
    cfg.update(tiny)
    return cfg


def make_ao_gpt(repo, work):
    use_repo(repo)
    from model_AOGPT_AdaLN6_NoRep_cond_128_trunc_qknorm import AOGPT, AOGPTConfig
    from ema import ExponentialMovingAverage
    g = torch.Generator().manual_seed(11)
    torch.manual_seed(11)
    random.seed(11)  # their Random_CL draws the L2R rows with Python's random
    model_args = dict(n_layer=2, n_head=2, n_embd=8, block_size=T, bias=True, vocab_size=VP, dropout=0.0)
    model = AOGPT(AOGPTConfig(**model_args))
    randomize(model, g)
    config = nanogpt_config(repo, "config_larger_model_v3/train_AOGPT_AdaLN6_NoRep_cond_128.py", n_layer=2, n_head=2,
                            n_embd=8, block_size=T, batch_size=B, gradient_accumulation_steps=1, learning_rate=0.05)
    optimizer = model.configure_optimizers(config["weight_decay"], config["learning_rate"], (0.9, 0.95), "cpu")
    ema = ExponentialMovingAverage(model.parameters(), decay=config["ema_rate"])
    # One step of their loop: forward in Random_CL mode, backward, clip, step, EMA update.
    X = torch.randint(0, V, (B, T), generator=g)
    _, loss = model(X, mode="Random_CL", random_ratio=0.9)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    ema.update(model.parameters())
    optimizer.zero_grad(set_to_none=True)
    checkpoint = {"model": model.state_dict(), "ema_model": ema.state_dict(), "ema_rate": config["ema_rate"],
                  "optimizer": optimizer.state_dict(), "model_args": model_args, "iter_num": 10000, "config": config}
    pt = os.path.join(work, "ckpt_10000.pt")
    torch.save(checkpoint, pt)

    ids, orders = inputs(g)
    model.eval()
    with torch.no_grad():
        logits_raw, _ = model(ids, mode=None, orders=orders)  # (B, T+1, VP)
        for s_param, param in zip(ema.state_dict()["shadow_params"], model.parameters()):
            param.data.copy_(s_param.data)  # eval_ppl_AOGPT.py's EMA copy, by position
        logits_ema, _ = model(ids, mode=None, orders=orders)
    print(f"ao_gpt: |logits| max {logits_ema.abs().max():.2f}, EMA vs raw differ by "
          f"{(logits_ema - logits_raw).abs().max():.3e}")
    folder = os.path.join(OUT, "ao_gpt")
    convert(pt, folder)
    save_golden(folder, {"input_ids": ids, "orders": orders, "logits_ema": logits_ema, "logits_raw": logits_raw})


def make_sigma_gpt(repo, work):
    use_repo(repo)
    from model_sigmaGPT import AOGPT, AOGPTConfig
    g = torch.Generator().manual_seed(12)
    torch.manual_seed(12)
    model_args = dict(n_layer=2, n_head=2, n_embd=16, block_size=T, bias=False, vocab_size=VP, dropout=0.0)
    model = AOGPT(AOGPTConfig(**model_args))
    randomize(model, g)  # wte and lm_head are one Parameter: redrawn once
    config = nanogpt_config(repo, None, n_layer=2, n_head=2, n_embd=16, block_size=T, batch_size=B,
                            gradient_accumulation_steps=1, learning_rate=0.05, weight_decay=0.1, bias=False)
    optimizer = model.configure_optimizers(config["weight_decay"], config["learning_rate"], (0.9, 0.95), "cpu")
    X = torch.randint(0, V, (B, T), generator=g)
    _, loss = model(X, mode="Random")
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "model_args": model_args,
                  "iter_num": 20000, "config": config}  # train_CADD.py's dict: no EMA
    pt = os.path.join(work, "ckpt_20000.pt")
    torch.save(checkpoint, pt)
    ids, orders = inputs(g)
    model.eval()
    with torch.no_grad():
        logits, _ = model.forward_fn(ids, orders)  # (B, T+1, VP)
    print(f"sigma_gpt: |logits| max {logits.abs().max():.2f}")
    folder = os.path.join(OUT, "sigma_gpt")
    convert(pt, folder)
    save_golden(folder, {"input_ids": ids, "orders": orders, "logits": logits})


def flash_attn_stand_in():
    """flash_attn.flash_attn_interface.flash_attn_varlen_qkvpacked_func for equal-length sequences on the CPU."""
    def varlen_qkvpacked(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, causal=False, **_):
        assert dropout_p == 0.0 and not causal
        n = cu_seqlens.numel() - 1
        lengths = cu_seqlens[1:] - cu_seqlens[:-1]
        assert bool((lengths == max_seqlen).all()), "the stand-in covers equal lengths only"
        q, k, v = qkv.view(n, max_seqlen, 3, *qkv.shape[2:]).permute(2, 0, 3, 1, 4)  # (n, h, s, d) each
        out = F.scaled_dot_product_attention(q, k, v)  # scale 1/√d, no mask
        return out.transpose(1, 2).reshape(n * max_seqlen, *qkv.shape[2:])  # (n·s, h, d)
    pkg = types.ModuleType("flash_attn")
    iface = types.ModuleType("flash_attn.flash_attn_interface")
    iface.flash_attn_varlen_qkvpacked_func = varlen_qkvpacked
    pkg.flash_attn_interface = iface
    sys.modules["flash_attn"] = pkg
    sys.modules["flash_attn.flash_attn_interface"] = iface


def hydra_config(repo, model_yaml, **model):
    """Their configs/config.yaml with configs/model/<model_yaml> as the model group (the composition Hydra saves as
    .hydra/config.yaml), tiny sizes."""
    from omegaconf import OmegaConf  # Hydra's loader: reads 3e-4 as a number, where plain YAML 1.1 sees a string
    cfg = OmegaConf.to_container(OmegaConf.load(os.path.join(repo, "configs", "config.yaml")))
    for key in ("defaults", "hydra"):
        cfg.pop(key, None)
    cfg["model"] = OmegaConf.to_container(OmegaConf.load(os.path.join(repo, "configs", "model", model_yaml)))
    cfg["model"].update(model)
    cfg["tokens"] = V
    cfg["ngpus"] = 1
    return cfg


def chain_inputs(ids, orders):
    """Every step k of both chains as one batch: inputs (2T, T) with σ(k..T-1) masked, σ_noise (2T), position σ(k)."""
    xs, sig, pos = [], [], []
    for o in range(B):
        for k in range(T):
            x = ids[o].clone()
            x[orders[o, k:]] = V  # the mask id
            xs.append(x)
            rate = min((T - k) / T, 1 - 1e-3)
            sig.append(-torch.log1p(torch.tensor(-rate, dtype=torch.float64)).float())
            pos.append(int(orders[o, k]))
    return torch.stack(xs), torch.stack(sig), torch.tensor(pos)


def chain_logp(out, pos):
    """log_softmax over the V real tokens at each input's position σ(k): (2T, V+1) → (B, T, V)."""
    rows = out[torch.arange(out.shape[0]), pos, :V]
    return torch.log_softmax(rows.float(), -1).view(B, T, V)


def make_sedd(repo, work):
    use_repo(repo)
    flash_attn_stand_in()
    from omegaconf import OmegaConf
    from model import SEDD
    g = torch.Generator().manual_seed(13)
    torch.manual_seed(13)
    cfg = hydra_config(repo, "small.yaml", name="tiny", hidden_size=16, cond_dim=16, length=T, n_blocks=2, n_heads=2)
    model = SEDD(OmegaConf.create(cfg))
    randomize(model, g)
    hf = os.path.join(work, "sedd-tiny")
    model.save_pretrained(hf, config=cfg)
    loaded = SEDD.from_pretrained(hf).eval()  # their loader (load_model_hf) reads the folder back
    ids, orders = inputs(g)
    x, sig, pos = chain_inputs(ids, orders)
    with torch.no_grad():
        logp = chain_logp(loaded(x, sig), pos)
    print(f"sedd: logp range [{logp.min():.2f}, {logp.max():.2f}]")
    folder = os.path.join(OUT, "sedd")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    for name in sorted(os.listdir(hf)):
        if name in ("config.json", "model.safetensors"):
            shutil.copyfile(os.path.join(hf, name), os.path.join(folder, name))
    assert sorted(os.listdir(folder)) == ["config.json", "model.safetensors"], os.listdir(hf)
    save_golden(folder, {"input_ids": ids, "orders": orders, "logp": logp})


def make_radd(repo, work):
    use_repo(repo)
    from omegaconf import OmegaConf
    from model import RADD
    from model.ema import ExponentialMovingAverage
    import losses
    import noise_lib
    import load_model
    g = torch.Generator().manual_seed(14)
    torch.manual_seed(14)
    cfg = hydra_config(repo, "small_radd.yaml", name="tiny_radd", hidden_size=16, cond_dim=16, length=T, n_blocks=2,
                       n_heads=2, dtype="float32")
    cfg["training"]["batch_size"], cfg["training"]["accum"] = B, 1
    ocfg = OmegaConf.create(cfg)
    model = RADD(ocfg)
    randomize(model, g)
    noise = noise_lib.get_noise(ocfg)
    ema = ExponentialMovingAverage(model.parameters(), decay=cfg["training"]["ema"])
    optimizer = losses.get_optimizer(ocfg, model.parameters())
    for group in optimizer.param_groups:
        group["lr"] = 0.05  # one large step, so EMA and raw weights differ visibly
    loss_fn = losses.get_loss_fn(noise, V + 1, True, loss_type=cfg["training"]["loss_type"])
    loss = loss_fn(model, torch.randint(0, V, (B, T), generator=g)).mean()
    loss.backward()
    optimizer.step()
    ema.update(model.parameters())
    optimizer.zero_grad(set_to_none=True)
    run = os.path.join(work, "radd-run")
    os.makedirs(os.path.join(run, "checkpoints-meta"))
    os.makedirs(os.path.join(run, ".hydra"))
    OmegaConf.save(ocfg, os.path.join(run, ".hydra", "config.yaml"))
    pth = os.path.join(run, "checkpoints-meta", "checkpoint.pth")
    torch.save({"optimizer": optimizer.state_dict(), "model": model.state_dict(), "ema": ema.state_dict(),
                "step": 30000}, pth)  # utils.save_checkpoint's dict (model from the DDP .module)
    ema_model, _ = load_model.load_model_local(run, "cpu")  # their loader: EMA copied into the parameters
    raw_model = RADD(ocfg)
    raw_model.load_state_dict(torch.load(pth, weights_only=True)["model"])
    ids, orders = inputs(g)
    x, _, pos = chain_inputs(ids, orders)
    with torch.no_grad():
        logp_ema = chain_logp(ema_model.eval().logits(x), pos)
        logp_raw = chain_logp(raw_model.eval().logits(x), pos)
    print(f"radd: EMA vs raw log p differ by {(logp_ema - logp_raw).abs().max():.3e}")
    folder = os.path.join(OUT, "radd")
    convert(pth, folder, config=os.path.join(run, ".hydra", "config.yaml"))
    save_golden(folder, {"input_ids": ids, "orders": orders, "logp_ema": logp_ema, "logp_raw": logp_raw})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ao-gpt-repo", required=True, help="checkout of scxue/AO-GPT-MDM")
    ap.add_argument("--sedd-repo", required=True, help="checkout of louaaron/Score-Entropy-Discrete-Diffusion")
    ap.add_argument("--radd-repo", required=True, help="checkout of ML-GSAI/RADD")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        make_ao_gpt(args.ao_gpt_repo, work)
        make_sigma_gpt(args.ao_gpt_repo, work)
        make_sedd(args.sedd_repo, work)
        make_radd(args.radd_repo, work)
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(OUT) for f in fs)
    print(f"wrote {OUT}: {total} bytes")


if __name__ == "__main__":
    main()
