#!/usr/bin/env bash
# The README's first command: sets up this machine (Debian packages, scripts/install-deps.sh), fetches
# the corpus (Shakespeare's plays, scripts/fetch-data.sh), builds the GPT trainer (examples/engine,
# Release) and trains the `tiny` model (nanoGPT's CPU recipe: 4 layers, 4 heads, 128 wide, block 64,
# batch 12, 2000 steps) on the backend accel selects — CUDA where a GPU is present, else the CPU, or
# what ACCEL_BACKEND names — printing the training and validation loss as it falls from about
# ln(84) = 4.43, a summary, and a sample of generated text. Under a minute of training on 2 cores with
# AVX-512, two minutes on an AVX2-only Zen 3.
#
#   scripts/train.sh                       the run above
#   scripts/train.sh --threads 1           extra arguments go to the engine (see --help)
#   ACCEL_BACKEND=cpu scripts/train.sh     the CPU even where a GPU is present
#   scripts/train.sh --size shakespeare --dtype bf16    on a GPU
#
# The progress lines go to the terminal and, as CSV, to build/train-metrics.csv
# (scripts/plots.sh --metrics build/train-metrics.csv draws it as build/train-metrics.png).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
bash scripts/install-deps.sh
bash scripts/fetch-data.sh
# Warnings are not errors here: a user's compiler (another g++ release, its -O3 inlining) may warn where
# CI's builds, which keep -Werror, do not; that must not stop the README's first command.
# Ninja for a new build directory (as scripts/test.sh): it compiles main.cpp beside Engine<B>'s two
# translation units, where Make waits for their library first.
source scripts/lib/generator.sh
cmake --preset default $(accel_generator build/default) -DACCEL_BUILD_TESTS=OFF -DACCEL_BUILD_BENCHMARKS=OFF \
  -DACCEL_WARNINGS_AS_ERRORS=OFF >/dev/null
echo "train.sh: building the engine in build/default (the first time: 41 s on a 2-core Zen 5)"
built_from=$(date +%s)
cmake --build build/default --target engine -j "$(nproc)" >/dev/null
echo "train.sh: built in $(( $(date +%s) - built_from )) s"
exec ./build/default/examples/engine/engine --size tiny --sample 500 --metrics build/train-metrics.csv "$@"
