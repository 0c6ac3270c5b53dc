#!/usr/bin/env bash
# Instructions the compiler executes on a translation unit that includes only the given header
# (default <accel/accel.hpp>, CPU-only, g++ -std=c++20 -O2), counted by callgrind over the driver and
# cc1plus: a deterministic figure for compile cost, unlike times on a shared machine (the count
# tracks user time within a few per cent). About 40x slower than a compile: ~3 minutes for the umbrella.
#   bash benchmarks/compile/count_instructions.sh [header] [extra compiler flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
header="${1:-accel/accel.hpp}"
shift || true
command -v valgrind >/dev/null || { echo "count_instructions: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <%s>\nint main() {}\n' "$header" >"$tmp/tu.cpp"
valgrind --tool=callgrind --callgrind-out-file=/dev/null --trace-children=yes --cache-sim=no --branch-sim=no \
  g++ -std=c++20 -O2 -Iinclude "$@" -c "$tmp/tu.cpp" -o "$tmp/tu.o" 2>"$tmp/log"
awk -v h="$header" '/Collected/ {s += $NF} END {printf "<%s>: %.2f G instructions (g++ -O2, callgrind)\n", h, s / 1e9}' "$tmp/log"
