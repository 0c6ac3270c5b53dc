#!/usr/bin/env bash
# CI: the CPU test suites under AddressSanitizer + UndefinedBehaviorSanitizer, then under
# ThreadSanitizer (the `asan` and `tsan` presets: CPU-only Debug builds, so asserts are on, at -O0 with
# -g1: line tables, which is all a sanitizer report prints), compiled with clang++ when it is
# installed (else the default compiler). The ASan build is also CI's clang++ -Werror configuration
# with CUDA switched off: it builds every public header on its own (accel_header_check), the ODR and
# concept checks, and runs them with the suites.
#
# Cost, measured from empty build directories at -j2 on the 2-core CI VM (issue 9): ASan build 147 s
# + tests 25 s, TSan build 52 s + tests 9 s. Before (g++ at -O1, and a separate clang++ build of the
# headers and suites): ASan 385 s, clang++ step 228 s, TSan ~140 s. clang++ -O0 compiles the heaviest
# suite (conformance/test_graph.cpp) in 7.5 s of CPU against g++ -O1's 25.7 s; the tests run as fast.
# ACCEL_UNITY_BUILD=ON (.ci/run sets it) builds them as unity builds (CMAKE_UNITY_BUILD).
#
# What runs where:
#   ASan+UBSan  core (test_core, test_dtype, test_lazy_init), memory (test_caching_allocator, test_cpu_memory[_2dev],
#               test_allocator_mutex),
#               conformance (test_conformance[_4_cpu_devices]), dispatch (test_dispatch[_env_cpu]),
#               stress (test_stress_*, ACCEL_STRESS_SCALE=0.5), failure paths (test_failure*),
#               graphs (test_cpu_graph: capture, replay, pools, invalidated captures),
#               the JIT's failure paths and its process helper (test_jit_reliability: one-line ops and
#               shell-script compilers, a few seconds),
#               GEMM (test_blas[_2dev]: argument checks, buffer spans, oneDNN on CPU streams),
#               collectives (test_comm_units; test_comm_mpi_np2/np3: every operation under mpirun),
#               the engine built with CUDA off under clang++ (examples on in this build only): its
#               refusals (engine_exit2_*), a 16-step fp16 run (engine_fp16_loss_scale), --run-ahead on
#               against off (engine_run_ahead), --activation-checkpointing against without
#               (engine_activation_checkpointing), ZeRO over MPI
#               (engine_dp_default, engine_dp_resume: checkpoints written and read back), the
#               removal of interrupted saves' leftovers and --keep-last (test_engine_checkpoint: forked
#               writers), --save on a file system too small (engine_save_space), the thread count from
#               OMP_NUM_THREADS, taskset and a cgroup's CPU quota (engine_threads_*); the cgroup
#               limits' parsing (test_cpu_cgroup), and the CUDA attention kernels run on the CPU
#               through an emulation of a block's threads and their PTX, directly and as the engine
#               launches them (test_flash_host: ~15 s here; a read past a tensor's end in a tile load,
#               or a scratch one float short, is an ASan report — what compute-sanitizer's memcheck
#               sees on a GPU), and accel's CUDA kernels the same way: nn_ops through NnKernels
#               (test_nn_ops_cuda_host: ~11 s here), fused Adam, the tensor ops and the Philox fills
#               (test_ops_cuda_host: ~12 s; the three took 54, 44 and 26 s on the Zen 4 VM before
#               tests/support/fiber.hpp replaced swapcontext)
#               -> memory errors and undefined behaviour anywhere the CPU backend and the
#                  allocator go, including the OOM, throwing-task and fork paths;
#               header hygiene (accel_header_check, test_odr, test_concepts and the readable-error
#               checks) -> every CPU-only header compiles alone under clang++ -Werror, no CUDA.
#   TSan        CPU streams and events (test_cpu_stream[_2dev]: also cycles of cross-stream waits),
#               the allocator's lock (test_allocator_mutex: its single-threaded plain path, then a thread
#               started while it is held), CPU memory (test_cpu_memory: among others, a stream task that
#               allocates and frees while empty_cache waits for that stream with the lock released),
#               lazy_call's queue triggered from several threads (test_lazy_init), graphs (test_cpu_graph: replays across
#               streams, captures from several threads), fork while threads allocate
#               (test_failure_fork_allocator), fork while a stream runs a task (test_failure_fork_streams):
#               the fork cases whose children start no thread,
#               conformance (test_conformance), the JIT's process helper and failure paths
#               (test_jit_reliability: compilers run from several threads, forks, SIGCHLD handlers),
#               memory, stream and event stress (test_stress_allocator, test_stress_streams,
#               test_stress_events at ACCEL_STRESS_SCALE=0.25: TSan is 5-15x slower), collectives
#               (test_comm_mpi_np2: MPI called from stream workers and host threads at once)
#               -> data races in the stream queues, event captures and the allocator's locking.
# Not under TSan: test_blas (oneDNN runs on OpenMP, whose runtime is not built for ThreadSanitizer).
# Not under a sanitizer here: test_ops (it compiles every real kernel with -O3: half a minute of
# compiler time that no sanitizer instruments — the JIT code it runs is test_jit_reliability's, which
# is here), the consumer tests (they build outside projects), the fuzz replays (the fuzz
# targets are built with ASan+UBSan by scripts/ci-fuzz.sh), and test_failure's address-space-limit
# case (RLIMIT_AS; it skips itself, saying why: the sanitizer runtimes need that address space). A suite missing from this checkout is
# skipped with a note, so the script runs while areas are still landing.
#
# Suppressions: none. Options below only make reports fatal and complete. For the MPI ranks of the comm
# tests, tests/comm/run_mpi.cmake turns off LeakSanitizer (Open MPI's libraries leak at exit) and TSan's
# lock-order report (Open MPI's own locks inside MPI_Init); memory errors, UB and races stay fatal.
#
# Usage: scripts/ci-sanitizers.sh [asan|tsan ...]   (default: both)
#   ACCEL_JOBS=N              parallel build jobs and tests (default: nproc)
#   ACCEL_SANITIZER_BUILD=DIR build directory prefix (default: build/, giving build/asan, build/tsan)
#   ACCEL_SANITIZER_CXX=C     the compiler (default: clang++ when installed, else c++)
#   ACCEL_STRESS_SCALE_ASAN=X, ACCEL_STRESS_SCALE_TSAN=X   stress load (defaults 0.5 and 0.25)
set -euo pipefail
cd "$(dirname "$0")/.."

