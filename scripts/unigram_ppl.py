#!/usr/bin/env python3
"""Unigram reference level for docs/results: fits add-alpha unigram probabilities on a packed training token
file and reports their NLL / perplexity on an evaluation token file, over the same non-overlapping windows
`aobench eval` scores (first token of each window skipped, and all tokens). Standard library only.

  scripts/unigram_ppl.py TRAIN.bin EVAL.bin [--window 1024] [--alpha 1.0]

Token files: datasets/token_file.h (256 little-endian int32 header: magic 20240520, version 1 = uint16 /
2 = uint32 tokens, count, vocab size, window, EOS).
"""
import argparse
import array
import math
import sys
from collections import Counter

MAGIC = 20240520


def read_tokens(path):
    with open(path, "rb") as f:
        header = array.array("i")
        header.frombytes(f.read(256 * 4))
        if sys.byteorder != "little":
            header.byteswap()
        if header[0] != MAGIC or header[1] not in (1, 2):
            sys.exit(f"{path}: not an aobench token file (magic {header[0]}, version {header[1]})")
        tokens = array.array("H" if header[1] == 1 else "I")
        tokens.frombytes(f.read())
        if sys.byteorder != "little":
            tokens.byteswap()
    count, vocab = header[2], header[3]
    if len(tokens) != count:
        sys.exit(f"{path}: header says {count} tokens, file holds {len(tokens)}")
    return tokens, vocab


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("train")
    ap.add_argument("eval")
    ap.add_argument("--window", type=int, default=1024, help="evaluation window T (default 1024)")
    ap.add_argument("--alpha", type=float, default=1.0, help="add-alpha smoothing over the vocabulary (default 1)")
    a = ap.parse_args()
    train, vocab = read_tokens(a.train)
    ev, ev_vocab = read_tokens(a.eval)
    V = max(vocab, ev_vocab)
    counts = Counter(train)
    denom = len(train) + a.alpha * V
    windows = len(ev) // a.window
    nats_all = nats_skip = 0.0
    unseen = 0
    for w in range(windows):
        for i in range(w * a.window, (w + 1) * a.window):
            c = counts.get(ev[i], 0)
            unseen += c == 0
            nll = -math.log((c + a.alpha) / denom)
            nats_all += nll
            if i % a.window:
                nats_skip += nll
    n_all, n_skip = windows * a.window, windows * (a.window - 1)
    print(f"train {a.train}: {len(train)} tokens, {len(counts)} distinct ids, vocab {V}, add-{a.alpha} smoothing")
    print(f"eval {a.eval}: {windows} windows of {a.window} ({len(ev)} tokens), "
          f"{unseen} scored tokens unseen in train")
    for label, nats, n in (("first token skipped", nats_skip, n_skip), ("all tokens", nats_all, n_all)):
        print(f"{label + ':':20} {n} tokens, nll {nats / n:.4f} nats/token, ppl {math.exp(nats / n):.1f}")


if __name__ == "__main__":
    main()
