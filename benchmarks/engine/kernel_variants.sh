#!/usr/bin/env bash
# The engine's CUDA kernel directories against each other under the same binaries, on a GPU — for
# trying kernel changes within one short visit (each DIR a copy of examples/engine/kernels/ with one
# change; the engine JIT-compiles whichever ENGINE_KERNEL_DIR names):
#
#   benchmarks/engine/kernel_variants.sh BUILD_DIR RESULTS_DIR DIR...      (ROUNDS=2 STEPS=30 SIZE=gpt2)
#
# Per directory: the flash attention test (test_engine -tc="flash*": y, dq, dk, dv against the float32
# kernel, tiles past T, dropout, the same bits twice), with an accel/ folder test_ops' CUDA cases too,
# all directories at once; then, one at a time, Nsight Compute's time per flash kernel over 2 steps
# (where ncu runs; kernel_times.py); then whole
# `engine --size SIZE --dtype bf16 --steps STEPS` runs alternating over the directories, ROUNDS rounds
# (median ms/step, tokens/s and MFU as the engine prints them). Prints a table and writes RESULTS_DIR/best:
# the passing directory with the least flash time per step (by ncu), else with the least median
# ms/step. A DIR holding an accel/ folder (a copy of accel's kernels/ and include/: the nn_ops, tensor
# ops, fused Adam... kernels read headers from ../include) runs with ACCEL_KERNEL_DIR=DIR/accel/kernels
# — a reference for a change to those kernels, never chosen as best.
# NCU_SKIP="name ..." leaves those directories out of the Nsight Compute runs. Exit status 1 when no
# directory passes.
set -uo pipefail
if [[ $# -lt 3 || $1 == -h || $1 == --help ]]; then
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(cd "$1" && pwd)
RES=$2
shift 2
mkdir -p "$RES"
RES=$(cd "$RES" && pwd)
ROUNDS=${ROUNDS:-2} STEPS=${STEPS:-30} SIZE=${SIZE:-gpt2}
dirs=()
for d in "$@"; do dirs+=("$(cd "$d" && pwd)"); done
engine=$(find "$BUILD" -type f -perm -u+x -name engine | head -1)
test_engine=$(find "$BUILD" -type f -perm -u+x -name test_engine | head -1)
[[ -z $engine || -z $test_engine ]] && { echo "kernel_variants.sh: no engine / test_engine under $BUILD" >&2; exit 2; }
export ACCEL_BACKEND=cuda
name() { basename "$1"; }
# The environment a directory runs under: its kernels, and accel's from its accel/ folder if it has one.
envof() {
  echo "ENGINE_KERNEL_DIR=$1"
  [[ -d $1/accel ]] && echo "ACCEL_KERNEL_DIR=$1/accel/kernels"
}

test_ops=$(find "$BUILD" -type f -perm -u+x -name test_ops | head -1)
for d in "${dirs[@]}"; do
  env $(envof "$d") timeout 240 "$test_engine" -tc="flash*" > "$RES/test_$(name "$d").log" 2>&1 &
  # accel's kernels swapped too: their CUDA cases against the CPU kernels
  [[ -d $d/accel && -n $test_ops ]] &&
    env $(envof "$d") timeout 240 "$test_ops" -tc="*CUDA*,*cuda*" > "$RES/test_ops_$(name "$d").log" 2>&1 &
done
wait
pass=()
for d in "${dirs[@]}"; do
  n=$(name "$d")
  grep -q "Status: SUCCESS" "$RES/test_$n.log" || continue
  [[ -f $RES/test_ops_$n.log ]] && ! grep -q "Status: SUCCESS" "$RES/test_ops_$n.log" && continue
  pass+=("$d")
done

declare -A flash_ms step_ms tokens mfu
if command -v ncu > /dev/null; then
  for d in "${pass[@]}"; do
    n=$(name "$d")
    [[ " ${NCU_SKIP:-} " == *" $n "* ]] && continue
    env $(envof "$d") timeout 150 ncu --target-processes application-only --clock-control none \
      --kernel-name regex:gpt_flash --metrics gpu__time_duration.sum --csv --log-file "$RES/ncu_$n.csv" \
      "$engine" --size "$SIZE" --dtype bf16 --steps 2 --eval-every 0 --quiet > "$RES/ncu_$n.log" 2>&1
    python3 "$ROOT/benchmarks/engine/kernel_times.py" "$RES/ncu_$n.csv" 2 > "$RES/kernels_$n.txt" 2>&1
    flash_ms[$n]=$(python3 - "$RES/ncu_$n.csv" <<'EOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
start = next((i for i, r in enumerate(rows) if "Kernel Name" in r and "Metric Value" in r), None)
if start is None:
    sys.exit(0)
h = rows[start]
k, v, u = h.index("Kernel Name"), h.index("Metric Value"), h.index("Metric Unit") if "Metric Unit" in h else None
scale = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0}
t = sum(float(r[v].replace(",", "")) * (scale.get(r[u], 1e-6) if u is not None else 1e-6)
        for r in rows[start + 1:] if len(r) > v and "gpt_flash" in r[k])
print("%.3f" % (t / 2))
EOF
)
  done
fi

for round in $(seq "$ROUNDS"); do
  for d in "${pass[@]}"; do
    n=$(name "$d")
    env $(envof "$d") timeout 120 "$engine" --size "$SIZE" --dtype bf16 --steps "$STEPS" --eval-every 0 --quiet \
      > "$RES/step_${n}_$round.log" 2>&1
    step_ms[$n]+="$(awk '$1 == "ms/step" {print $2}' "$RES/step_${n}_$round.log") "
    tokens[$n]+="$(awk '$1 == "tokens/s" {print $2}' "$RES/step_${n}_$round.log") "
    mfu[$n]+="$(awk '$1 == "MFU" {print $2}' "$RES/step_${n}_$round.log") "
  done
done

best=
best_key=
table=$RES/variants.md
echo "| kernels | tests | flash kernels ms/step (ncu) | median ms/step per round | tokens/s per round | MFU at the median step |" > "$table"
echo "|---|---|---|---|---|---|" >> "$table"
for d in "${dirs[@]}"; do  # in this shell, not a pipeline's: best must outlive the loop
  n=$(name "$d")
  ok=FAIL
  [[ " ${pass[*]} " == *" $d "* ]] && ok=pass
  echo "| $n | $ok | ${flash_ms[$n]:-} | ${step_ms[$n]:-} | ${tokens[$n]:-} | ${mfu[$n]:-} |" >> "$table"
  [[ $ok == pass && ! -d $d/accel ]] || continue
  key=${flash_ms[$n]:-}
  [[ -z $key ]] && key=$(echo "${step_ms[$n]:-}" | tr ' ' '\n' | grep . | sort -g | head -1)
  [[ -z $key ]] && continue
  if [[ -z $best_key ]] || awk -v a="$key" -v b="$best_key" 'BEGIN {exit !(a < b)}'; then
    best=$d best_key=$key
  fi
done
cat "$table"
for d in "${dirs[@]}"; do
  [[ " ${pass[*]} " == *" $d "* ]] && continue
  echo "--- $(name "$d"): a test failed"
  grep -hE "ERROR|CHECK|REQUIRE|MESSAGE|flash vs" "$RES/test_$(name "$d").log" "$RES/test_ops_$(name "$d").log" 2>/dev/null |
    head -12
done
[[ -z $best ]] && exit 1
echo "$best" > "$RES/best"
echo "best: $(name "$best")"
