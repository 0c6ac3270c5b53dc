// accel/comm/launch.hpp — starting and ending communication in a process.
//
//   accel::comm::init(argc, argv)     once, first thing in main (idempotent): reads the launch
//                                     (launch_info.hpp); under mpirun initialises MPI with
//                                     MPI_THREAD_MULTIPLE (argc/argv as MPI_Init_thread takes them);
//                                     registers finalize() to run at exit
//   accel::comm::world<B>()           the communicator of every rank for backend B, created on first
//                                     call (collective: every rank calls it) and kept until finalize():
//                                       CpuBackend   MPI_COMM_WORLD's copy (mpirun, or one rank)
//                                       CudaBackend  NCCL on the device of the local rank (made current):
//                                                    the unique id broadcast over MPI under mpirun, or
//                                                    exchanged through ACCEL_COMM_INIT_FILE under a
//                                                    torchrun-style launch (RANK, WORLD_SIZE, LOCAL_RANK)
//   accel::comm::finalize()           prints the ACCEL_COMM_LOG summary, destroys the world
//                                     communicators, finalises MPI if accel initialised it — or, when an
//                                     operation timed out or failed because a rank aborted the job (MPI),
//                                     or any NCCL communicator failed, ends the job with MPI_Abort (a
//                                     clean finalize would wait for the rank that never arrived). An
//                                     error MPI reported leaves nothing pending: MPI_Finalize as usual.
//                                     Also runs at exit.
//   accel::comm::launch_info()        rank, world size, local rank, and which launcher
//   accel::comm::abort(reason [, exit_code])
//                                     ends the job now because of a fatal error on this rank (MPI_Abort,
//                                     ncclCommAbort, torchrun's "a worker failed"), so that no rank waits
//                                     for this one until its timeout; see its comment
//
// CPU ranks start through mpirun: Open MPI cannot join processes it did not launch.
#pragma once

#include <accel/comm/detail/config.hpp>
#include <accel/comm/detail/op_log.hpp>
#include <accel/comm/detail/runtime.hpp>
#include <accel/comm/launch_info.hpp>
#include <accel/concepts/comm.hpp>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace accel::comm {

void finalize() noexcept;

namespace detail {
inline void finalize_at_exit() noexcept { accel::comm::finalize(); }

/// The ACCEL_COMM_LOG summary on stderr, where the mode asks for it on this rank.
inline void print_log_summary(int rank, int world_size) noexcept {
  try {
    const LogMode mode = log_mode_from_env();
    if (mode == LogMode::all || (mode == LogMode::rank0 && rank == 0)) {
      const std::string table = op_log().format(
          "accel::comm summary (ACCEL_COMM_LOG), rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
          ": latency from start to completion on the engine; algbw = bytes / latency, busbw = algbw x the "
          "nccl-tests factor");
      if (!table.empty()) std::fprintf(stderr, "%s", table.c_str());
    }
  } catch (...) {  // a malformed ACCEL_COMM_LOG was reported at init; print nothing
  }
}

inline const LaunchInfo& init_impl(int* argc, char*** argv) {
  Runtime& r = runtime();
  const std::lock_guard<std::recursive_mutex> lock(r.mutex);
  if (r.finalized) throw InvalidStateError("accel::comm::init: communication was finalized in this process");
  if (r.initialized) return r.launch;
  r.launch = detect_launch();
  if (log_mode_from_env() != LogMode::off) op_log().enable();
  if (r.launch.launcher == Launcher::mpi && r.mpi_init != nullptr) r.mpi_init(r, argc, argv);
  r.initialized = true;
  std::atexit(&finalize_at_exit);
  return r.launch;
}
}  // namespace detail

/// Starts communication for this process (see the top of this header). Returns the launch.
inline const LaunchInfo& init(int& argc, char**& argv) { return detail::init_impl(&argc, &argv); }
inline const LaunchInfo& init() { return detail::init_impl(nullptr, nullptr); }

[[nodiscard]] inline bool is_initialized() noexcept {
  detail::Runtime& r = detail::runtime();
  const std::lock_guard<std::recursive_mutex> lock(r.mutex);
  return r.initialized && !r.finalized;
}

