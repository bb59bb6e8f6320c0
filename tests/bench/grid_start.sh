#!/usr/bin/env bash
# Whether every kernel waits for the kernel before it before it touches
# memory, from the PTX (no GPU needed). Under programmatic dependent launch
# (kernels/cuda/common.cuh: OCTO_LAUNCH, GridStart) a kernel may be running
# while its predecessor on the stream still is; only GridStart()'s
# griddepcontrol.wait orders it after that one. A load or store before the
# wait is a race a test may never catch.
#
#   [NVCC=/usr/local/cuda/bin/nvcc] [ARCH=sm_90] [JOBS=2] tests/bench/grid_start.sh [--check]
#
# For each kernels/cuda/*.cu it prints one line
#   grid-start: <file> kernels=N waiting-first=M prefetching-first=P
# where a kernel (a PTX .entry, each template instance one) waits first
# when nothing before its griddepcontrol.wait touches memory, other than
# reading its parameters (ld.param) and asking L2 for lines
# (prefetch.global.L2, cp.async.bulk.prefetch.L2: GridStartAfter's
# prefetch, which cannot change what a load reads), no call or return
# comes before it, and every branch before it lands before it too; P of
# them prefetch so. Then each kernel that does not wait first, by name.
# --check: exit 1 unless every kernel waits first (ctest runs it so in the
# nvcc build: grid_start_targets). The executor checks the same rule at run
# time (a thread that reads its index before GridStart, or syncs, shuffles
# or copies, fails), but cannot see a load that does not use the index;
# this sees every one.
set -euo pipefail
source "$(dirname "$0")/nvcc_reading.sh"
arch="${ARCH:-sm_90}"
jobs="${JOBS:-2}"

# The kernels' own flags (kernels/CMakeLists.txt), to PTX, JOBS at a time.
printf '%s\n' "$root"/kernels/cuda/*.cu |
  xargs -P "$jobs" -I{} sh -c '"$1" -std=c++20 -I"$2" -O3 --fmad=false -arch="$3" -ptx "$4" -o "$5/$(basename "$4").ptx"' \
    _ "$nvcc" "$root" "$arch" {} "$work"

bad=0
for ptx in "$work"/*.ptx; do
  awk -v file="$(basename "$ptx" .ptx)" '
    function late_entry(why) { late[++n_late] = entry " (" why ")"; waited = 1 }
    /^(\.visible |\.weak )?\.entry / {
      entry = $0; sub(/.*\.entry /, "", entry); sub(/\(.*/, "", entry); kernels++; next
    }
    entry != "" && /^\{/ { body = 1; waited = 0; prefetched = 0; split("", labels); split("", targets); next }
    !body { next }
    /^\}/ { if (!waited) late[++n_late] = entry " (ends first)"; body = 0; entry = ""; next }
    waited { next }
    /griddepcontrol\.wait/ {
      # Every branch so far must land before the wait (a label seen by now).
      for (t in targets) if (!(t in labels)) { late_entry("a branch past the wait"); next }
      waited = 1; prefetching += prefetched; next
    }
    /^[$A-Za-z_][$A-Za-z0-9_]*:/ { label = $0; sub(/:.*/, "", label); labels[label] = 1; next }
    /^[ \t]*(@!?%p[0-9]+[ \t]+)?(prefetch\.global\.L2|cp\.async\.bulk\.prefetch\.L2\.global)[ \t.;:]/ {
      prefetched = 1; next
    }
    # Once a kernel is found late, waited stops the search in it.
    /^[ \t]*(@!?%p[0-9]+[ \t]+)?(ld|st|atom|red|cp\.async|prefetch)\./ && !/ld\.param/ { late_entry($1 " first"); next }
    /^[ \t]*(@!?%p[0-9]+[ \t]+)?bra[ \t.]/ {
      target = $0; sub(/.*bra(\.uni)?[ \t]+/, "", target); sub(/;.*/, "", target); targets[target] = 1; next
    }
    /^[ \t]*(@!?%p[0-9]+[ \t]+)?(call|ret|exit)[ \t.;]/ { late_entry("a call or return first"); next }
    END {
      printf "grid-start: %s kernels=%d waiting-first=%d prefetching-first=%d\n", file, kernels, kernels - n_late,
        prefetching
      for (i = 1; i <= n_late; ++i) printf "  does not wait first: %s\n", late[i]
      exit n_late > 0
    }
' "$ptx" || bad=1
done
if [ "$check" = 1 ] && [ "$bad" = 1 ]; then
  echo "grid-start: FAIL: every kernel must begin with GridStart() (kernels/cuda/common.cuh)" >&2
  exit 1
fi
exit 0
