#!/usr/bin/env bash
# GPU fused Adam in one go: accel's benchmark (bench_adam_gpu), accel against torch's fused/foreach AdamW
# in one process on the same tensors, interleaved (torch_adam_gpu.py with libaccel_capi.so), and the
# correctness comparison against torch
# and float64 (bench_adam_gpu --dump + compare_gpu_adam.py; the dump also against accel's CPU kernel,
# bit for bit). Prints Markdown for benchmarks/RESULTS.md; full logs go to RESULTS_DIR.
#
#   benchmarks/ops/run_gpu_adam.sh BIN [RESULTS_DIR] [--smoke]
#
# BIN: a directory holding bench_adam_gpu and libaccel_capi.so, or a build directory (BIN/benchmarks/ops/).
# RESULTS_DIR: default $OUT/gpu_adam when $OUT is set, else ./gpu_adam_results. The kernels are JIT
# compiled from $ACCEL_KERNEL_DIR (or the source tree the binary was built from). PYTHON: default python3.
# About 1-2 minutes on an H100 (accel ~30 s, torch ~45 s, dump + comparison ~15 s). Exit status 1 when
# a step fails or a correctness check fails; every step runs regardless.
set -uo pipefail

if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
BIN=$1
shift
RES=""
SMOKE=()
for a in "$@"; do
  case $a in
    --smoke) SMOKE=(--smoke) ;;
    *) RES=$a ;;
  esac
done
if [[ -z $RES ]]; then
  if [[ -n ${OUT:-} ]]; then RES=$OUT/gpu_adam; else RES=./gpu_adam_results; fi
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${PYTHON:-python3}
if [[ -x $BIN/bench_adam_gpu ]]; then
  BENCH=$BIN/bench_adam_gpu
elif [[ -x $BIN/benchmarks/ops/bench_adam_gpu ]]; then
  BENCH=$BIN/benchmarks/ops/bench_adam_gpu
else
  echo "run_gpu_adam.sh: no bench_adam_gpu in $BIN or $BIN/benchmarks/ops" >&2
  exit 2
fi
CAPI=$(dirname "$BENCH")/libaccel_capi.so
mkdir -p "$RES"
status=0

gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
echo "## GPU fused Adam ($(date -u +%Y-%m-%d), ${gpu:-no nvidia-smi})"
echo
echo "\`benchmarks/ops/run_gpu_adam.sh $BIN${SMOKE[*]:+ --smoke}\` — $(basename "$BENCH"), torch $($PY -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '(no torch)')"
echo "ACCEL_KERNEL_DIR=${ACCEL_KERNEL_DIR:-unset, the source tree of the build}; logs in $RES"
echo

echo "### accel (bench_adam_gpu${SMOKE[*]:+ --smoke})"
echo
SECONDS=0
"$BENCH" "${SMOKE[@]}" > "$RES/accel.txt" 2>&1 || { echo "bench_adam_gpu failed (exit $?)"; status=1; }
if grep -q '^bench_adam_gpu: skipped' "$RES/accel.txt"; then
  cat "$RES/accel.txt"
else
  # The configuration line, then the summary (the Google Benchmark console output stays in the log).
  head -2 "$RES/accel.txt"
  echo
  awk '/^fused Adam on .*median/ {on = 1} on' "$RES/accel.txt"
fi
echo
echo "(${SECONDS} s)"
echo

echo "### accel and torch in one process (torch_adam_gpu.py${SMOKE[*]:+ --smoke})"
echo
SECONDS=0
"$PY" "$HERE/torch_adam_gpu.py" "${SMOKE[@]}" --lib "$CAPI" --json="$RES/gpu_adam.json" > "$RES/torch.txt" 2>&1 ||
  { echo "torch_adam_gpu.py failed (exit $?)"; status=1; }
cat "$RES/torch.txt"
echo
echo "(${SECONDS} s)"
echo

echo "### correctness (bench_adam_gpu --dump, compare_gpu_adam.py)"
echo
SECONDS=0
rm -f "$RES/accel_adam.bin"
"$BENCH" --dump "$RES/accel_adam.bin" --steps 20 > "$RES/dump.txt" 2>&1 ||
  { echo "bench_adam_gpu --dump failed (exit $?)"; status=1; }
if [[ -s $RES/accel_adam.bin ]]; then
  "$PY" "$HERE/compare_gpu_adam.py" "$RES/accel_adam.bin" > "$RES/compare.txt" 2>&1 || status=1
  cat "$RES/compare.txt"
  # The same dump from accel's CPU kernel: the two backends are meant to compute the same bits (the
  # 72-byte header names the device, so the comparison starts after it).
  rm -f "$RES/accel_adam_cpu.bin"
  if "$BENCH" --dump "$RES/accel_adam_cpu.bin" --steps 20 --backend cpu > "$RES/dump_cpu.txt" 2>&1 &&
     [[ -s $RES/accel_adam_cpu.bin ]]; then
    if cmp -s -i 72 "$RES/accel_adam.bin" "$RES/accel_adam_cpu.bin"; then
      echo "accel cuda and cpu kernels, 20 steps x 3 cases: identical bits"
    else
      echo "accel cuda and cpu kernels, 20 steps x 3 cases: BITS DIFFER ($(cmp -l -i 72 "$RES/accel_adam.bin" "$RES/accel_adam_cpu.bin" | wc -l) bytes)"
      status=1
    fi
  else
    echo "(the cpu dump failed: $(tail -1 "$RES/dump_cpu.txt"))"
  fi
else
  cat "$RES/dump.txt"
  echo "(no dump written: nothing compared)"
fi
echo
echo "(${SECONDS} s)"
exit $status
