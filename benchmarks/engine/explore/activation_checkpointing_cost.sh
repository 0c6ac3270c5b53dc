#!/usr/bin/env bash
# activation_checkpointing_cost.sh ROUNDS ARGS... — the engine run without and with
# --activation-checkpointing in turn, ROUNDS pairs, each as `engine ARGS --eval-every 0 --quiet`; prints each
# run's median ms/step, tokens/s and peak memory from its summary and its final training loss (the two
# sides' must match: the same bits). The figures behind RESULTS.md's "activation checkpointing" table:
#   benchmarks/engine/explore/activation_checkpointing_cost.sh 3 --size tiny --steps 300
#   benchmarks/engine/explore/activation_checkpointing_cost.sh 3 --size shakespeare --steps 5
# ENGINE: the binary (default build/default/examples/engine/engine); the CPU backend.
set -euo pipefail
cd "$(dirname "$0")/../../.."
engine=${ENGINE:-build/default/examples/engine/engine}
export ACCEL_BACKEND=cpu
rounds=$1
shift
lscpu | grep -m1 "Model name"
echo "# load average at start: $(cut -d' ' -f1 /proc/loadavg)"
for r in $(seq "$rounds"); do
  for flag in "" --activation-checkpointing; do
    out=$("$engine" "$@" $flag --eval-every 0 --quiet 2>&1)
    ms=$(awk '/ms\/step/ {print $2}' <<<"$out")
    tok=$(awk '/tokens\/s/ {print $2}' <<<"$out")
    mem=$(awk '$1 == "memory" {print $2 " allocated, " $5 " reserved"}' <<<"$out")
    loss=$(awk '/train loss/ {print $5}' <<<"$out")
    echo "round $r ${flag:-plain}: ms/step $ms | tokens/s $tok | MiB $mem | final train loss $loss"
  done
done
