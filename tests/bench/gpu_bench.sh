#!/usr/bin/env bash
# Benchmark: the CUDA backend on a generated Llama-3-8B-shaped Q4_K_M model
# (random weights, real shapes). Generates the model with octo-make-model,
# decomposes it, and runs gpu_bench on it, which prints the pinned H2D and
# device-memory bandwidths, then streamed decode (2 GiB VRAM budget), the
# H2D rate its copies reached, the copy/compute overlap, resident decode,
# prefill of 2048 tokens streamed and resident, and 1/8/32 concurrent
# sessions streamed, each next to its limit and target (see gpu_bench.cc),
# and fails when the bytes copied to the device disagree with the streamed
# layers' sizes.
#
#   [BUILD_DIR=build] [PRESET=llama-3-8b] [TYPE=Q4_K_M] \
#     tests/bench/gpu_bench.sh [WORK_DIR] [-- GPU_BENCH_FLAGS...]
#   e.g. tests/bench/gpu_bench.sh /data/octo-bench -- --vram-budget 4GiB --tokens 64
#
# Needs a GPU (nvidia-smi) and an nvcc build; exits 2 without one. WORK_DIR
# (default BUILD_DIR/gpu-bench) keeps the model directory, so a second run
# skips generation; about 5 GB (twice that while decomposing).
#
#   [BUILD_DIR=build-sim] tests/bench/gpu_bench.sh --executor-accounting [WORK_DIR] [-- FLAGS...]
#
# runs only the accounting check, on the host executor (an OCTO_CUDA_SIM=ON
# build, no GPU), over a tiny 6-layer model generated afresh each time, of
# which gpu_bench streams 3 layers: the ctest gpu_bench_accounting.
#
#   [BUILD_DIR=build-sim] tests/bench/gpu_bench.sh --executor-profile [WORK_DIR] [-- --preset P --layers N [--batch B] [--whole-logits] [--prompts LIST]]
#
# prints what one decode token asks of the CUDA runtime, lines per family
# (llama, qwen2, qwen3, a MoE, a hybrid DeltaNet):
#   profile: <preset> batch=B launches/layer=... launches/token=... host-calls/token=...
#            blocking-waits/token=... pageable-copies/token=... allocations/token=... graph=yes|no
#            d2h-bytes/token=... context=...
# one per prompt length of LIST (default 8,300: within one attention split,
# and past it, where attention takes its second launch);
# the logits coming back as each row's candidates (a greedy or top-k
# request's), or with --whole-logits whole (what the others' requests take).
# counted through the real CUDA backend (kernels/cuda/api_counts.h) on two
# models of the family with fewer and more layers (tiny shapes by default:
# the counts do not depend on the sizes), scaled to the full-size preset's
# layer count. With --preset P, P's own shapes at N and 2N layers (slow on
# the executor for large presets). An nvcc build on a GPU counts the same.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
executor=0 profile=0
if [ "${1:-}" = "--executor-accounting" ]; then executor=1; shift; fi
if [ "${1:-}" = "--executor-profile" ]; then executor=1 profile=1; shift; fi
if [ "$executor" = 1 ]; then
  build="${BUILD_DIR:-$root/build-sim}"
else
  build="${BUILD_DIR:-$root/build}"
fi
work="$build/gpu-bench"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then work="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
bin="$build/bin"
source "$root/tests/bench/bench_models.sh"

