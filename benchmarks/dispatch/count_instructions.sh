#!/usr/bin/env bash
# Instructions per call of each dispatch way, counted with callgrind (exact, load-independent):
#   bash benchmarks/dispatch/count_instructions.sh <build-dir>
# Calls (dispatch_ways.hpp): current_device, alloc_free (raw_alloc + raw_delete of 1 KiB), enqueue (a task
# on the CPU default stream, which runs it inline), record (an event on that stream), query (the event),
# chain_step (all of them, dependent, as bench_dispatch times them). Each figure: instructions inside
# path_<way>_<call> (inclusive) over its 1000 calls / 1000; the warm-up runs outside these functions.
set -euo pipefail
build="${1:-build/default}"
bin="$build/benchmarks/dispatch/dispatch_instructions"
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)"; exit 1; }
out=$(mktemp)
trap 'rm -f "$out" "$out".*' EXIT
calls=(current_device alloc_free enqueue record query chain_step)
ways=(raw static variant virtual)
valgrind --tool=callgrind --callgrind-out-file="$out" --dump-instr=no --compress-strings=no "$bin" >/dev/null 2>&1
# Inclusive counts per function from callgrind_annotate --inclusive=yes.
callgrind_annotate --inclusive=yes --threshold=100 "$out" 2>/dev/null > "$out.txt"
count() {  # function name -> inclusive Ir
  awk -v f="$1" '$0 ~ (" " f " ") || $0 ~ (":" f " ") || $0 ~ (":" f "$") || $NF ~ ("^" f "$") {gsub(",", "", $1); print $1; exit}' "$out.txt"
}
printf '%-16s' "call"
for w in "${ways[@]}"; do printf '%10s' "$w"; done
echo "   (instructions per call)"
for c in "${calls[@]}"; do
  printf '%-16s' "$c"
  for w in "${ways[@]}"; do
    n=$(count "path_${w}_${c}")
    if [[ -n $n ]]; then printf '%10.1f' "$(awk "BEGIN{print $n / 1000}")"; else printf '%10s' "?"; fi
  done
  echo
done
