#!/usr/bin/env python3
"""make_expected.py — token ids from Hugging Face `tokenizers` for the tokenizer test corpus.

Usage: python3 tests/tokenizer/make_expected.py TOKENIZER_JSON tests/tokenizer

Reads DIR/corpus.txt (UTF-8; lines split on "\\n", a "\\r" stays in its line) and writes
DIR/expected.json: for every line its text, its ids (encode(text, add_special_tokens=False)) and
its decode (decode(ids, skip_special_tokens=False)); then the same for the whole file as one text,
plus the whole file's decode with skip_special_tokens=True. tests/test_tokenizer.c compares
tailor's tokenizer against it. make_expected.mjs writes the same file through the npm package.
"""
import hashlib
import json
import os
import sys

import tokenizers
from tokenizers import Tokenizer


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def corpus_lines(text):
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def entry(tok, text):
    ids = tok.encode(text, add_special_tokens=False).ids
    return {"text": text, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)}


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make_expected.py TOKENIZER_JSON DIR")
    tok_path, out_dir = sys.argv[1], sys.argv[2]
    tok = Tokenizer.from_file(tok_path)
    corpus_path = os.path.join(out_dir, "corpus.txt")
    with open(corpus_path, encoding="utf-8", newline="") as f:
        text = f.read()
    whole = entry(tok, text)
    whole["decoded_skip_special"] = tok.decode(whole["ids"], skip_special_tokens=True)
    head = {
        "generator": "tokenizers %s (python)" % tokenizers.__version__,
        "tokenizer_sha256": sha256_file(tok_path),
        "corpus_sha256": sha256_file(corpus_path),
    }
    dump = lambda v: json.dumps(v, ensure_ascii=True, separators=(",", ":"))
    out = ["{"]
    out += ['%s:%s,' % (dump(k), dump(v)) for k, v in head.items()]
    out.append('"lines":[')
    items = [dump(entry(tok, line)) for line in corpus_lines(text)]
    out.append(",\n".join(items))
    out.append("],")
    out.append('"whole":%s' % dump(whole))
    out.append("}")
    with open(os.path.join(out_dir, "expected.json"), "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %s: %d lines, %d ids for the whole file"
          % (os.path.join(out_dir, "expected.json"), len(items), len(whole["ids"])))


if __name__ == "__main__":
    main()