if [ "$profile" = 1 ]; then
  bench_need gpu_bench octo-make-model octo-ctl
  preset="" layers=2 batch=1 whole_logits="" prompts="8,300"
  while [ $# -gt 0 ]; do
    case "$1" in
      --preset) preset="$2"; shift 2 ;;
      --layers) layers="$2"; shift 2 ;;
      --batch) batch="$2"; shift 2 ;;
      --whole-logits) whole_logits=--profile-whole-logits; shift ;;
      --prompts) prompts="$2"; shift 2 ;;
      *) echo "$(basename "$0") --executor-profile: unknown flag $1 (--preset P, --layers N, --batch B, --whole-logits, --prompts LIST)" >&2; exit 2 ;;
    esac
  done
  # The layer count octo-make-model gives preset $1.
  full_layers() {
    "$bin/octo-make-model" --list-presets |
      awk -v p="$1:" '$1 == p { for (i = 2; i < NF; i++) if ($(i + 1) == "layers,") print $i }'
  }
  # FULL SHAPES FEWER MORE: SHAPES generated at FEWER and MORE layers,
  # profiled as FULL.
  profile_family() {
    local full="$1" shapes="$2" fewer="$3" more="$4" n dir
    local dirs=()
    for n in "$fewer" "$more"; do
      dir="$work/profile-$shapes-$n"
      rm -rf "$dir" "$dir.gguf"
      "$bin/octo-make-model" --preset "$shapes" --layers "$n" --type "${TYPE:-Q4_K_M}" -o "$dir.gguf" >/dev/null
      "$bin/octo-ctl" decompose -q --force "$dir.gguf" "$dir" >"$dir.log" 2>&1 || { cat "$dir.log" >&2; exit 1; }
      rm -f "$dir.gguf" "$dir.log"
      dirs+=("$dir")
    done
    "$bin/gpu_bench" --profile-models "${dirs[0]},${dirs[1]}" --profile-name "$full" \
      --full-layers "$(full_layers "$full")" --profile-batch "$batch" --profile-prompts "$prompts" $whole_logits
    rm -rf "${dirs[@]}"
  }
  mkdir -p "$work"
  if [ -n "$preset" ]; then
    [ -n "$(full_layers "$preset")" ] || { echo "$(basename "$0"): no preset $preset (octo-make-model --list-presets)" >&2; exit 2; }
    echo "counts of $preset's shapes at $layers and $((2 * layers)) layers, per token at its full layer count:"
    profile_family "$preset" "$preset" "$layers" $((2 * layers))
  else
    echo "counts of each family's tiny shapes at 2 and 4 layers, per token at the full model's layer count:"
    profile_family llama-3-8b tiny 2 4
    profile_family qwen2.5-7b tiny-qwen2 2 4
    profile_family qwen3-8b tiny-qwen3 2 4
    profile_family qwen3-30b-a3b tiny-qwen3moe 2 4
    profile_family qwen3-next-80b-a3b tiny-qwen3next 2 4
  fi
  exit
fi

if [ "$executor" = 1 ]; then
  bench_need gpu_bench octo-make-model octo-ctl
  if ! grep -q '^OCTO_CUDA_SIM:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
    echo "$(basename "$0"): $build is not an OCTO_CUDA_SIM=ON build; --executor-accounting runs the executor's gpu_bench" >&2
    exit 2
  fi
  # Regenerated every run (under a second): a stale model from an older
  # format would test nothing.
  name="tiny6-Q4_K_M"
  mkdir -p "$work"
  rm -rf "${work:?}/$name" "$work/$name.gguf"
  "$bin/octo-make-model" --preset tiny --layers 6 --type Q4_K_M -o "$work/$name.gguf" >/dev/null
  "$bin/octo-ctl" decompose -q --force "$work/$name.gguf" "$work/$name"
  rm -f "$work/$name.gguf"
  # A small executor device; copies keep the executor's default delay, so
  # they are still in flight while earlier layers compute, as on a GPU.
  OCTO_SIM_DEVICE_MEMORY=$((512 << 20)) "$bin/gpu_bench" --model "$work/$name" --accounting-only "$@"
  exit
fi

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "$(basename "$0"): no GPU here (nvidia-smi finds none); this benchmark needs one." >&2
  echo "  On a machine without a GPU, '$0 --executor-accounting' checks the copy accounting on the host executor." >&2
  exit 2
fi
if grep -q '^OCTO_CUDA_SIM:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "$(basename "$0"): $build is an OCTO_CUDA_SIM=ON (host executor) build; point BUILD_DIR at an nvcc build" >&2
  exit 2
fi
bench_need gpu_bench
preset="${PRESET:-llama-3-8b}"
type="${TYPE:-Q4_K_M}"
if [ ! -f "$work/$preset-$type/manifest.json" ]; then
  # bench_model's own free-space check is sized for 1B models: the 8B GGUF
  # and its directory are about 5 GB each.
  mkdir -p "$work"
  free_kib=$(df -Pk "$work" | awk 'NR == 2 { print $4 }')
  if [ "$free_kib" -lt $((11 * 1024 * 1024)) ]; then
    echo "$(basename "$0"): $work has $((free_kib / 1024)) MiB free, needs about 11 GiB for $preset-$type; pass another WORK_DIR" >&2
    exit 2
  fi
fi
dir="$(bench_model "$preset" "$type" "$work")"
nvidia-smi --query-gpu=name,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader >&2 || true
"$bin/gpu_bench" --model "$dir" "$@"
