#!/usr/bin/env python3
# Implements: the golden fixture for tests/unit/tokenizer_test.cpp (spec-sedd-radd.md §4.3 step 1).
# Oracle: tiktoken's "gpt2" encoding rebuilt offline from the shared encoder.json + vocab.bpe
# (tiktoken.load.data_gym_to_mergeable_bpe_ranks; nothing is downloaded).
# Usage: python tests/data/make_tokenizer_golden.py /work/shared/data > tests/data/tokenizer/gpt2_golden.json
import json
import os
import sys

import tiktoken
from tiktoken.load import data_gym_to_mergeable_bpe_ranks

GPT2_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else os.environ["AOBENCH_DATA_DIR"]
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=os.path.join(data, "gpt2", "vocab.bpe"),
        encoder_json_file=os.path.join(data, "gpt2", "encoder.json"))
    enc = tiktoken.Encoding("gpt2_local", pat_str=GPT2_PAT, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": 50256}, explicit_n_vocab=50257)
    cases = [
        "Hello world",
        "",
        " ",
        "a",
        # unicode: CJK, accents, Arabic, combining marks, Cyrillic, Greek, Devanagari
        "日本語のテキストを処理します。中文分词测试。한국어 문장입니다.",
        "Café naïve résumé coöperate Ångström façade",
        "e\u0301 a\u0308 o\u0302\u0323 cafe\u0301 Z\u0351\u0324a\u0336l\u0317g\u033bo",
        "مرحبا بالعالم، هذا نص عربي ١٢٣٤٥",
        "Привет, мир! Ελληνικά κείμενα. नमस्ते दुनिया",
        # emoji: ZWJ sequences, flags, skin tones, keycaps
        "👨‍👩‍👧‍👦 family 🏳️‍🌈 flag 🇺🇸🇯🇵🇩🇪 👍🏽 1️⃣ 😀😃😄",
        "emoji at end 🎉",
        # whitespace runs
        "a  b   c    d",
        "tabs\there\t\tand\t\t\tmore",
        "line1\nline2\n\nline4\n\n\n",
        "trailing spaces   ",
        "   leading spaces",
        " \n \n\t \r\n  x",
        "\n\n\n\n",
        "mixed \u00a0nbsp\u3000ideographic\u2003em space",
        # contractions (case-sensitive in GPT-2's pattern)
        "it's they'll we've I'm you'd they're can't won't",
        "IT'S THEY'LL WE'VE I'M YOU'D THEY'RE 'D 'S 'Ll",
        "the dog's bone, the dogs' bones, rock 'n' roll",
        # numbers
        "1 12 123 1234 12345 3.14159 1,000,000 -42 +7 0x1F 1e-10 ²³ ½",
        "In 2019, 1234567890 people paid $19.99 for 100% of it.",
        # punctuation runs
        "Wait... what?!?! (yes) [no] {maybe} <tag/> \"quoted\" 'single' `code`",
        "--- *** ### @@@ !!! ??? ;;; ::: ... ,,, /// \\\\\\ |||",
        "foo@bar.com https://example.com/path?q=1&r=2#frag",
        "<|endoftext|> is not parsed as special",
        "def f(x):\n    return x ** 2  # comment\n",
    ]
    # Real passages: WikiText-2 raw valid and LAMBADA (committed as text so the test needs only the vocab).
    with open(os.path.join(data, "wikitext", "wikitext-2-raw", "wiki.valid.raw"), encoding="utf-8") as f:
        wiki = f.read()
    cases.append(wiki[:6000])
    cases.append(wiki[200000:204000])
    with open(os.path.join(data, "lambada", "lambada_test.jsonl"), encoding="utf-8") as f:
        lam = [json.loads(l)["text"] for l in f][:12]
    cases.append("\n".join(lam))
    out = [{"text": c, "ids": enc.encode_ordinary(c)} for c in cases]
    json.dump({"oracle": "tiktoken " + tiktoken.__version__ + " gpt2 (local vocab)", "cases": out},
              sys.stdout, ensure_ascii=False, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
