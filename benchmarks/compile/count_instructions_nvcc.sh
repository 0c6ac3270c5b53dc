#!/usr/bin/env bash
# Instructions nvcc's host front end (cudafe++, EDG) executes on a .cu translation unit that includes
# only the given header (default <accel/accel.hpp>, CUDA enabled), counted by callgrind: deterministic,
# where nvcc's wall time on a shared VM varies by a second. cudafe++ is about a third of nvcc's time on
# the umbrella (cicc's front end parses the same code again). Compare changes to one TU with it, not
# unlike TUs with each other (cudafe++ is memory-bound on some). About 2 minutes for the umbrella.
#   bash benchmarks/compile/count_instructions_nvcc.sh [header] [extra nvcc flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
header="${1:-accel/accel.hpp}"
shift || true
command -v valgrind >/dev/null || { echo "count_instructions_nvcc: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[[ -x "$nvcc" ]] || { echo "count_instructions_nvcc: needs nvcc" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <%s>\nint main() {}\n' "$header" >"$tmp/tu.cu"
# nvcc's own commands: its host-side preprocess (the first `gcc -E`) and the cudafe++ that reads it.
"$nvcc" -dryrun -std=c++20 -O2 -I"$PWD/include" -DACCEL_HAS_CUDA=1 -DACCEL_HAS_NVTX=1 "$@" -c "$tmp/tu.cu" \
  -o "$tmp/tu.o" 2>&1 | sed -n 's/^#\$ //p' >"$tmp/steps"
preprocess=$(grep -m1 -E '^(gcc|g\+\+|"[^"]*(gcc|g\+\+)") .* -E ' "$tmp/steps")
cudafe=$(grep -m1 -E '^cudafe\+\+ ' "$tmp/steps")
(
  export PATH="$(dirname "$nvcc"):$PATH"  # cudafe++ lives next to nvcc
  eval "$preprocess"
  eval "valgrind --tool=callgrind --callgrind-out-file=/dev/null --cache-sim=no --branch-sim=no $cudafe" \
    >/dev/null 2>"$tmp/log" || { tail -5 "$tmp/log" >&2; exit 1; }
)
awk -v h="$header" '/Collected/ {s += $NF} END {printf "<%s>: %.2f G instructions (cudafe++, callgrind)\n", h, s / 1e9}' "$tmp/log"
