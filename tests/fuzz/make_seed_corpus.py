#!/usr/bin/env python3
# Implements: writes the binary seed corpora of the token-file and safetensors fuzz
# targets (tests/fuzz/corpus/{token_file,safetensors}/). Formats: datasets/token_file.h, core/safetensors.h.
# Usage: python3 tests/fuzz/make_seed_corpus.py   (standard library only; the outputs are committed)
import json, os, struct

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

def token_file(version, tokens, vocab, window=0, eos=-1, count=None):
    header = [20240520, version, len(tokens) if count is None else count, vocab, window, eos] + [0] * 250
    fmt = "<%d%s" % (len(tokens), "H" if version == 1 else "I")
    return struct.pack("<256i", *header) + struct.pack(fmt, *tokens)

def safetensors(tensors, metadata=None, pad=0):
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode() + b" " * pad
    return struct.pack("<Q", len(h)) + h + data

seeds = {
    "token_file/v1_small": token_file(1, list(range(64)), 257, window=16, eos=256),
    "token_file/v2_large_ids": token_file(2, [70000, 1, 50256, 99999], 100000),
    "token_file/raw_uint16": struct.pack("<8H", *range(8)),
    "token_file/count_too_big": token_file(1, [1, 2, 3], 257, count=1000),
    "token_file/negative_count": token_file(1, [1, 2], 257, count=-5),
    "safetensors/f32_and_i64": safetensors({"w": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
                                            "step": ("I64", [], struct.pack("<q", 7))}, {"format": "pt"}),
    "safetensors/all_dtypes": safetensors({
        "a": ("F64", [1], struct.pack("<d", 1.5)), "b": ("F16", [2], b"\x00\x3c\x00\xc0"),
        "c": ("BF16", [1], b"\x80\x3f"), "d": ("I32", [1], struct.pack("<i", -3)),
        "e": ("I16", [1], struct.pack("<h", 9)), "f": ("I8", [2], b"\x01\xff"), "g": ("U8", [1], b"\x07"),
        "h": ("BOOL", [3], b"\x01\x00\x01"), "z": ("F32", [0, 3], b"")}),
    "safetensors/padded_header": safetensors({"x": ("F32", [1], struct.pack("<f", 0.5))}, pad=5),
    "safetensors/empty": safetensors({}),
}
for name, data in seeds.items():
    path = os.path.join(here, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
