#!/usr/bin/env bash
# CUDA runtime calls and instructions of CudaBackend's cache-hit paths, without a GPU:
#   bash benchmarks/cuda/hit_path/run.sh <build-dir>   (a build with CUDA, for the stand-in libcuda:
#                                                        cmake --build <build-dir> --target accel_fake_libcuda)
# Prints the runtime calls of the setup and of N hit pairs (expected: none in the pairs), then the
# instructions per pair under callgrind when valgrind is installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(git -C "$here" rev-parse --show-toplevel)
build="${1:-$root/build/default}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
fake="$build/tests/cuda/fake_cuda"
[ -e "$fake/libcuda.so.1" ] || { echo "no $fake/libcuda.so.1: cmake --build $build --target accel_fake_libcuda"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cxx="${CXX:-c++}"
"$cxx" -std=gnu++20 -O2 -shared -fPIC -I"$cuda/include" -o "$work/libshim.so" "$here/cudart_shim.cpp"
"$cxx" -std=gnu++20 -O3 -DNDEBUG -DACCEL_HAS_CUDA=1 -DACCEL_HAS_NVTX=1 -I"$root/include" -isystem "$cuda/include/cccl" \
  -isystem "$cuda/include" -o "$work/harness" "$here/harness.cpp" -L"$cuda/lib64" -Wl,-rpath,"$cuda/lib64" -lcudart -ldl -lpthread
run() { LD_PRELOAD="$work/libshim.so" LD_LIBRARY_PATH="$fake" FAKE_CU_COUNT=1 "$@"; }
run "$work/harness" 1000
command -v valgrind >/dev/null || { echo "(valgrind not installed: no instruction counts)"; exit 0; }
count() {  # $1 function, $2 pairs -> instructions inside that function
  run valgrind --tool=callgrind --callgrind-out-file="$work/cg" --toggle-collect="$1*" "$work/harness" "$2" >/dev/null 2>&1
  callgrind_annotate "$work/cg" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
a=$(count hit_pairs 1); b=$(count hit_pairs 100001)
c=$(count pinned_pairs 1); d=$(count pinned_pairs 100001)
echo "instructions per pair: raw_alloc+raw_delete $(awk "BEGIN{print ($b - $a) / 300000}") (mean of 512 B, 1 MiB, 64 MiB);" \
  "host_alloc+host_free $(awk "BEGIN{print ($d - $c) / 100000}") (4 KiB)"
