#!/usr/bin/env bash
# Usage: scripts/test.sh [extra cmake configure arguments]
# Sets up, builds and runs accel's test suite (every enabled backend; CUDA cases are compiled
# everywhere the toolkit exists and skip, saying so, where there is no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
bash scripts/install-deps.sh
bash scripts/check-layering.sh  # no header includes one from a higher floor (docs/ARCHITECTURE.md)
preset="${ACCEL_PRESET:-default}"
source scripts/lib/generator.sh  # Ninja for a new build directory: less of the build's time goes to Make
# Arguments, if any, are extra configure arguments (.ci/run narrows what a GPU-less check builds).
# The benchmarks too (their smoke tests are part of the suite): scripts/train.sh, the README's first
# command, configures the same directory with them off, and a cache variable stays as last set.
cmake --preset "$preset" $(accel_generator "build/$preset") -DACCEL_BUILD_TESTS=ON -DACCEL_BUILD_BENCHMARKS=ON "$@" >/dev/null
cmake --build "build/$preset" -j "$(nproc)"
ctest --test-dir "build/$preset" --output-on-failure -j "$(nproc)"
