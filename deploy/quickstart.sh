#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and runs Octo's main job: take a GGUF
# model, decompose it into a layer directory, verify it, show it, start the
# daemon (octod, with octo-loader as its child) on it and generate through
# it with octo-gen -- first with every layer resident, then with only the
# first and last layers resident and the rest streamed from disk through
# the loader's ring. The tokens must equal the in-process engine's.
#
#   bash deploy/quickstart.sh [MODEL.gguf [OUT_DIR]]
#
# Without a model it generates one (a small Llama-shaped Q4_K_M model with a
# working tokenizer and random weights, via octo-make-model) so the whole
# path runs anywhere; it says so, since that model's text is gibberish.
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/install-deps.sh
# A build is skipped when the binaries are newer than every source file.
if [ -x build/bin/octod ] && [ -x build/bin/octo-gen ] &&
  [ -z "$(find CMakeLists.txt proto daemon client kernels storage tests deploy/build.sh -newer build/bin/octod \
    -type f -print -quit)" ]; then
  echo "quickstart: the binaries in build/bin are current; build skipped"
else
  # The programs this script runs, alone: the tests and the executor build
  # are deploy/test.sh's to build.
  OCTO_BUILD_TARGETS="octod octo-loader octo-gen octo-ctl octo-make-model" bash deploy/build.sh
fi

model="${1:-}"
out="${2:-}"
if [ -z "$model" ]; then
  mkdir -p models
  model=models/tiny-llama-Q4_K_M.gguf
  echo "quickstart: no model given; generating $model, a small Llama-shaped model with RANDOM weights:"
  echo "quickstart: every step runs, but its text is gibberish. For real text: bash deploy/quickstart.sh MODEL.gguf"
  ./build/bin/octo-make-model --preset tiny --layers 8 --type Q4_K_M -o "$model"
fi
if [ -z "$out" ]; then
  out="models/$(basename "$model" .gguf)"
fi

./build/bin/octo-ctl decompose --force "$model" "$out"
./build/bin/octo-ctl verify "$out"
# The first lines of the summary (head may close the pipe early: not an error).
{ ./build/bin/octo-ctl inspect "$out" || true; } | head -n 40
# The daemon on a private socket, with the model's parent as models root.
run_dir="$(mktemp -d /tmp/octo-quickstart.XXXXXX)"
socket="$run_dir/octod.sock"
models_root="$(cd "$(dirname "$out")" && pwd)"
octod_pid=""
stop_octod() {
  if [ -n "$octod_pid" ] && kill -0 "$octod_pid" 2>/dev/null; then
    kill -TERM "$octod_pid"
    wait "$octod_pid" || true
  fi
  octod_pid=""
}
trap 'stop_octod; rm -rf "$run_dir"' EXIT
start_octod() {
  ./build/bin/octod --models-root "$models_root" --model "$(basename "$out")" --socket "$socket" "$@" \
    2>>"$run_dir/octod.log" &
  octod_pid=$!
  for _ in $(seq 1 100); do
    ./build/bin/octo-ctl health --socket "$socket" >/dev/null 2>&1 && return 0
    kill -0 "$octod_pid" 2>/dev/null || break
    sleep 0.2
  done
  echo "quickstart: octod did not start; its log:" >&2
  cat "$run_dir/octod.log" >&2
  exit 1
}
gen() { ./build/bin/octo-gen --socket "$socket" "$@"; }
# The token ids of octo-gen --json's lines, space-separated.
token_ids() { sed -n 's/.*"event":"token","id":\([0-9]*\).*/\1/p' | tr '\n' ' ' | sed 's/ *$//'; }

prompt="Once upon a time"
engine=$(./build/bin/octo-ctl run "$out" "$prompt" -n 24 --temp 0 --tokens --backend auto | tr -s ' ' | sed 's/ *$//')

# 1. Everything resident.
start_octod
resident=$(gen "$prompt" -n 24 --temp 0 --json | token_ids)
stop_octod

# 2. Only the first and last layer resident; the rest streamed by octo-loader.
largest_layer=$(stat -c %s "$out"/layer_*.bin | sort -n | tail -1)
start_octod --pin-first 1 --pin-last 1 --layer-budget "$((4 * largest_layer))"
streamed=$(gen "$prompt" -n 24 --temp 0 --json | token_ids)
echo "quickstart: engine tokens:   $engine"
echo "quickstart: resident tokens: $resident"
echo "quickstart: streamed tokens: $streamed"
[ "$engine" = "$resident" ] || { echo "quickstart: octod's tokens differ from the engine's" >&2; exit 1; }
[ "$resident" = "$streamed" ] || { echo "quickstart: streamed and resident tokens differ" >&2; exit 1; }
gen "$prompt" -n 48 --temp 0 --stats
./build/bin/octo-ctl status --socket "$socket"
stop_octod
echo "quickstart: done; the model directory is $out"
echo "quickstart: serve it: ./build/bin/octod --models-root $models_root --model $(basename "$out")"
echo "quickstart: then:     ./build/bin/octo-gen \"$prompt\""
