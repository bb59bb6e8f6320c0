# Sourced (with the script's arguments) by the scripts that read nvcc's own
# output, PTX or ptxas's report, with no GPU: ptx_loads.sh, decode_waves.sh,
# grid_start.sh. Sets root (the checkout), nvcc (NVCC, default CUDA's),
# check (1 when the first argument is --check) and work (a temporary folder,
# removed at exit); exits 2 when there is no nvcc.
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
[ -x "$nvcc" ] || { echo "$(basename "$0"): no nvcc at $nvcc (set NVCC)" >&2; exit 2; }
check=0
[ "${1:-}" = "--check" ] && check=1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
