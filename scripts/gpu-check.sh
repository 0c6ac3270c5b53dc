#!/usr/bin/env bash
# The checks and benchmarks that need an NVIDIA GPU, in one go, from a Release build with tests and
# benchmarks (cmake -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DACCEL_BUILD_TESTS=ON
# -DACCEL_BUILD_BENCHMARKS=ON), or from a folder holding its executables (copied to a GPU machine):
#
#   scripts/gpu-check.sh BUILD_OR_BIN_DIR [RESULTS_DIR]
#
# Runs every test binary that has CUDA cases; compute-sanitizer memcheck / racecheck / synccheck over
# the CUDA suites (when compute-sanitizer is on the PATH); then the GPU benchmarks (allocator, copies,
# events, graphs, random fills three times, Thrust/CUB algorithms, fused Adam against torch when
# python3 has torch). Full logs go to RESULTS_DIR (default ./gpu-results); a summary is printed last.
# Kernels are JIT-compiled from ACCEL_KERNEL_DIR (default: this checkout's kernels/). About 5 minutes
# on an H100. Exit status 1 when a test or a sanitizer run fails.
set -uo pipefail
if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$(cd "$1" && pwd)
RES=${2:-$PWD/gpu-results}
mkdir -p "$RES"
export ACCEL_KERNEL_DIR=${ACCEL_KERNEL_DIR:-$ROOT/kernels}
export ACCEL_CACHE_DIR=${ACCEL_CACHE_DIR:-$RES/jit-cache}
export PATH=$PATH:/usr/local/cuda/bin

find_bin() { find "$DIR" -type f -perm -u+x -name "$1" 2>/dev/null | head -1; }
status=0

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  report=$(find_bin accel-report)
  [[ -n $report ]] && "$report"
} > "$RES/env.log" 2>&1

tests=(test_cuda_device test_cuda_random test_conformance test_dispatch test_ops test_algo_cuda test_philox
       test_generator test_cuda_unavailable test_nvcc_consumer)
for t in "${tests[@]}"; do
  bin=$(find_bin "$t")
  if [[ -z $bin ]]; then echo "=== $t: not built"; continue; fi
  echo "=== $t"
  start=$SECONDS
  timeout 300 "$bin"
  rc=$?
  echo "=== $t rc=$rc ($((SECONDS - start)) s)"
  [[ $rc -ne 0 ]] && status=1
done > "$RES/tests.log" 2>&1

sanitize() {  # tool, binary name, doctest arguments...
  local tool=$1 name=$2
  shift 2
  local bin
  bin=$(find_bin "$name")
  [[ -z $bin ]] && return
  timeout 300 compute-sanitizer --tool "$tool" --print-limit 20 "$bin" "$@" > "$RES/sanitizer_${tool}_${name}.log" 2>&1
  local rc=$?
  echo "$tool $name: rc=$rc; $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$RES/sanitizer_${tool}_${name}.log" | tail -1)"
  [[ $rc -ne 0 ]] && status=1
}
if command -v compute-sanitizer > /dev/null; then
  {
    sanitize memcheck test_conformance
    sanitize memcheck test_cuda_device
    sanitize memcheck test_cuda_random
    sanitize memcheck test_ops -tc='cuda*'
    sanitize memcheck test_algo_cuda
    sanitize racecheck test_cuda_random
    sanitize racecheck test_ops -tc='cuda fused*'
    sanitize synccheck test_cuda_random
    sanitize initcheck test_cuda_device
  } > "$RES/sanitizer.log" 2>&1
else
  echo "compute-sanitizer not found: sanitizer runs skipped" > "$RES/sanitizer.log"
fi

run_bench() {  # log name, binary name, arguments...
  local log=$1 name=$2
  shift 2
  local bin
  bin=$(find_bin "$name")
  if [[ -z $bin ]]; then echo "$name: not built" >> "$RES/$log"; return; fi
  timeout 300 "$bin" "$@" >> "$RES/$log" 2>&1
}
run_bench bench_memory.log bench_cuda_memory --benchmark_min_time=0.2
run_bench bench_graph.log bench_cuda_graph --benchmark_min_time=0.2 --rounds=3 --json="$RES/cuda_graph.json"
run_bench bench_rng.log bench_rng_fill_gpu --rounds=7 --json="$RES/rng_fill_gpu.json"
run_bench bench_algo.log bench_algo_cuda --rounds=3 --json="$RES/algo_cuda.json"
adam=$(find_bin bench_adam_gpu)
if [[ -n $adam ]]; then
  timeout 400 bash "$ROOT/benchmarks/ops/run_gpu_adam.sh" "$(dirname "$adam")" "$RES/adam" > "$RES/adam.log" 2>&1
fi

echo "## accel GPU check ($(head -1 "$RES/env.log"))"
grep -E "^=== .*rc=|not built|test cases:" "$RES/tests.log"
echo "skipped checks (see tests.log for why): $(grep -c SKIPPED "$RES/tests.log")"
cat "$RES/sanitizer.log"
sed -n '/^ratios/,$p' "$RES/bench_memory.log"
sed -n '/^per replay/,$p' "$RES/bench_graph.log"
grep -E "^uniform|^normal|^targets" "$RES/bench_rng.log"
tail -14 "$RES/bench_algo.log"
[[ -f $RES/adam.log ]] && grep -E "^\| accel|vs fused|target|FAIL|checks|identical" "$RES/adam.log"
echo "logs: $RES"
exit $status
