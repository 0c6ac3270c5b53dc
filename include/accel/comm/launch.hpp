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
//                                     communicators, finalises MPI if accel initialised it — or, when a
//                                     communicator failed, ends the job with MPI_Abort (a clean finalize
//                                     would wait for the rank that never arrived). Also runs at exit.
//   accel::comm::launch_info()        rank, world size, local rank, and which launcher
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
#include <utility>
#include <vector>

namespace accel::comm {

void finalize() noexcept;

namespace detail {
inline void finalize_at_exit() noexcept { accel::comm::finalize(); }

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
  try {
    const detail::LogMode mode = detail::log_mode_from_env();
    if (mode == detail::LogMode::all || (mode == detail::LogMode::rank0 && r.launch.rank == 0)) {
      const std::string table = detail::op_log().format(
          "accel::comm summary (ACCEL_COMM_LOG), rank " + std::to_string(r.launch.rank) + " of " +
          std::to_string(r.launch.world_size) + ": latency from start to completion on the engine; algbw = bytes / "
          "latency, busbw = algbw x the nccl-tests factor");
      if (!table.empty()) std::fprintf(stderr, "%s", table.c_str());
    }
  } catch (...) {  // a malformed ACCEL_COMM_LOG was reported at init; print nothing
  }
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

/// The communicator of every rank for backend B (see the top of this header).
template <class B>
  requires Collectives<B>
[[nodiscard]] communicator_t<B>& world() {
  using C = communicator_t<B>;
  static C* instance = nullptr;  // guarded by the runtime's mutex; destroyed by finalize()
  detail::Runtime& r = detail::runtime();
  const std::lock_guard<std::recursive_mutex> lock(r.mutex);
  if (instance != nullptr) return *instance;
  init();
  if (r.finalized) throw InvalidStateError("accel::comm::world: communication was finalized in this process");
  instance = new C(C::create_world());
  r.world_destroyers.emplace_back([] { delete std::exchange(instance, nullptr); });
  return *instance;
}

}  // namespace accel::comm
