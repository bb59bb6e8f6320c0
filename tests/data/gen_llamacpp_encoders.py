#!/usr/bin/env python3
"""Writes llamacpp-encoders.jsonl: llama.cpp's token ids and pooled, unit-length
embeddings for the tiny encoder presets (tiny-bert, tiny-nomic-bert) at F32 and
Q8_0, one record per (preset, type, prompt).

Usage: gen_llamacpp_encoders.py OCTO_MAKE_MODEL LLAMA_EMBEDDING OUT.jsonl
  OCTO_MAKE_MODEL: Octo's build/bin/octo-make-model (models at --seed 1)
  LLAMA_EMBEDDING: llama.cpp's llama-embedding (examples/embedding), built
    from ../shared/tools' tarball, CPU only

llama-embedding runs with the model's own pooling (mean for both presets),
--embd-normalize 2 (L2) and a batch that holds the whole input; its
--verbose-prompt lines give the ids it fed the model.
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

PRESETS = ["tiny-bert", "tiny-nomic-bert"]
TYPES = ["F32", "Q8_0"]
PROMPTS = [
    "the cat sat on the mat",
    "Once upon a time, there was a little girl named Lily. She loved to play outside!",
    "hello",
]


def sha256_of(path):
    # Names the exact file the record came from (for a person regenerating
    # it); the test checks the regenerated file's size and the ids instead.
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run_llama(llama, model, prompt):
    out = subprocess.run(
        [llama, "-m", model, "-p", prompt, "-c", "512", "-b", "512", "-ub", "512", "--embd-normalize", "2",
         "--embd-output-format", "json", "--verbose-prompt", "-t", "1"],
        capture_output=True, check=True)
    stdout = out.stdout.decode("utf-8", "replace")
    # stdout: the ids as lines "   141 -> ' the'", then the JSON document.
    head, body = stdout.split("\n{", 1)
    ids = [int(m.group(1)) for m in re.finditer(r"^\s*(\d+) -> '", head, re.M)]
    embedding = json.loads("{" + body)["data"][0]["embedding"]
    return ids, embedding


def main():
    make_model, llama, out_path = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as tmp, open(out_path, "w") as out:
        for preset in PRESETS:
            for typ in TYPES:
                model = os.path.join(tmp, f"{preset}-{typ}.gguf")
                subprocess.run([make_model, "--preset", preset, "--type", typ, "--seed", "1", "-o", model],
                               check=True, capture_output=True)
                for prompt in PROMPTS:
                    ids, embedding = run_llama(llama, model, prompt)
                    record = {"preset": preset, "type": typ, "seed": 1, "gguf_sha256": sha256_of(model),
                              "gguf_bytes": os.path.getsize(model), "pooling": "mean", "prompt": prompt,
                              "tokens": ids, "embedding": [round(v, 7) for v in embedding]}
                    out.write(json.dumps(record, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
