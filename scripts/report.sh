#!/usr/bin/env bash
# Sets up, builds and runs accel's main job — accel-report — on the default backend of this machine
# (CUDA when a GPU is present, else the CPU backend). Extra arguments go to accel-report (--json).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
bash scripts/install-deps.sh
cmake --preset default -DACCEL_BUILD_TESTS=OFF -DACCEL_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build/default --target accel-report -j "$(nproc)" >/dev/null
exec ./build/default/examples/accel-report "$@"
