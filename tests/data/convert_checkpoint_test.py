# Implements: the ctest ConvertTorchCheckpoint (tests/CMakeLists.txt): scripts/convert_torch_checkpoint.py on a
# torch.save file shaped like the authors' checkpoints — an OrderedDict state dict whose order is not sorted, a tied
# tensor, an EMA list, an optimizer state with int keys, a non-finite float — checked field by field, then the
# refusals: an existing output folder without --force, and a pickle with a Python object under weights_only.
# Run: python3 tests/data/convert_checkpoint_test.py scripts/convert_torch_checkpoint.py (the build's interpreter).
import argparse
import collections
import json
import os
import struct
import subprocess
import sys
import tempfile

import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in head.items():
        dtype = {"F32": torch.float32, "I64": torch.int64}[h["dtype"]]
        a, b = h["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=dtype).view(h["shape"]) if b > a else \
            torch.empty(h["shape"], dtype=dtype)
    return out


def main():
    converter = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        wte = torch.randn(8, 4)
        sd = collections.OrderedDict()
        sd["transformer.wte.weight"] = wte
        sd["transformer.h.0.attn.c_attn.weight"] = torch.randn(12, 4)
        sd["lm_head.weight"] = wte  # tied: the same tensor twice
        sd["a.first_after_sorting"] = torch.arange(3)
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.AdamW(model.parameters())
        model(torch.randn(1, 4)).sum().backward()
        opt.step()
        ckpt = {"model": sd, "ema_model": {"decay": 0.9999, "num_updates": 3, "shadow_params": [wte * 2]},
                "optimizer": opt.state_dict(), "model_args": {"n_layer": 1, "bias": True}, "iter_num": 7,
                "best_val_loss": float("inf")}
        src = os.path.join(tmp, "ckpt_7.pt")
        torch.save(ckpt, src)
        out = os.path.join(tmp, "conv")
        subprocess.run([sys.executable, converter, src, out], check=True)
        doc = json.load(open(os.path.join(out, "checkpoint.json")), object_pairs_hook=collections.OrderedDict)
        tensors = read_safetensors(os.path.join(out, "tensors.safetensors"))
        obj = doc["object"]
        assert doc["format"] == "aobench.torch_checkpoint/1" and doc["source"]["file"] == "ckpt_7.pt", doc["source"]
        assert list(obj["model"]) == list(sd), list(obj["model"])  # the pickle's order, not sorted
        assert obj["model"]["lm_head.weight"] == {"__tensor__": None, "same_as": "model/transformer.wte.weight",
                                                  "dtype": "F32", "shape": [8, 4]}, obj["model"]["lm_head.weight"]
        assert torch.equal(tensors["model/transformer.wte.weight"], wte)
        assert torch.equal(tensors["model/a.first_after_sorting"], torch.arange(3))
        assert torch.equal(tensors["ema_model/shadow_params/0"], wte * 2)
        assert obj["model_args"] == {"n_layer": 1, "bias": True} and obj["iter_num"] == 7
        assert obj["best_val_loss"] == {"__float__": "inf"}, obj["best_val_loss"]
        state = obj["optimizer"]["state"]["__dict__"]  # int keys: a list of pairs
        assert state[0][0] == 0 and state[0][1]["exp_avg"]["dropped"] is True, state[0]
        assert not any(k.startswith("optimizer/") for k in tensors), sorted(tensors)
        again = subprocess.run([sys.executable, converter, src, out], capture_output=True, text=True)
        assert again.returncode != 0 and "--force" in again.stderr, again.stderr
        torch.save({"model": sd, "args": argparse.Namespace(lr=0.1)}, src)  # a class weights_only refuses
        unsafe = subprocess.run([sys.executable, converter, src, out + "2"], capture_output=True, text=True)
        assert unsafe.returncode != 0 and "--full-pickle" in unsafe.stderr, unsafe.stderr
        assert not os.path.exists(out + "2")
    print("convert_checkpoint_test: 1 passed, 0 failed")


if __name__ == "__main__":
    main()
