#!/usr/bin/env bash
# Two engine builds against each other — for a change on the host side too (a launch shape, a block size),
# which kernel_variants.sh (kernel directories under one binary) cannot try: each side is an engine binary
# and the accel kernel directory it JIT-compiles from. Whole runs alternate A B A B ..., ROUNDS rounds;
# each run's median step after its first WARMUP steps (per-step metrics, not the summary's 0.1 ms); with
# NCU=on, Nsight Compute's time per kernel over 3 steps of each (kernel_times.py).
#
#   benchmarks/engine/engine_ab.sh OUT_DIR A_ENGINE A_KERNEL_DIR B_ENGINE B_KERNEL_DIR [ENGINE ARGS...]
#       (ROUNDS=3 STEPS=40 WARMUP=10 NCU=off; engine args default: --size gpt2 --dtype bf16; the backend is
#        ACCEL_BACKEND's, cuda unless set)
#
# Prints one line per run and the medians, and B ÷ A (time) round by round: < 1, B faster.
set -uo pipefail
if [[ $# -lt 5 || $1 == -h || $1 == --help ]]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=$1 AE=$2 AK=$(cd "$3" && pwd) BE=$4 BK=$(cd "$5" && pwd)
shift 5
ARGS=("$@")
((${#ARGS[@]} == 0)) && ARGS=(--size gpt2 --dtype bf16)
ROUNDS=${ROUNDS:-3} STEPS=${STEPS:-40} WARMUP=${WARMUP:-10}
export ACCEL_BACKEND=${ACCEL_BACKEND:-cuda}
mkdir -p "$OUT"
median_after() {  # metrics csv -> median ms_per_step of the steps after WARMUP
  python3 -c "import csv, statistics, sys
r = [float(x['ms_per_step']) for x in csv.DictReader(open(sys.argv[1])) if int(x['step']) > int(sys.argv[2])]
print('%.3f' % statistics.median(r) if r else 'nan')" "$1" "$WARMUP"
}
run() {  # label, engine, kernel dir
  local m=$OUT/metrics_$1.csv
  if ! ACCEL_KERNEL_DIR=$3 "$2" "${ARGS[@]}" --steps "$STEPS" --eval-every 0 --print-every 1 --metrics "$m" \
      > "$OUT/run_$1.log" 2>&1; then
    echo "engine_ab.sh: $2 failed (log: $OUT/run_$1.log)" >&2
    echo nan
    return
  fi
  median_after "$m"
}
a=() b=()
for ((i = 1; i <= ROUNDS; ++i)); do
  a+=("$(run A_$i "$AE" "$AK")")
  b+=("$(run B_$i "$BE" "$BK")")
  echo "round $i: A ${a[-1]} ms, B ${b[-1]} ms"
done
python3 - "${a[*]}" "${b[*]}" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
r = [y / x for x, y in zip(a, b)]
print(f"median step: A {statistics.median(a):.3f} ms ({min(a):.3f}-{max(a):.3f}), "
      f"B {statistics.median(b):.3f} ms ({min(b):.3f}-{max(b):.3f})")
print(f"B / A (time): {statistics.median(r):.4f} ({min(r):.4f}-{max(r):.4f})  (< 1: B faster)")
PY
if [[ ${NCU:-off} == on ]] && command -v ncu > /dev/null; then
  for side in A B; do
    e=$AE k=$AK
    [[ $side == B ]] && e=$BE k=$BK
    ACCEL_KERNEL_DIR=$k timeout 300 ncu --target-processes application-only --clock-control none \
      --metrics gpu__time_duration.sum --csv --log-file "$OUT/ncu_$side.csv" "$e" "${ARGS[@]}" --steps 3 \
      --eval-every 0 --quiet > /dev/null 2>&1
    python3 "$HERE/kernel_times.py" "$OUT/ncu_$side.csv" 3 > "$OUT/kernel_times_$side.txt" 2>&1
    rm -f "$OUT/ncu_$side.csv"
    echo "--- $side"
    head -12 "$OUT/kernel_times_$side.txt"
  done
fi
