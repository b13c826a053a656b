# Implements: golden fixtures for the GPT-2 config.json options the gpt plugin's init_from_hf must honour
# exactly: one tiny random GPT2LMHeadModel per option, saved the Hugging Face way
# (config.json + model.safetensors) into tests/data/hf_gpt2_variants/<variant>/, with expected.safetensors
# holding input_ids (2, 12) and the transformers fp32 logits (2, 12, 64).
#   inverse_layer_idx  scale_attn_by_inverse_layer_idx=true  (scores also divided by layer index + 1)
#   no_scale           scale_attn_weights=false              (scores not divided by sqrt(head_dim))
#   n_inner            n_inner=40                            (MLP width other than 4·n_embd = 64)
#   gelu_fast          activation_function="gelu_fast"       (tanh GELU written as in FastGELUActivation)
# Weights are drawn with std 0.5 (HF's 0.02 makes attention nearly uniform, so a wrong score scale would
# hide below the test tolerance); the script checks that every option moves the logits by > 1e-3 (10× the test tolerance) against
# the same weights without it (gelu_fast: against the erf "gelu" — it equals gelu_new up to rounding).
# Run: PYTHONPATH=<dir with transformers + safetensors> /root/.cache/aobench/venv/bin/python \
#        tests/data/make_hf_gpt2_variants.py
import os

import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_gpt2_variants")
BASE = dict(n_layer=3, n_head=2, n_embd=16, n_positions=16, vocab_size=64, activation_function="gelu_new",
            layer_norm_epsilon=1e-5, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            bos_token_id=63, eos_token_id=63, attn_implementation="eager")
VARIANTS = {
    "inverse_layer_idx": dict(scale_attn_by_inverse_layer_idx=True),
    "no_scale": dict(scale_attn_weights=False),
    "n_inner": dict(n_inner=40),
    "gelu_fast": dict(activation_function="gelu_fast"),
}


def build(overrides, seed):
    torch.manual_seed(seed)
    cfg = GPT2Config(**{**BASE, **overrides})
    model = GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or ".ln_" in name:
                p.add_(0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.5)
    model.tie_weights()
    return model


def logits_of(model, ids):
    with torch.no_grad():
        return model(ids).logits.float().contiguous()


def main():
    ids = torch.randint(0, BASE["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(7))
    for i, (name, overrides) in enumerate(sorted(VARIANTS.items())):
        model = build(overrides, 100 + i)
        logits = logits_of(model, ids)  # (2, 12, 64)
        # The same weights without the option: the option must matter at this tolerance.
        baseline = {"gelu_fast": dict(activation_function="gelu")}.get(name, {})
        plain = build(baseline, 100 + i) if name != "n_inner" else None
        if plain is not None:
            delta = (logits - logits_of(plain, ids)).abs().max().item()
            assert delta > 1e-3, f"{name}: the option changes the logits by only {delta}"
            print(f"{name}: max |logits − logits without the option| = {delta:.3f}")
        out = os.path.join(OUT, name)
        os.makedirs(out, exist_ok=True)
        model.save_pretrained(out, safe_serialization=True)
        gen = os.path.join(out, "generation_config.json")
        if os.path.exists(gen):
            os.remove(gen)
        save_file({"input_ids": ids.to(torch.int64), "logits": logits},
                  os.path.join(out, "expected.safetensors"), metadata={"source": "make_hf_gpt2_variants.py"})
        print("wrote", out, sorted(os.listdir(out)))


if __name__ == "__main__":
    main()
