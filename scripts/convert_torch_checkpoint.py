#!/usr/bin/env python3
# Implements: the one Python step of `aobench import` (README, "Importing the authors' checkpoints"): a torch.save
# file (a Python pickle in a zip) becomes a folder that C++ reads, with nothing mapped or renamed here:
#   OUT_DIR/tensors.safetensors  every tensor of the checkpoint, named by its path in the object
#                                ("model/transformer.wte.weight", "ema_model/shadow_params/3"; '/' joins the levels,
#                                a '~' or '/' inside a key is written '~0' / '~1' as in JSON Pointer, RFC 6901)
#   OUT_DIR/checkpoint.json      the object itself with each tensor replaced by {"__tensor__": NAME, "dtype", "shape"}
#                                (a tensor that is the very same storage view as an earlier one, e.g. σ-GPT's tied
#                                lm_head.weight, is {"__tensor__": null, "same_as": NAME}); dicts keep the pickle's
#                                key order (aobench reads it: EMA shadow lists follow the state dict's order);
#                                a dict with a non-string key becomes {"__dict__": [[key, value], ...]}
#   OUT_DIR/config.json          with --config: a Hydra config.yaml (SEDD/RADD runs) or a config.json, as JSON
# Why Python at all: LibTorch's C++ unpickler (torch::pickle_load, 2.11) turns every collections.OrderedDict into
# None, so no state dict saved by torch.save can be read from C++ ("Expected GenericDict but got None").
# The file is loaded with torch.load(weights_only=True): tensors and plain containers only, no code runs. The
# optimizer's moments are left out (the object keeps their shapes): aobench import starts no training from them.
# Usage: python3 scripts/convert_torch_checkpoint.py CHECKPOINT.pt OUT_DIR [--config CONFIG.yaml] [--force]
#        [--full-pickle]   (weights_only=False: runs the pickle's code; only for a file you trust)
import argparse
import ctypes
import hashlib
import json
import math
import os
import shutil
import struct
import sys

import torch

FORMAT = "aobench.torch_checkpoint/1"
DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
          torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
          torch.bool: "BOOL"}
DROPPED = ("optimizer", "scaler")  # top-level keys whose tensors are not written (training state, not weights)


def escape(key):
    return str(key).replace("~", "~0").replace("/", "~1")


class Walker:
    """Turns the loaded object into JSON, collecting its tensors in order of appearance."""

    def __init__(self):
        self.tensors = []  # (name, contiguous CPU tensor)
        self.views = {}  # storage view identity → name of its first occurrence
        self.dropped = 0

    def tensor(self, t, path):
        t = t.detach()
        if t.dtype not in DTYPES:
            sys.exit(f"convert: tensor '{'/'.join(path)}' has dtype {t.dtype}, which safetensors here does not "
                     f"hold (supported: {', '.join(str(d) for d in DTYPES)})")
        meta = {"dtype": DTYPES[t.dtype], "shape": list(t.shape)}
        if path and path[0] in DROPPED:
            self.dropped += 1
            return {"__tensor__": None, "dropped": True, **meta}  # training state, not converted
        name = "/".join(path)
        view = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if t.numel() > 0 and view in self.views:
            return {"__tensor__": None, "same_as": self.views[view], **meta}
        self.views[view] = name
        self.tensors.append((name, t.cpu().contiguous()))
        return {"__tensor__": name, **meta}

    def walk(self, obj, path):
        if isinstance(obj, torch.Tensor):
            return self.tensor(obj, path)
        if isinstance(obj, dict):
            if all(isinstance(k, str) for k in obj):
                return {k: self.walk(v, path + [escape(k)]) for k, v in obj.items()}
            return {"__dict__": [[self.walk(k, path + ["key"]), self.walk(v, path + [escape(k)])]
                                 for k, v in obj.items()]}
        if isinstance(obj, (list, tuple)):
            return [self.walk(v, path + [str(i)]) for i, v in enumerate(obj)]
        if obj is None or isinstance(obj, (bool, int, str)):
            return obj
        if isinstance(obj, float):
            return obj if math.isfinite(obj) else {"__float__": repr(obj)}
        return {"__object__": type(obj).__module__ + "." + type(obj).__qualname__, "repr": repr(obj)}


