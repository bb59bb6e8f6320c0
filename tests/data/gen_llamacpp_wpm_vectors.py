#!/usr/bin/env python3
"""Writes llamacpp-wpm.{inp,out,special.out}: the ids llama.cpp's WordPiece
("bert") tokenizer gives for a set of inputs over the vocabulary
octo-make-model generates for tokenizer "bert" at VOCAB_SIZE tokens.

Usage: gen_llamacpp_wpm_vectors.py LLAMA_TOKENIZE MODEL.gguf LLAMACPP_INP OUT_DIR
  MODEL.gguf: e.g. octo-make-model --preset tiny-bert --vocab 4000 --type F32
  LLAMACPP_INP: llama.cpp's tokenizer test inputs (ggml-vocab-*.gguf.inp);
    they come first, then the inputs below.

.inp holds the inputs, each followed by "\\n__ggml_vocab_test__\\n"; .out one
line of ids per input with add_special and parse_special off (llama.cpp's
test-tokenizer-0), .special.out with both on (llama-tokenize's default).
"""
import os
import subprocess
import sys
import tempfile

SEPARATOR = b"\n__ggml_vocab_test__\n"

EXTRA = [
    "the first story was once upon a time",
    "THE First StOrY", "Testing tested tester tests", "hello-world: 3.14 + 2 = 5.14?!",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c9COLE \u00c5ngstr\u00f6m",  # composed accents
    "cafe\u0301 e\u0301",  # decomposed: the combining mark stays in the word
    "\u1fef\u037e\u00c0\u2126\u212b",  # NFD changes the class or letter
    "\u0130stanbul \u03a3\u039f\u03a6\u0399\u0391 \u03b1\u03b2\u03b3 \u00df\u1e9e",
    "\u4e00\u4e01\u4e02\u4e2d\u6587abc\u4e03def", "\u3042\u3044\u3046 \uac00\ub098\ub2e4 \u0e01\u0e02",
    "\U00020001\U0002b820\U0002b920", "\uf900\uff01\uff21\u3001\u3002",
    "emoji \U0001f600\U0001f680 mixed\U0001f600text \u2764\ufe0f",
    "a\u200bb\u200dc\u00adb\ufeffd", "tab\tnew\nline\r\nvt\x0bff\x0cnel\u0085nbsp\u00a0ideo\u3000end",
    "nul\x00byte", "\x01\x02\x7f\x9f control",
    "$100 + 50% = <tag> ^caret `tick` |pipe| ~tilde \u00a7\u00b6 \u20ac5 \u00a9 \u2122",
    "[CLS] [SEP] [MASK] [UNK] [PAD]", "a[SEP]b[CLS]", "[cls]",
    "x" * 300, "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "thethethethethethethethethethe", "1234567890 007 3.0e-5 1,000,000",
    "   many     spaces   between   ", "\u2581already \u2581marked", "##ing ##s",
    "don't won't it's we're they've i'm he'll", "\u0391\u03b8\u03ae\u03bd\u03b1 \u041c\u043e\u0441\u043a\u0432\u0430",
    "\U000e0001 \U0010fffd private\ue000use",
]
# Ill-formed UTF-8 (bytes, not text). Not "\xf4\x90\x80\x80" (above U+10FFFF):
# llama.cpp's WordPiece aborts on it (an uncaught "invalid codepoint").
EXTRA_BYTES = [b"bad \xff\xfe utf8", b"trunc \xe4\xb8", b"lone \x80 cont", b"surrogate \xed\xa0\x80 x", b"\xc3"]


def tokenize(binary, model, data, special):
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(data)
    args = [binary, "-m", model, "-f", f.name, "--ids", "--no-escape", "--log-disable"]
    if not special:
        args += ["--no-bos", "--no-parse-special"]
    out = subprocess.run(args, check=True, capture_output=True).stdout.decode().strip().splitlines()[-1]
    os.unlink(f.name)
    return [int(x) for x in out.strip("[]").split(",") if x.strip()]


def main():
    binary, model, llamacpp_inp, out_dir = sys.argv[1:5]
    inputs = open(llamacpp_inp, "rb").read().split(SEPARATOR)[:-1]
    inputs += [s.encode() for s in EXTRA] + EXTRA_BYTES
    base = os.path.join(out_dir, "llamacpp-wpm")
    with open(base + ".inp", "wb") as f:
        for data in inputs:
            f.write(data + SEPARATOR)
    for suffix, special in ((".out", False), (".special.out", True)):
        with open(base + suffix, "w") as f:
            for data in inputs:
                f.write(" ".join(map(str, tokenize(binary, model, data, special))) + "\n")
    print(f"{len(inputs)} inputs")


if __name__ == "__main__":
    main()
