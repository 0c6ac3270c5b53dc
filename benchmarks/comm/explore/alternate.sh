#!/usr/bin/env bash
# Runs bench_comm from two builds in alternating pairs (before, after; then after, before; ...), each run
# writing its JSON, for compare_pairs.py. Exploratory (RESULTS.md, "Small collectives: the run-at-once
# path"): the runs move each other's absolute times, so each run's own MPI-vs-accel ratio is compared.
#
#   benchmarks/comm/explore/alternate.sh PAIRS BEFORE_BIN AFTER_BIN OUTDIR [bench_comm args...]
#   e.g. ... 6 /tmp/bench_comm_before build/default/benchmarks/comm/bench_comm /tmp/ab \
#            --ops=all_reduce,all_gather --max-bytes=2048 --rounds=7
# Any other benchmark of the common JSON format, run as one process: ALTERNATE_LAUNCH=none, e.g.
#   ALTERNATE_LAUNCH=none ... 4 /tmp/bench_alloc_before build/default/benchmarks/memory/bench_alloc /tmp/ab --rounds=7
set -euo pipefail
pairs=$1 before=$2 after=$3 out=$4
shift 4
mkdir -p "$out"
launch=(mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to none)
if [[ "${ALTERNATE_LAUNCH:-mpirun}" == none ]]; then launch=(); fi
for i in $(seq "$pairs"); do
  order="before after"
  if (( i % 2 == 0 )); then order="after before"; fi
  for which in $order; do
    bin=$before
    if [[ $which == after ]]; then bin=$after; fi
    echo "pair $i $which $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$out/log.txt"
    "${launch[@]}" "$bin" "$@" --json="$out/${which}_$i.json" > "$out/${which}_$i.txt" 2>&1
  done
done
