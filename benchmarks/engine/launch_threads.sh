#!/usr/bin/env bash
# Two engine builds, A and B, under the launches that restrict or share the CPUs, with no --threads (each
# build chooses its own count): taskset to one CPU, OMP_NUM_THREADS=1, mpirun -np 2 with Open MPI's default
# binding (a core a rank) and with --bind-to none, and a cgroup with a CPU quota of one CPU (as root, where a
# cgroup can be made: tests/engine/cgroup_run.sh). Each round runs every launch with A, then with B; the
# engine's summary gives tokens/s and the MFU it printed; the medians and B ÷ A round by round at the end.
#   benchmarks/engine/launch_threads.sh ENGINE_A ENGINE_B [ROUNDS (5)] [STEPS (300)] [FORM...]
# FORMs: taskset omp1 mpirun_core mpirun_none quota1 (default: all).
# Needs the corpus (scripts/fetch-data.sh, or ENGINE_DATA), taskset (util-linux), Open MPI's mpirun.
set -euo pipefail
cd "$(dirname "$0")/../.."
a=$1 b=$2 rounds=${3:-5} steps=${4:-300}
shift 4 2>/dev/null || shift $#
forms=("$@")
((${#forms[@]})) || forms=(taskset omp1 mpirun_core mpirun_none quota1)
export ENGINE_DATA=${ENGINE_DATA:-$PWD/data/shakespeare/shakespeare.txt} ACCEL_BACKEND=cpu
args=(--size tiny --steps "$steps" --eval-every 0 --print-every "$steps" --dropout 0)
mpi=(mpirun --oversubscribe -np 2)
[[ $(id -u) == 0 ]] && mpi+=(--allow-run-as-root)
launch() {  # launch FORM ENGINE
  case $1 in
    taskset) taskset -c "$(grep Cpus_allowed_list /proc/self/status | awk '{print $2}' | cut -d, -f1 | cut -d- -f1)" "$2" "${args[@]}" ;;
    omp1) OMP_NUM_THREADS=1 "$2" "${args[@]}" ;;
    mpirun_core) "${mpi[@]}" "$2" "${args[@]}" ;;
    mpirun_none) "${mpi[@]}" --bind-to none "$2" "${args[@]}" ;;
    quota1) sh tests/engine/cgroup_run.sh cpu 100000 "$2" "${args[@]}" ;;
  esac
}
echo "# $(lscpu | awk -F: '/Model name/{gsub(/^ +/,"",$2); print $2}'), family $(lscpu | awk '/CPU family/{print $3}') model $(lscpu | awk '/^Model:/{print $2}'), $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u)"
echo "# A = $a, B = $b; $rounds rounds of: ${forms[*]}; ${args[*]}"
log=$(mktemp)
for ((r = 1; r <= rounds; r++)); do
  for f in "${forms[@]}"; do
    for which in A B; do
      exe=$a; [[ $which == B ]] && exe=$b
      out=$(launch "$f" "$exe" 2>&1)
      tok=$(awk '/^  tokens\/s/{gsub(",","",$2); print $2}' <<<"$out")
      mfu=$(awk '/^  MFU/{print $2}' <<<"$out")
      echo "round $r $f $which tokens/s ${tok:-?} MFU ${mfu:-?}" | tee -a "$log"
    done
  done
done
echo "# load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u)"
python3 - "$log" <<'PY'
import collections, re, statistics as st, sys
d = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    m = re.match(r"round (\d+) (\S+) ([AB]) tokens/s (\d+) MFU (\S+)%", line)
    if m:
        d[(m[2], int(m[1]))][m[3]] = (int(m[4]), float(m[5]))
for f in ("taskset", "omp1", "mpirun_core", "mpirun_none", "quota1"):
    rows = [v for (g, _), v in sorted(d.items()) if g == f and len(v) == 2]
    if not rows:
        continue
    med = lambda xs: f"{st.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f})"
    ratio = [v["B"][0] / v["A"][0] for v in rows]
    print(f"{f:12s} A {med([v['A'][0] for v in rows])} tokens/s, MFU {st.median([v['A'][1] for v in rows]):.1f}%;"
          f" B {med([v['B'][0] for v in rows])}, MFU {st.median([v['B'][1] for v in rows]):.1f}%;"
          f" B / A {st.median(ratio):.3f} ({min(ratio):.3f}-{max(ratio):.3f})")
PY
rm -f "$log"