jobs="${ACCEL_JOBS:-$(nproc)}"
prefix="${ACCEL_SANITIZER_BUILD:-build/}"
scale_asan="${ACCEL_STRESS_SCALE_ASAN:-0.5}"
scale_tsan="${ACCEL_STRESS_SCALE_TSAN:-0.25}"
if [[ -z "${ACCEL_SANITIZER_CXX:-}" ]]; then
  ACCEL_SANITIZER_CXX=c++
  command -v clang++ >/dev/null && ACCEL_SANITIZER_CXX=clang++
fi

# Reports are fatal (the presets also compile with -fno-sanitize-recover=all for UBSan).
# detect_leaks: the allocators and stream registry are process-lifetime singletons reachable from
# globals, which LeakSanitizer does not count as leaks, so leak checking stays on.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:check_initialization_order=1:strict_init_order=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"

asan_targets=(test_core test_dtype test_lazy_init test_caching_allocator test_cpu_memory test_allocator_mutex test_conformance test_dispatch
              test_stress_allocator test_stress_streams test_stress_events test_stress_first_call test_failure
              test_cpu_graph test_jit_reliability accel_header_check test_odr test_concepts test_blas test_comm_units
              test_comm_mpi engine dp_check test_engine_checkpoint test_flash_host test_nn_ops_cuda_host test_ops_cuda_host readme_example test_cpu_cgroup)
