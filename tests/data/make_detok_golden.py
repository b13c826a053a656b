#!/usr/bin/env python3
# Implements: golden fixtures for tests/unit/detokenizer_test.cpp — the spec-sedd-radd.md §4.2 rules written
# with Python `re` exactly as SEDD's data.py applies them, run over real rows of each dataset (rows formed as
# `aobench prepare` forms them) plus hand-made edge cases.
# Usage: python tests/data/make_detok_golden.py /work/shared/data tests/data/detok
import json
import os
import re
import sys


def wt_detokenizer(string):
    string = string.replace("s '", "s'")
    string = re.sub(r"/' [0-9]/", r"/'[0-9]/", string)
    string = string.replace(" @-@ ", "-")
    string = string.replace(" @,@ ", ",")
    string = string.replace(" @.@ ", ".")
    string = string.replace(" : ", ": ")
    string = string.replace(" ; ", "; ")
    string = string.replace(" . ", ". ")
    string = string.replace(" ! ", "! ")
    string = string.replace(" ? ", "? ")
    string = string.replace(" , ", ", ")
    string = re.sub(r"\(\s*([^\)]*?)\s*\)", r"(\1)", string)
    string = re.sub(r"\[\s*([^\]]*?)\s*\]", r"[\1]", string)
    string = re.sub(r"{\s*([^}]*?)\s*}", r"{\1}", string)
    string = re.sub(r"\"\s*([^\"]*?)\s*\"", r'"\1"', string)
    string = re.sub(r"'\s*([^']*?)\s*'", r"'\1'", string)
    string = string.replace("= = = =", "====")
    string = string.replace("= = =", "===")
    string = string.replace("= =", "==")
    string = string.replace(" " + chr(176) + " ", chr(176))
    string = string.replace(" \n", "\n")
    string = string.replace("\n ", "\n")
    string = string.replace(" N ", " 1 ")
    string = string.replace(" 's", "'s")
    return string


def ptb_detokenizer(x):
    x = x.replace(" 's", "'s")
    x = x.replace("s ' ", "s' ")
    x = x.replace(" n't", "n't")
    x = x.replace(" \n ", "\n")
    x = x.replace("\\/", "/")
    for _ in range(10):
        x = x.replace(" N ", " 1 ")
    x = x.replace("$ 1", "$1")
    x = x.replace("# 1", "#1")
    x = x.replace("<unk>", "?")
    return x


def lm1b_detokenizer(x):
    x = x.replace('http : / / ', 'http://')
    x = x.replace('https : / / ', 'https://')
    x = re.sub(r' \'(\w+)', r"'\1", x)
    x = re.sub(r' (\w+) \. ', r' \1. ', x)
    x = re.sub(r' (\w+) \.$', r' \1.', x)
    x = x.replace(' ? ', '? ')
    x = re.sub(r' \?$', '?', x)
    x = x.replace(' ! ', '! ')
    x = re.sub(r' \!$', '!', x)
    x = x.replace(' , ', ', ')
    x = x.replace(' : ', ': ')
    x = x.replace(' ; ', '; ')
    x = x.replace(' / ', '/')
    x = re.sub(r'\" ([^\"]+) \"', r'"\1"', x)
    x = re.sub(r'\' ([^\']+) \'', r"'\1'", x)
    x = re.sub(r'\( ([^\(\)]+) \)', r"(\1)", x)
    x = re.sub(r'\[ ([^\[\]]+) \]', r"[\1]", x)
    x = x.replace('$ ', '$')
    x = x.replace('£ ', '£')
    return x


def lambada_detokenizer(text):
    text = text.replace("“", '"')
    text = text.replace("”", '"')
    return '\n' + text.strip()


FUNCS = {"wikitext": wt_detokenizer, "ptb": ptb_detokenizer, "lm1b": lm1b_detokenizer,
         "lambada": lambada_detokenizer}

HAND = {
    "wikitext": [
        " = Robert Boulter = \n", " = = Career = = \n", " = = = 2000 – 2005 = = = \n",
        " = = = = Deep = = = = \n", "", "the 1 @,@ 000 @-@ year @.@ old , and ; so : yes . no ! why ? \n",
        "the players ' union and James ' s ( born 1990 ) [ 2 ] { x } \" quoted \" ' single ' \n",
        "a (  spaced  ) b ( ) c [ ] d \" \" e ' ' \n", "a/' 5/b 30 ° C and N = N \n",
        "it 's John 's , the boys ' and girls ' club 's \n", "nested ( a ( b ) c ) \" x \" y \" z \" \n",
        "unicode ( \u00a0café\u2003 ) [ 日本 ] \n", " \n", "no newline ( x )",
    ],
    "ptb": [
        " the company 's chief said it does n't expect N N to be $ N million ",
        "the investors ' money and # N bonds <unk> 1\\/2 N N N",
        "s ' s ' N N N N", " \n a", "",
    ],
    "lm1b": [
        "He said : \" It 's fine . \" And then .", "See http : / / example.com / x and https : / / a.b .",
        "Why ? Because ! Yes , no ; maybe / so", "Price $ 5 and £ 3 ( approx ) [ 1 ] ' quoted ' .",
        "Trailing question ?", "Trailing bang !", "a ' b ' c ' d", "Unicode naïve . Ünïcödé ?",
        "\" a \" b \" c \"", "( nested ( x ) ) [ [ y ] ]", "",
    ],
    "lambada": [
        "  “Hello,” she said.  ", "\tno quotes\n", "“”", "", "  \u00a0 spaced \u3000 ",
    ],
}


def real_rows(data):
    with open(os.path.join(data, "wikitext", "wikitext-2-raw", "wiki.valid.raw"), encoding="utf-8") as f:
        wiki = [("" if not l.strip() else l) for l in f.readlines()]  # HF wikitext loader rows
    with open(os.path.join(data, "ptb", "ptb.valid.txt"), encoding="utf-8") as f:
        ptb = [l.strip() for l in f]  # HF ptb_text_only rows
    with open(os.path.join(data, "lm1b", "1b_benchmark.dev.tokens"), encoding="utf-8") as f:
        lm1b = [l.rstrip("\n") for l in f]
    with open(os.path.join(data, "lambada", "lambada_test.jsonl"), encoding="utf-8") as f:
        lam = [json.loads(l)["text"] for l in f]
    return {"wikitext": wiki[:150], "ptb": ptb[:300], "lm1b": lm1b[:200], "lambada": lam[:60]}


def main():
    data, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    for name, rows in real_rows(data).items():
        cases = [{"in": r, "out": FUNCS[name](r)} for r in rows]
        with open(os.path.join(out_dir, name + "_real.json"), "w", encoding="utf-8") as f:
            json.dump(cases, f, ensure_ascii=False, separators=(",", ":"))
    hand = {name: [{"in": r, "out": FUNCS[name](r)} for r in rows] for name, rows in HAND.items()}
    with open(os.path.join(out_dir, "hand.json"), "w", encoding="utf-8") as f:
        json.dump(hand, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
