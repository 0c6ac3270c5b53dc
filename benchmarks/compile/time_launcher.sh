#!/usr/bin/env bash
# A compiler launcher that logs each translation unit's compiler CPU time (user + sys) and wall time:
# where a build's time goes (RESULTS.md, "CI time"). Not part of any build by default.
#
#   cmake --preset default -B /tmp/timed <CI's flags> \
#     -DCMAKE_CXX_COMPILER_LAUNCHER=$PWD/benchmarks/compile/time_launcher.sh \
#     -DCMAKE_CUDA_COMPILER_LAUNCHER=$PWD/benchmarks/compile/time_launcher.sh
#   TIMELOG=/tmp/tu-times.log cmake --build /tmp/timed -j2
#   sort -rn /tmp/tu-times.log | head     # "cpu_s wall_s object", heaviest first
out=""
prev=""
for a in "$@"; do
  [[ "$prev" == "-o" ]] && out="$a"
  prev="$a"
done
times="$(mktemp)"
start=$(date +%s.%N)
/usr/bin/time -f "%U %S" -o "$times" "$@"
rc=$?
end=$(date +%s.%N)
read -r user sys <"$times"
rm -f "$times"
echo "$(echo "$user + $sys" | bc) $(echo "$end - $start" | bc) $out" >>"${TIMELOG:-/tmp/tu-times.log}"
exit $rc
