#!/usr/bin/env bash
# Differential check of the caching allocator in this working tree against its version at a commit
# (default HEAD): see allocator_vs_commit.cpp. No GPU, no build directory needed.
#   bash tests/memory/differential/run.sh [commit=HEAD] [seeds=100] [steps=4000]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(git -C "$here" rev-parse --show-toplevel)
commit="${1:-HEAD}"
seeds="${2:-100}"
steps="${3:-4000}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$here/extract_allocator.sh" "$commit" "$work"
"${CXX:-c++}" -std=gnu++20 -O2 -I"$root/include" -I"$work/inc" -o "$work/allocator_vs_commit" "$here/allocator_vs_commit.cpp"
"$work/allocator_vs_commit" "$seeds" "$steps"
