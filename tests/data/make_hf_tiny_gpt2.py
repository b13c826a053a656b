# Implements: the golden fixture for GPT-2 weight loading (plugins/gpt init_from_hf, spec-ao-gpt §8) and
# for reading files written by the Python `safetensors` package (core/safetensors.cpp).
# Creates a random tiny GPT2LMHeadModel (seed fixed), saves it the Hugging Face way (model.safetensors +
# config.json) into tests/data/hf_tiny_gpt2/, plus expected.safetensors holding 2 input sequences of
# length 16, their fp32 logits, and one small tensor per safetensors dtype (dtype_<NAME> = arange).
# Run: /root/.cache/aobench/venv/bin/python tests/data/make_hf_tiny_gpt2.py
import os

import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_tiny_gpt2")


def main():
    torch.manual_seed(1234)
    cfg = GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=64, vocab_size=300,
                     activation_function="gelu_new", layer_norm_epsilon=1e-5,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg).eval()
    # HF init leaves biases and LayerNorm at 0/1; randomise them so a wrong mapping cannot hide.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or ".ln_" in name:
                p.add_(0.1 * torch.randn_like(p))
    os.makedirs(OUT, exist_ok=True)
    model.save_pretrained(OUT, safe_serialization=True)

    ids = torch.randint(0, cfg.vocab_size, (2, 16), generator=torch.Generator().manual_seed(99))
    with torch.no_grad():
        logits = model(ids).logits.float().contiguous()  # (2, 16, 300)
    tensors = {"input_ids": ids.to(torch.int64), "logits": logits}
    for name, dt in [("F64", torch.float64), ("F32", torch.float32), ("F16", torch.float16),
                     ("BF16", torch.bfloat16), ("I64", torch.int64), ("I32", torch.int32),
                     ("I16", torch.int16), ("I8", torch.int8), ("U8", torch.uint8)]:
        tensors["dtype_" + name] = (torch.arange(6) - (0 if name == "U8" else 2)).to(dt).reshape(2, 3)
    tensors["dtype_BOOL"] = torch.tensor([[True, False, True], [False, False, True]])
    save_file(tensors, os.path.join(OUT, "expected.safetensors"), metadata={"source": "make_hf_tiny_gpt2.py"})
    print("wrote", OUT, sorted(os.listdir(OUT)))


if __name__ == "__main__":
    main()
