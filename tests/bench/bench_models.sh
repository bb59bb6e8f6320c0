# Sourced by the benchmark scripts: tools and generated models they share.
#   bench_need TOOL...              exit 2 naming a tool missing from $bin
#   bench_model PRESET TYPE WORK    echo the model directory WORK/PRESET-TYPE,
#                                   generating and decomposing it first when absent
# Expects $bin (the build's bin directory) and $build.

bench_need() {
  for tool in "$@"; do
    if [ ! -x "$bin/$tool" ]; then
      echo "$(basename "$0"): $bin/$tool is missing; build it: ninja -C $build $tool" >&2
      exit 2
    fi
  done
}

bench_model() {
  local preset="$1" type="$2" work="$3"
  local name="$preset-$type"
  local dir="$work/$name"
  mkdir -p "$work"
  if [ ! -f "$dir/manifest.json" ]; then
    # The GGUF and its directory are on disk together for a moment: ask for
    # both (plus a margin) before writing anything.
    local need_kib=$(( 2 * 1400 * 1024 + 512 * 1024 ))
    local free_kib
    free_kib=$(df -Pk "$work" | awk 'NR == 2 { print $4 }')
    if [ "$free_kib" -lt "$need_kib" ]; then
      echo "$(basename "$0"): $work has $((free_kib / 1024)) MiB free, needs about $((need_kib / 1024)) MiB for $name; pass another WORK_DIR" >&2
      exit 2
    fi
    bench_need octo-make-model octo-ctl
    echo "generating $name in $work ..." >&2
    "$bin/octo-make-model" --preset "$preset" --type "$type" -o "$work/$name.gguf" >/dev/null
    "$bin/octo-ctl" decompose -q --force "$work/$name.gguf" "$dir" >&2
    rm -f "$work/$name.gguf"
  fi
  echo "$dir"
}
