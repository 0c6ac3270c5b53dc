#!/usr/bin/env bash
# The measurement behind accel/blas's CPU BLAS (benchmarks/RESULTS.md, "BLAS"): builds choose_cpu_blas.cpp
# once per Debian BLAS that is installed (OpenBLAS pthread and OpenMP builds, BLIS pthread and OpenMP
# builds, oneDNN), then runs them in alternation, ROUNDS times, and prints each library's median GFLOP/s
# per shape and thread count beside the FMA peak.
#
#   benchmarks/blas/choose_cpu_blas.sh [ROUNDS]        (default 3; about 15 s per library and round)
# Packages: libopenblas-dev libopenblas0-pthread libopenblas0-openmp libblis-dev libblis4-pthread
#           libblis4-openmp libdnnl-dev (a missing one is skipped).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rounds="${1:-3}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
lib=/usr/lib/x86_64-linux-gnu
inc=/usr/include/x86_64-linux-gnu
build() {  # name, extra flags...
  local name="$1"
  shift
  g++ -O2 -march=native -std=c++20 "$here/choose_cpu_blas.cpp" "$@" -o "$out/$name" && echo "$name"
}
libs=()
[[ -e $lib/openblas-pthread/libopenblas.so.0 ]] &&
  libs+=("$(build openblas-pthread -DUSE_CBLAS -DUSE_OPENBLAS -I"$inc/openblas-openmp" -I"$inc/openblas-pthread" "$lib/openblas-pthread/libopenblas.so.0" -lpthread)")
[[ -e $lib/openblas-openmp/libopenblas.so.0 ]] &&
  libs+=("$(build openblas-openmp -DUSE_CBLAS -DUSE_OPENBLAS -I"$inc/openblas-openmp" "$lib/openblas-openmp/libopenblas.so.0" -fopenmp)")
[[ -e $lib/blis-pthread/libblis.so.4 ]] &&
  libs+=("$(build blis-pthread -DUSE_CBLAS -DUSE_BLIS -I"$inc/blis-openmp" -I"$inc/blis-pthread" "$lib/blis-pthread/libblis.so.4" -lpthread)")
[[ -e $lib/blis-openmp/libblis.so.4 ]] &&
  libs+=("$(build blis-openmp -DUSE_CBLAS -DUSE_BLIS -I"$inc/blis-openmp" "$lib/blis-openmp/libblis.so.4" -fopenmp)")
[[ -e /usr/include/oneapi/dnnl/dnnl.h ]] && libs+=("$(build onednn -DUSE_DNNL -ldnnl -fopenmp)")
((${#libs[@]} > 0)) || { echo "no BLAS installed" >&2; exit 1; }

lscpu | grep -E "^(Model name|CPU family|Model|Flags)" | sed 's/^Flags:.*avx512f.*/Flags: (AVX-512)/'
"$out/${libs[0]}" x 1 peak
for ((r = 0; r < rounds; ++r)); do
  for l in "${libs[@]}"; do "$out/$l" "$l" 3 2>>"$out/detail" >>"$out/all"; done
done
sort -u "$out/detail"
# median over rounds of each (library, threads, shape): wall-clock GFLOP/s and CPU-time GFLOP/s
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
awk '{ key = $2 " " $3 " " $1; w[key] = w[key] " " $4; c[key] = c[key] " " $6 }
     END { for (k in w) print k "|" w[k] "|" c[k] }' "$out/all" |
  while IFS='|' read -r key wall cpu; do
    echo "$key $(median <<<"$wall") $(median <<<"$cpu")"
  done | sort -k1,1n -k2,2 -k3,3 |
  awk 'BEGIN { printf "%-8s %-16s %-18s %10s %10s\n", "threads", "shape", "library", "wall GF/s", "cpu GF/s" }
       { printf "%-8s %-16s %-18s %10s %10s\n", $1, $2, $3, $4, $5 }'
