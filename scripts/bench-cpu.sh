#!/usr/bin/env bash
# Runs the CPU benchmark families the way benchmarks/RESULTS.md quotes them, each writing its JSON to
# RESULTS_DIR (default benchmarks/results) and its console output to RESULTS_DIR/logs/, then draws the
# plots (scripts/plots.sh: benchmarks/plots/ for benchmarks/results, else RESULTS_DIR/plots). Prints the load average before each family: take final figures on a quiet
# machine (load < 0.5) and quote the load with them.
#   scripts/bench-cpu.sh [BUILD_DIR] [RESULTS_DIR] [family...]
# families: alloc dispatch cpu_adam_kernels cpu_adam jit_cold rng_fill graph compile_cost collectives
# (default: all)
# Needs the benchmarks built (cmake --build BUILD_DIR --target bench_alloc bench_dispatch
# dispatch_instructions bench_adam_cpu accel_capi bench_rng_fill_native bench_graph bench_comm); collectives
# runs 2 ranks under Open MPI's mpirun (libopenmpi-dev, openmpi-bin; --allow-run-as-root as root); cpu_adam and
# jit_cold need torch and deepspeed (pip), alloc's jemalloc/mimalloc rows libjemalloc-dev and
# libmimalloc-dev (Debian). cpu_adam also runs the CPU Adam kernel of commit $BEFORE (default 90ffd2f, the
# kernel before issue 24) as a candidate "accel@<commit>", compiled here with the op builder's flags.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/default}
out=${2:-benchmarks/results}
shift 2 2>/dev/null || shift $#
families=("$@")
((${#families[@]})) || families=(alloc dispatch cpu_adam_kernels cpu_adam jit_cold rng_fill graph compile_cost collectives)
mkdir -p "$out/logs"
before=${BEFORE:-90ffd2f}
before_args=()
if git cat-file -e "$before:kernels/cpu/fused_adam.cpp" 2>/dev/null; then
  kdir=$(mktemp -d)
  git show "$before:kernels/cpu/fused_adam.cpp" > "$kdir/fused_adam.cpp"
  git show "$before:kernels/cpu/cpu_common.h" > "$kdir/cpu_common.h"
  git show "$before:kernels/cpu/cpu_convert.h" > "$kdir/cpu_convert.h" 2>/dev/null || true  # from its split on
  git show "$before:kernels/common/accel_ops_abi.h" > "$kdir/accel_ops_abi.h"
  if ${CXX:-c++} -O3 -march=native -fopenmp -shared -fPIC -std=c++17 -fno-math-errno -ffp-contract=off \
       -mprefer-vector-width=512 -I"$kdir" "$kdir/fused_adam.cpp" -o "$kdir/fused_adam.so"; then
    before_args=(--kernel "accel@$before=$kdir/fused_adam.so")
  fi
fi
b=$build/benchmarks
status=0
for f in "${families[@]}"; do
  echo "== $f (load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%H:%M:%S) UTC)"
  log=$out/logs/$f.txt
  case $f in
    alloc) cmd=("$b/memory/bench_alloc" --rounds=7 "--json=$out/alloc.json") ;;
    dispatch) cmd=("$b/dispatch/bench_dispatch" --rounds=9 "--json=$out/dispatch.json") ;;
    cpu_adam_kernels) cmd=("$b/ops/bench_adam_cpu" --rounds=11 --clock=thread "--json=$out/cpu_adam_kernels.json") ;;
    cpu_adam) cmd=(python3 benchmarks/ops/compare_cpu_adam.py --rounds 11 --clock thread --layouts 4 --lib "$b/ops/libaccel_capi.so" "${before_args[@]}" "--json=$out/cpu_adam.json") ;;
    jit_cold) cmd=(python3 benchmarks/ops/compare_jit.py --rounds 3 --lib "$b/ops/libaccel_capi.so" "--json=$out/jit_cold.json") ;;
    rng_fill) cmd=("$b/random/bench_rng_fill_native" --rounds=7 "--json=$out/rng_fill_native.json") ;;
    graph) cmd=("$b/cpu/bench_graph" --rounds=7 "--json=$out/graph.json") ;;
    compile_cost) cmd=(bash benchmarks/compile/compile_cost.sh 5 "$out/compile_cost.json") ;;
    collectives)
      root=(); [[ $(id -u) -eq 0 ]] && root=(--allow-run-as-root)
      cmd=(mpirun -np 2 --bind-to none "${root[@]}" "$b/comm/bench_comm" --rounds=7 "--json=$out/collectives.json") ;;
    *) echo "unknown family $f"; status=2; continue ;;
  esac
  echo "\$ ${cmd[*]}" > "$log"
  "${cmd[@]}" >> "$log" 2>&1 || { echo "$f failed (see $log)"; status=1; }
  if [[ $f == dispatch ]]; then
    bash benchmarks/dispatch/count_instructions.sh "$build" >> "$log" 2>&1 || status=1
  fi
  grep -v -e "^W1[0-9]" -e "WARNING" "$log" | tail -n 30
done
plots=benchmarks/plots
[[ $(realpath "$out") == $(realpath benchmarks/results) ]] || plots=$out/plots
scripts/plots.sh "$out" "$plots" || status=1
exit $status