asan_tests='^(test_blas(_2dev)?|test_core|test_dtype|test_lazy_init|test_caching_allocator|test_cpu_memory(_2dev)?|test_allocator_mutex|test_conformance(_4_cpu_devices)?|test_dispatch(_env_cpu)?|test_stress_.*|test_failure.*|test_cpu_graph|test_jit_reliability|test_odr|test_concepts|concept_error_is_readable|op_builder_opt_in_error_is_readable|cuda_op_builder_opt_in_error_is_readable|old_backend_error_names_what_to_add|test_comm_units|test_comm_mpi_np[23]|engine_exit2_.*|engine_threads_.*|test_cpu_cgroup|engine_fp16_loss_scale|engine_run_ahead|engine_activation_checkpointing|engine_save_space|engine_dp_(default|resume)|test_engine_checkpoint|test_flash_host|test_nn_ops_cuda_host|test_ops_cuda_host|readme_example)$'
tsan_targets=(test_cpu_stream test_allocator_mutex test_cpu_memory test_cpu_graph test_failure test_lazy_init test_conformance test_stress_allocator
              test_stress_streams test_stress_events test_jit_reliability test_comm_mpi)
tsan_tests='^(test_cpu_stream(_2dev)?|test_allocator_mutex|test_cpu_memory(_2dev)?|test_lazy_init|test_cpu_graph|test_failure_fork_(allocator|streams)|test_conformance|test_stress_(allocator|streams|events)|test_jit_reliability|test_comm_mpi_np2)$'

# Ninja where installed (scripts/lib/generator.sh): it builds a list of targets side by side.
source scripts/lib/generator.sh

run_preset() {
  local preset="$1"
  local dir="${prefix}${preset}"
  local -n targets="$2"
  local tests="$3"
  export ACCEL_STRESS_SCALE="$4"
  local examples="$5"
  local start=$SECONDS
  echo "== ${preset}: configure (${dir}, ${ACCEL_SANITIZER_CXX}) =="
  cmake --preset "$preset" -B "$dir" $(accel_generator "$dir") -DCMAKE_CXX_COMPILER="$ACCEL_SANITIZER_CXX" \
    -DACCEL_BUILD_EXAMPLES="$examples" -DCMAKE_UNITY_BUILD="${ACCEL_UNITY_BUILD:-OFF}" >/dev/null
  # Only the targets this checkout defines (an area still landing is skipped, not an error).
  local available=() missing=()
  local help
  help="$(cmake --build "$dir" --target help)"
  for t in "${targets[@]}"; do  # listed as "... t" by Makefiles, "t: phony" by Ninja
    if grep -qE "^(\.\.\. )?${t}(:| |$)" <<<"$help"; then available+=("$t"); else missing+=("$t"); fi
  done
  ((${#missing[@]} == 0)) || echo "${preset}: not in this checkout, skipped: ${missing[*]}"
  echo "== ${preset}: build ${available[*]} (-j${jobs}) =="
  cmake --build "$dir" -j "$jobs" --target "${available[@]}"
  local built=$SECONDS
  echo "== ${preset}: run (ACCEL_STRESS_SCALE=${ACCEL_STRESS_SCALE}) =="
  ctest --test-dir "$dir" -R "$tests" -j "$jobs" --output-on-failure --timeout 900
  echo "== ${preset}: done: build $((built - start)) s, tests $((SECONDS - built)) s =="
}

presets=("$@")
((${#presets[@]} > 0)) || presets=(asan tsan)
for preset in "${presets[@]}"; do
  case "$preset" in
    asan) run_preset asan asan_targets "$asan_tests" "$scale_asan" ON ;;
    tsan) run_preset tsan tsan_targets "$tsan_tests" "$scale_tsan" OFF ;;
    *) echo "ci-sanitizers: unknown preset '$preset' (asan, tsan)" >&2; exit 2 ;;
  esac
done
echo "ci-sanitizers: all passed in ${SECONDS} s"