def write_safetensors(path, tensors):
    """The safetensors layout: u64 header length, JSON header, raw little-endian bytes (offsets from the data)."""
    header, offset = {}, 0
    for name, t in tensors:
        n = t.numel() * t.element_size()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, t in tensors:
            n = t.numel() * t.element_size()
            for start in range(0, n, 1 << 26):  # 64 MiB at a time: no second copy of a large tensor
                f.write(ctypes.string_at(t.data_ptr() + start, min(1 << 26, n - start)))
        f.flush()
        os.fsync(f.fileno())


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def read_config(path):
    if path.endswith((".yaml", ".yml")):
        try:  # OmegaConf (Hydra's) reads 1e-4 as a number; plain YAML 1.1 reads it as a string
            from omegaconf import OmegaConf
            return OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        except ImportError:
            pass
        try:
            import yaml
        except ImportError:
            sys.exit("convert: reading a YAML config needs omegaconf or PyYAML (pip install omegaconf)")
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("checkpoint", help="a file written by torch.save (.pt, .pth, .bin)")
    ap.add_argument("out_dir", help="folder to write tensors.safetensors and checkpoint.json into")
    ap.add_argument("--config", help="a Hydra config.yaml or a config.json to store as OUT_DIR/config.json")
    ap.add_argument("--force", action="store_true", help="replace OUT_DIR if it exists")
    ap.add_argument("--full-pickle", action="store_true",
                    help="torch.load(weights_only=False): runs code from the file; only for a file you trust")
    args = ap.parse_args()
    if sys.byteorder != "little":
        sys.exit("convert: safetensors is little-endian; this machine is not")
    if os.path.lexists(args.out_dir) and not args.force:
        sys.exit(f"convert: '{args.out_dir}' exists; pass --force to replace it")
    try:
        obj = torch.load(args.checkpoint, map_location="cpu", weights_only=not args.full_pickle)
    except Exception as e:  # torch raises UnpicklingError for a disallowed global, RuntimeError for a bad zip
        hint = ("" if args.full_pickle else "\nHINT: the file holds Python objects beyond tensors and plain containers; "
                "if you trust it, re-run with --full-pickle")
        sys.exit(f"convert: cannot load '{args.checkpoint}': {type(e).__name__}: {e}{hint}")
    walker = Walker()
    doc = {"format": FORMAT,
           "source": {"file": os.path.basename(args.checkpoint), "bytes": os.path.getsize(args.checkpoint),
                      "sha256": sha256(args.checkpoint)},
           "converted_by": "scripts/convert_torch_checkpoint.py",
           "torch": torch.__version__,
           "loader": "torch.load(weights_only=%s)" % (not args.full_pickle),
           "tensors": "tensors.safetensors"}
    doc["object"] = walker.walk(obj, [])
    tmp = args.out_dir.rstrip("/") + ".tmp_convert"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    write_safetensors(os.path.join(tmp, "tensors.safetensors"), walker.tensors)
    with open(os.path.join(tmp, "checkpoint.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, allow_nan=False)
        f.write("\n")
    if args.config:
        with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:
            json.dump(read_config(args.config), f, indent=1, allow_nan=False)
            f.write("\n")
    if os.path.lexists(args.out_dir):
        shutil.rmtree(args.out_dir)
    os.rename(tmp, args.out_dir)
    print(f"convert: {args.checkpoint} -> {args.out_dir}: {len(walker.tensors)} tensors written, "
          f"{walker.dropped} optimizer tensors left out")


if __name__ == "__main__":
    main()
