#!/usr/bin/env bash
# Extracts the caching allocator of a commit, and everything it includes from accel/, renamed to
# accel_old (namespace and include paths), under DIR/inc: a program can then include both
# <accel/memory/caching_allocator.hpp> (this tree's) and <accel_old/memory/caching_allocator.hpp>.
# Used by run.sh (the differential check) and benchmarks/memory/explore/allocator_patterns.sh.
#   tests/memory/differential/extract_allocator.sh COMMIT DIR
set -euo pipefail
commit=$1 work=$2
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
git -C "$root" archive "$commit" include | tar -x -C "$work"
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
