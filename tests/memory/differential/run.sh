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
git -C "$root" archive "$commit" include | tar -x -C "$work"
# The commit's allocator and everything it includes from accel/, renamed to accel_old.
todo=(memory/caching_allocator.hpp)
declare -A seen=()
while [ ${#todo[@]} -gt 0 ]; do
  f="${todo[0]}"
  todo=("${todo[@]:1}")
  [ -n "${seen[$f]:-}" ] && continue
  seen[$f]=1
  mkdir -p "$work/inc/accel_old/$(dirname "$f")"
  sed -e 's#<accel/#<accel_old/#g' -e 's/namespace accel\b/namespace accel_old/g' -e 's/accel::/accel_old::/g' \
    "$work/include/accel/$f" > "$work/inc/accel_old/$f"
  while read -r dep; do todo+=("$dep"); done < <(sed -n 's#^\#include <accel/\(.*\)>#\1#p' "$work/include/accel/$f")
done
"${CXX:-c++}" -std=gnu++20 -O2 -I"$root/include" -I"$work/inc" -o "$work/allocator_vs_commit" "$here/allocator_vs_commit.cpp"
"$work/allocator_vs_commit" "$seeds" "$steps"
