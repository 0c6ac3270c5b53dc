#!/usr/bin/env bash
# Builds and runs allocator_patterns.cpp: this tree's caching allocator against a commit's, in one
# process (tests/memory/differential/extract_allocator.sh provides the commit's as accel_old).
#   bash benchmarks/memory/explore/allocator_patterns.sh [commit=HEAD] [rounds=21] [--json=FILE]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(git -C "$here" rev-parse --show-toplevel)
commit="${1:-HEAD}"
rounds="${2:-21}"
shift $(( $# < 2 ? $# : 2 ))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$root/tests/memory/differential/extract_allocator.sh" "$commit" "$work"
"${CXX:-c++}" -std=gnu++20 -O3 -DNDEBUG -I"$root/include" -I"$work/inc" -o "$work/allocator_patterns" \
  "$here/allocator_patterns.cpp" -lbenchmark -lpthread
"$work/allocator_patterns" --rounds="$rounds" "$@"
