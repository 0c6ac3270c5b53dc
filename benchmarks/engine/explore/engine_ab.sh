#!/usr/bin/env bash
# engine_ab.sh OLD NEW ROUNDS ARGS... — two engine binaries (say, main before and after a change, each
# built with `cmake --build build/default --target engine` and copied aside) run in turn, ROUNDS pairs,
# each as `BIN ARGS --eval-every 0 --quiet`; prints each run's median ms/step and OLD ÷ NEW per pair
# (> 1: NEW faster), median and range. Alternating absorbs a VM whose speed drifts between runs.
#
#   benchmarks/engine/explore/engine_ab.sh /tmp/engine_old build/default/examples/engine/engine 7 \
#       --size shakespeare --dtype bf16 --steps 6 --threads 2
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,9p' "$0"
  exit 2
fi
old=$1 new=$2 rounds=$3
shift 3
ms() { "$1" "${@:2}" --eval-every 0 --quiet 2>&1 | awk '$1 == "ms/step" {print $2}'; }
for _ in $(seq "$rounds"); do
  echo "$(ms "$old" "$@") $(ms "$new" "$@")"
done | python3 -c '
import statistics, sys
rows = [tuple(map(float, l.split())) for l in sys.stdin if len(l.split()) == 2]
if not rows:
    sys.exit("engine_ab.sh: no ms/step line from the engine")
r = [o / n for o, n in rows]
print("old ms/step", [o for o, _ in rows])
print("new ms/step", [n for _, n in rows])
print("old / new: median %.3f, range %.3f-%.3f, %d pairs" % (statistics.median(r), min(r), max(r), len(r)))'
