#!/usr/bin/env bash
# Instructions per caching-allocator alloc+free pair (a cache hit on the CPU backend), counted with
# callgrind: exact and independent of the machine's load, unlike the nanoseconds of bench_alloc.
#   bash benchmarks/memory/count_alloc_instructions.sh <build-dir> [bytes...]
# Each figure is (instructions of 1,000,001 pairs - instructions of 1 pair) / 1,000,000: the warm-up
# pair (a new segment) is taken out.
set -euo pipefail
build="${1:-build/default}"
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(256 4096 1048576 67108864)
bin="$build/benchmarks/memory/bench_alloc"
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)"; exit 1; }
out=$(mktemp)
trap 'rm -f "$out" "$out".*' EXIT
count() {  # $1 pairs, $2 bytes -> instructions inside alloc_free_pairs()
  valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect='*alloc_free_pairs*' \
    "$bin" --pairs "$1" "$2" >/dev/null 2>&1
  callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
printf '%12s %16s\n' "bytes" "instr/pair"
for bytes in "${sizes[@]}"; do
  one=$(count 1 "$bytes")
  many=$(count 1000001 "$bytes")
  printf '%12s %16.1f\n' "$bytes" "$(awk "BEGIN{print ($many - $one) / 1000000}")"
done
