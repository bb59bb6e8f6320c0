#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and runs Octo's main job so far: take a
# GGUF model, decompose it into a layer directory, verify it, show it, and
# generate from it (all layers resident, then streamed under a one-layer
# budget: the tokens must be the same).
#
#   bash deploy/quickstart.sh [MODEL.gguf [OUT_DIR]]
#
# Without a model it generates one (a small Llama-shaped Q4_K_M model with a
# working tokenizer, via octo-make-model) so the whole path runs anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/install-deps.sh
bash deploy/build.sh

model="${1:-}"
out="${2:-}"
if [ -z "$model" ]; then
  mkdir -p models
  model=models/tiny-llama-Q4_K_M.gguf
  echo "quickstart: no model given; generating $model"
  ./build/bin/octo-make-model --preset tiny --type Q4_K_M -o "$model"
fi
if [ -z "$out" ]; then
  out="models/$(basename "$model" .gguf)"
fi

./build/bin/octo-ctl decompose --force "$model" "$out"
./build/bin/octo-ctl verify "$out"
# The first lines of the summary (head may close the pipe early: not an error).
{ ./build/bin/octo-ctl inspect "$out" || true; } | head -n 40
# Greedy generation twice: resident, then with the smallest budget (one
# layer at a time read from disk). Same tokens, bit for bit.
largest_layer=$(stat -c %s "$out"/layer_*.bin | sort -n | tail -1)
resident=$(./build/bin/octo-ctl run "$out" "Once upon a time" -n 24 --temp 0 --tokens)
streamed=$(./build/bin/octo-ctl run "$out" "Once upon a time" -n 24 --temp 0 --tokens --budget "$largest_layer")
echo "quickstart: resident tokens: $resident"
echo "quickstart: streamed tokens: $streamed"
[ "$resident" = "$streamed" ] || { echo "quickstart: streamed and resident tokens differ" >&2; exit 1; }
./build/bin/octo-ctl run "$out" "Once upon a time" -n 48 --temp 0 --stats
echo "quickstart: done; the model directory is $out"
