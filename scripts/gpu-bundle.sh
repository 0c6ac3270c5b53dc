#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs on a GPU machine that has CUDA and python3 (with torch) but
# not this machine's Debian libraries: the test and benchmark executables of a Release build (at
# their paths under the build folder, so paths compiled into them still resolve) and the shared
# libraries they link that such a machine lacks (oneDNN, Open MPI, libbenchmark...), in one
# compressed tar. On the GPU machine: tar xf BUNDLE -C REPO, then
# scripts/gpu-check.sh build/default (it puts build/default/gpu-lib on LD_LIBRARY_PATH).
#
#   scripts/gpu-bundle.sh [BUILD_DIR (build/default)] [OUT (.gpu/bundle.tar.xz)]
set -euo pipefail
BUILD=${1:-build/default}
OUT=${2:-.gpu/bundle.tar.xz}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bins=(examples/engine/engine examples/accel-report
      tests/conformance/test_conformance tests/cuda/test_cuda_device tests/cuda/test_cuda_random
      tests/cuda/test_cuda_unavailable tests/ops/test_ops tests/algo/test_algo_cuda tests/blas/test_blas
      tests/blas/test_blas_nvcc tests/comm/test_comm_nccl tests/comm/test_comm_nvcc tests/dispatch/test_dispatch
      tests/random/test_philox tests/random/test_generator tests/engine/test_engine tests/nvcc/test_nvcc_consumer
      benchmarks/blas/bench_blas benchmarks/ops/bench_adam_gpu benchmarks/ops/libaccel_capi.so
      benchmarks/cuda/bench_cuda_memory benchmarks/cuda/bench_cuda_graph benchmarks/random/bench_rng_fill_gpu
      benchmarks/algo/bench_algo_cuda)
present=()
for b in "${bins[@]}"; do
  if [[ -f $BUILD/$b ]]; then present+=("$b"); else echo "not built: $b" >&2; fi
done
# Libraries outside the C/C++ runtime and CUDA (the GPU machine has those, newer or the same).
libdir=$BUILD/gpu-lib
rm -rf "$libdir"
mkdir -p "$libdir"
for b in "${present[@]}"; do ldd "$BUILD/$b"; done | awk '/=> \// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/usr/local/cuda|libcuda\.so' |
  while read -r lib; do cp -L "$lib" "$libdir/"; done
# The source folder the binaries were configured from: paths into it are compiled in (test data, the
# kernels' folder), and gpu-check.sh links it to the checkout there when that machine lacks it (a
# bundle built in another clone, e.g. /tmp/x, looked there for its data: GPU run 9).
sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" > "$BUILD/gpu-source-root"
mkdir -p "$(dirname "$OUT")"
tar -C "$BUILD/.." -cJf "$OUT" $(for b in "${present[@]}"; do echo "$(basename "$BUILD")/$b"; done) \
  "$(basename "$BUILD")/gpu-lib" "$(basename "$BUILD")/gpu-source-root"
ls -la "$OUT"
