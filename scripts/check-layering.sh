#!/usr/bin/env bash
# Fails when a header under include/accel includes an accel header from a higher floor (docs/ARCHITECTURE.md):
#   0 core/ and detail/   1 concepts/   2 memory/ random/ ops/ profile/ backend/   3 cpu/ cuda/
#   4 dispatch/ algo/ blas/ comm/   5 the umbrella headers (accel/*.hpp)
# and when a CPU header includes a CUDA one (CPU-only builds never see CUDA headers).
# Usage: scripts/check-layering.sh [include-dir]   (default: include/ beside this script)
set -euo pipefail
root=${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/include"}

floor() {  # floor of a path relative to include/accel ("cpu/memory.hpp")
  case "$1" in
    core/* | detail/*) echo 0 ;;
    concepts/*) echo 1 ;;
    memory/* | random/* | ops/* | profile/* | backend/*) echo 2 ;;
    cpu/* | cuda/*) echo 3 ;;
    dispatch/* | algo/* | blas/* | comm/*) echo 4 ;;
    */*) echo "unknown" ;;
    *) echo 5 ;;
  esac
}

status=0
checked=0
while IFS= read -r -d '' file; do
  rel=${file#"$root/accel/"}
  own=$(floor "$rel")
  if [[ $own == unknown ]]; then
    echo "check-layering: $rel: folder $(dirname "$rel")/ has no floor (add it to scripts/check-layering.sh and docs/ARCHITECTURE.md)"
    status=1
    continue
  fi
  checked=$((checked + 1))
  while IFS= read -r line; do
    inc=${line#*<accel/}
    inc=${inc%%>*}
    theirs=$(floor "$inc")
    if [[ $theirs == unknown ]]; then
      echo "check-layering: $rel includes <accel/$inc>, in a folder with no floor"
      status=1
    elif ((theirs > own)); then
      echo "check-layering: $rel (floor $own) includes <accel/$inc> (floor $theirs), a higher floor"
      status=1
    elif [[ $rel == cpu/* && $inc == cuda/* ]]; then
      echo "check-layering: $rel includes <accel/$inc>: a CPU header never includes a CUDA one"
      status=1
    fi
  done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*<accel/' "$file" || true)
done < <(find "$root/accel" -type f \( -name '*.hpp' -o -name '*.cuh' -o -name '*.h' \) -print0)

if ((status == 0)); then echo "check-layering: $checked headers, every include on its floor or below"; fi
exit $status
