#!/usr/bin/env bash
# CI: builds accel's libFuzzer targets (tests/fuzz/fuzz_*.cpp: every parser of outside input) with
# clang, ASan and UBSan, and runs each for a bounded time from its seed corpus (tests/fuzz/corpus/<name>,
# with tests/fuzz/dict/<name>.dict when present). Prints the executions per target; exits non-zero
# when any target crashes, leaks, times out or breaks an invariant, naming the input that did.
#
# A crash found here becomes a regression test: fix the cause, copy the input into
# tests/fuzz/corpus/<name>/ (the corpus is replayed by ctest in every ordinary build).
#
# Usage: scripts/ci-fuzz.sh [target ...]          (default: every fuzz_* target of the build)
#   ACCEL_FUZZ_SECONDS=N   time per target (default 20)
#   ACCEL_FUZZ_BUILD=DIR   build directory (default build/fuzz)
#   ACCEL_JOBS=N           parallel build jobs, and fuzzers run at once (default nproc)
#   ACCEL_FUZZ_MERGE=1     afterwards, merge what the run found into tests/fuzz/corpus/<name>
#                          (minimised with -merge=1; review before committing)
# New inputs found during a run go to <build>/fuzz-corpus/<name>, crashes to <build>/fuzz-artifacts/<name>/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${ACCEL_FUZZ_SECONDS:-20}"
build="${ACCEL_FUZZ_BUILD:-build/fuzz}"
jobs="${ACCEL_JOBS:-$(nproc)}"

if ! command -v clang++ >/dev/null; then
  echo "ci-fuzz: needs clang++ with libFuzzer. On Debian: apt-get install clang libclang-rt-dev" \
       "(libclang-rt-14-dev on bookworm)" >&2
  exit 2
fi

echo "== configure ${build} (clang++, ACCEL_BUILD_FUZZERS=ON, CUDA off) =="
source scripts/lib/generator.sh  # Ninja where installed: the fuzz targets side by side
cmake -S . -B "$build" $(accel_generator "$build") -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DACCEL_ENABLE_CUDA=OFF -DACCEL_BUILD_FUZZERS=ON -DACCEL_BUILD_BENCHMARKS=OFF -DACCEL_BUILD_EXAMPLES=OFF >/dev/null

targets=("$@")
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(cmake --build "$build" --target help | sed -n 's/^\(\.\.\. \)\{0,1\}\(fuzz_[a-z0-9_]*\)\( .*\|: .*\)\{0,1\}$/\2/p' | sort)
fi
((${#targets[@]} > 0)) || { echo "ci-fuzz: no fuzz_* targets in ${build}" >&2; exit 2; }

echo "== build ${targets[*]} (-j${jobs}) =="
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

# Reports are fatal; leak checking on (the targets parse and drop their results).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Each fuzzer is one process on one core: run up to ${jobs} at a time (each still gets its full
# ${seconds} s), then report in target order.
run_target() {  # target -> writes <build>/fuzz-<name>.log and .rc
  local target="$1" name="${1#fuzz_}"
  local bin="${build}/tests/fuzz/${target}" seeds="tests/fuzz/corpus/${name}"
  local work="${build}/fuzz-corpus/${name}" artifacts="${build}/fuzz-artifacts/${name}/"
  local log="${build}/fuzz-${name}.log"
  mkdir -p "$work" "$artifacts"
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
              -artifact_prefix="$artifacts")
  [[ -f "tests/fuzz/dict/${name}.dict" ]] && args+=(-dict="tests/fuzz/dict/${name}.dict")
  [[ -d "$seeds" ]] || seeds=""
  local rc=0
  # The outer timeout only catches a fuzzer that hangs outside its own time checks.
  timeout --signal=KILL $((seconds + 120)) "$bin" "${args[@]}" "$work" ${seeds:+"$seeds"} >"$log" 2>&1 || rc=$?
  if [[ "${ACCEL_FUZZ_MERGE:-0}" == 1 && $rc == 0 && -n "$seeds" ]]; then
    "$bin" -merge=1 "$seeds" "$work" >"${build}/fuzz-${name}-merge.log" 2>&1 || true
  fi
  echo "$rc" >"${build}/fuzz-${name}.rc"
}

for target in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  echo "== ${target}: ${seconds} s =="
  rm -f "${build}/fuzz-${target#fuzz_}.rc"
  run_target "$target" &
done
wait

failed=()
summary=()
for target in "${targets[@]}"; do
  name="${target#fuzz_}"
  bin="${build}/tests/fuzz/${target}"
  work="${build}/fuzz-corpus/${name}"
  artifacts="${build}/fuzz-artifacts/${name}/"
  log="${build}/fuzz-${name}.log"
  rc="$(cat "${build}/fuzz-${name}.rc" 2>/dev/null || echo "no result")"
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  took="$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)"
  cov="$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)"
  inputs="$(find "$work" -type f | wc -l)"
  if [[ "$rc" == 0 ]]; then
    summary+=("$(printf '%-28s %12s execs %5ss %8s execs/s  cov %-5s new inputs %s' "$target" "${execs:-?}" "${took:-$seconds}" \
      "$(( ${execs:-0} / ( ${took:-$seconds} > 0 ? ${took:-$seconds} : 1 ) ))" "${cov:-?}" "$inputs")")
  else
    failed+=("$target")
    crash="$(ls -t "$artifacts" 2>/dev/null | head -1)"
    summary+=("$(printf '%-28s FAILED (exit %s) after %s execs; input: %s' "$target" "$rc" "${execs:-?}" "${artifacts}${crash}")")
    echo "---- ${target}: last lines of ${log} ----"
    grep -E "ERROR|invariant|runtime error|SUMMARY|#0 |#1 |#2 " "$log" | head -20 || true
    tail -5 "$log"
    [[ -n "$crash" ]] && echo "reproduce: ${bin} ${artifacts}${crash}"
  fi
done

echo
echo "== fuzzing summary (${seconds} s per target, ${jobs} at a time) =="
printf '%s\n' "${summary[@]}"
if ((${#failed[@]} > 0)); then
  echo "ci-fuzz: FAILED: ${failed[*]} (fix the cause, then add the input to tests/fuzz/corpus/<name>/)" >&2
  exit 1
fi
echo "ci-fuzz: no crash in ${#targets[@]} targets"
