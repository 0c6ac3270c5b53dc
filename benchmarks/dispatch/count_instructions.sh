#!/usr/bin/env bash
# Counts instructions per call of each dispatch path with callgrind (repeatable, load-independent):
#   bash benchmarks/dispatch/count_instructions.sh <build-dir>
set -euo pipefail
build="${1:-build/default}"
bin="$build/benchmarks/dispatch/dispatch_instructions"
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)"; exit 1; }
out=$(mktemp)
trap 'rm -f "$out" "$out".*' EXIT
printf '%-14s %12s\n' "path" "instr/call"
for path in path_raw path_static path_any path_virtual; do
  valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$path" "$bin" >/dev/null 2>&1
  total=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  printf '%-14s %12.1f\n' "$path" "$(awk "BEGIN{print $total / 1000}")"
done
echo
echo "machine code of the raw and static paths (identical bodies mean zero overhead):"
objdump -d --no-show-raw-insn "$bin" | awk '/<path_raw>:/,/ret/' | sed 's/^ *[0-9a-f]*://'
objdump -d --no-show-raw-insn "$bin" | awk '/<path_static>:/,/ret/' | sed 's/^ *[0-9a-f]*://'
