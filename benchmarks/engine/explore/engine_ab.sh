#!/usr/bin/env bash
# engine_ab.sh OLD NEW ROUNDS ARGS... — two engine binaries (say, main before and after a change, each
# built with `cmake --build build/default --target engine` and copied aside) run in turn, ROUNDS pairs,
# each as `BIN ARGS --eval-every 0 --print-every 1 --metrics FILE`; prints each run's median step (from
# the per-step metrics, the first WARMUP steps left out: the summary's 0.1 ms is too coarse for a few
# per cent) and OLD ÷ NEW per pair (> 1: NEW faster), median and range. Alternating absorbs a machine
# whose speed drifts between runs.
#   OLD_KERNELS / NEW_KERNELS: the accel kernel directory each side JIT-compiles from (ACCEL_KERNEL_DIR),
#     for a change to accel's kernels together with its host side (a launch shape, a block size), which
#     kernel_variants.sh (kernel directories under one binary) cannot try; default: the binary's own.
#   OLD_ARGS / NEW_ARGS: engine arguments added to one side only — one binary given twice then compares
#     two settings of a flag (OLD_ARGS="--gelu-fusion off" NEW_ARGS="--gelu-fusion on").
#   WARMUP (10; fewer when a run has fewer steps), NCU=on: Nsight Compute's time per kernel over 3 steps
#     of each side (kernel_times.py), OUT (a folder for the runs' logs and metrics; default a temporary one).
#
#   benchmarks/engine/explore/engine_ab.sh /tmp/engine_old build/default/examples/engine/engine 7 \
#       --size shakespeare --dtype bf16 --steps 6 --threads 2
#   OLD_KERNELS=/tmp/old/kernels NCU=on ACCEL_BACKEND=cuda benchmarks/engine/explore/engine_ab.sh \
#       /tmp/engine_old build/default/examples/engine/engine 3 --size gpt2 --dtype bf16 --steps 40
set -uo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,17p' "$0"
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
old=$1 new=$2 rounds=$3
shift 3
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
# One run: label, binary, kernel directory ("" for the binary's own), engine args -> its median step in ms.
median_step() {
  local label=$1 bin=$2 kdir=$3
  shift 3
  local m=$OUT/metrics_$label.csv
  if ! env ${kdir:+ACCEL_KERNEL_DIR=$kdir} "$bin" "$@" --eval-every 0 --print-every 1 --metrics "$m" \
      > "$OUT/run_$label.log" 2>&1; then
    echo "engine_ab.sh: $bin failed (log: $OUT/run_$label.log)" >&2
    return 1
  fi
  python3 -c "import csv, statistics, sys
rows = [(int(x['step']), float(x['ms_per_step'])) for x in csv.DictReader(open(sys.argv[1]))]
warm = min(int(sys.argv[2]), max(1, len(rows) // 3))
print('%.4f' % statistics.median([ms for step, ms in rows if step > warm] or [ms for _, ms in rows]))" "$m" "${WARMUP:-10}"
}
for i in $(seq "$rounds"); do
  # shellcheck disable=SC2086
  o=$(median_step "old_$i" "$old" "${OLD_KERNELS:-}" "$@" ${OLD_ARGS:-}) || exit 1
  # shellcheck disable=SC2086
  n=$(median_step "new_$i" "$new" "${NEW_KERNELS:-}" "$@" ${NEW_ARGS:-}) || exit 1
  echo "$o $n"
done | python3 -c '
import statistics, sys
rows = [tuple(map(float, l.split())) for l in sys.stdin if len(l.split()) == 2]
if not rows:
    sys.exit("engine_ab.sh: no runs")
r = [o / n for o, n in rows]
print("old median step, ms", [o for o, _ in rows])
print("new median step, ms", [n for _, n in rows])
print("old / new: median %.4f, range %.4f-%.4f, %d pairs (> 1: new faster)" % (statistics.median(r), min(r), max(r), len(r)))' || exit 1
if [[ ${NCU:-off} == on ]] && command -v ncu > /dev/null; then
  for side in old new; do
    bin=$old kdir=${OLD_KERNELS:-} extra=${OLD_ARGS:-}
    [[ $side == new ]] && bin=$new kdir=${NEW_KERNELS:-} extra=${NEW_ARGS:-}
    env ${kdir:+ACCEL_KERNEL_DIR=$kdir} timeout 300 ncu --target-processes application-only --clock-control none \
      --metrics gpu__time_duration.sum --csv --log-file "$OUT/ncu_$side.csv" "$bin" "$@" $extra --steps 3 \
      --eval-every 0 --quiet > /dev/null 2>&1
    python3 "$HERE/kernel_times.py" "$OUT/ncu_$side.csv" 3 > "$OUT/kernel_times_$side.txt" 2>&1
    rm -f "$OUT/ncu_$side.csv"
    echo "--- $side ($OUT/kernel_times_$side.txt)"
    head -12 "$OUT/kernel_times_$side.txt"
  done
fi