/// The launch (init() first if it has not run).
[[nodiscard]] inline const LaunchInfo& launch_info() { return init(); }

/// Ends communication (see the top of this header). Idempotent; never throws.
inline void finalize() noexcept {
  detail::Runtime& r = detail::runtime();
  const std::lock_guard<std::recursive_mutex> lock(r.mutex);
  if (!r.initialized || r.finalized) return;
  r.finalized = true;
  detail::print_log_summary(r.launch.rank, r.launch.world_size);
  std::vector<std::function<void()>> destroyers = std::move(r.world_destroyers);
  for (auto it = destroyers.rbegin(); it != destroyers.rend(); ++it) {
    try {
      (*it)();
    } catch (...) {
    }
  }
  if (r.nccl_shutdown != nullptr) r.nccl_shutdown();
  if (r.mpi_finalize != nullptr) r.mpi_finalize(r);
}

/// Ends the job now because of a fatal error on this rank: what MPI_Abort does for MPI programs,
/// ncclCommAbort for NCCL communicators, and a non-zero exit for torchrun (which then stops the other
/// workers). Use it where a rank cannot go on (DeepSpeed and torch programs raise, and the launcher ends
/// the job): the other ranks would otherwise wait for this one in their next collective until the
/// timeout (ACCEL_COMM_TIMEOUT, 10 minutes by default).
///  1. stderr: "accel::comm: rank R of N aborts the job (MPI_Abort): <reason>", the flight recorder of
///     each communicator of this process, and the ACCEL_COMM_LOG summary where it is on;
///  2. every NCCL communicator is aborted (its kernels end; its flight recorder is written);
///  3. under mpirun, the other ranks are told: an operation of theirs that waits for this rank fails
///     within about 10 ms with a CommError naming it and quoting `reason` (missing_ranks() holds it),
///     their flight recorders go to their stderr, and they acknowledge; after every rank did, or after
///     2 s (a rank busy computing is not waiting), MPI_Abort(MPI_COMM_WORLD, exit_code) ends them all;
///  4. elsewhere (one process, or a torchrun-style launch) the process exits with exit_code.
/// exit_code 0 becomes 1 (an abort is a failure). Safe from any thread; never returns.
[[noreturn]] inline void abort(std::string_view reason, int exit_code = 1) noexcept {
  if (exit_code == 0) exit_code = 1;
  const detail::Runtime& r = detail::runtime();
  try {
    LaunchInfo launch;
    try {
      launch = detect_launch();  // the launcher's variables; no lock (another thread may hold the runtime's)
    } catch (...) {
    }
    const std::string why(reason);
    const std::string how = launch.launcher == Launcher::mpi && r.mpi_abort != nullptr
                                ? std::string("MPI_Abort")
                                : "exit status " + std::to_string(exit_code);
    std::fprintf(stderr, "accel::comm: rank %d of %d aborts the job (%s): %s\n", launch.rank, launch.world_size,
                 how.c_str(), why.c_str());
    std::fflush(stderr);
    detail::print_log_summary(launch.rank, launch.world_size);
    if (r.nccl_abort != nullptr) r.nccl_abort(why);
    if (r.mpi_abort != nullptr) r.mpi_abort(why, exit_code);  // under mpirun: does not return
  } catch (...) {  // ending the job matters more than the report
  }
  std::fflush(nullptr);
  std::_Exit(exit_code);
}

/// The communicator of every rank for backend B (see the top of this header).
template <class B>
  requires Collectives<B>
[[nodiscard]] communicator_t<B>& world() {
  using C = communicator_t<B>;
  static C* instance = nullptr;  // guarded by the runtime's mutex; destroyed by finalize()
  detail::Runtime& r = detail::runtime();
  const std::lock_guard<std::recursive_mutex> lock(r.mutex);
  if (instance != nullptr) return *instance;
  // Before init(), whose own refusal would name init rather than the call the user made.
  if (r.finalized) {
    throw InvalidStateError(
        "accel::comm::world(): communication was finalized in this process (finalize() ran; it cannot be restarted)");
  }
  init();
  instance = new C(C::create_world());
  r.world_destroyers.emplace_back([] { delete std::exchange(instance, nullptr); });
  return *instance;
}

}  // namespace accel::comm
