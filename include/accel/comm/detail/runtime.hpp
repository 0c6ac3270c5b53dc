// accel/comm/detail/runtime.hpp — what accel/comm keeps per process: the launch, whether init() ran,
// the world communicators to destroy at finalize(), whether a failure left a rank that will not come
// back (note_failure: an MPI timeout, a rank that aborted the job, any NCCL failure; then the job ends
// with MPI_Abort, not a clean MPI_Finalize that would wait for that rank — an error MPI reported is not
// noted, it leaves nothing pending), and the hooks of the engines compiled in (each engine's header
// installs its own). Created on first use and never destroyed.
#pragma once

#include <accel/comm/launch_info.hpp>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace accel::comm::detail {

struct Runtime {
  std::recursive_mutex mutex;  // init() may create what calls back into it
  bool initialized = false;
  bool finalized = false;
  LaunchInfo launch;
  bool mpi_initialized_by_accel = false;
  std::atomic<bool> any_failure{false};
  std::string first_failure;  // under mutex
  std::vector<std::function<void()>> world_destroyers;  // in creation order; run in reverse

  // MPI's hooks, set by accel/comm/mpi.hpp where accel has MPI.
  void (*mpi_init)(Runtime&, int*, char***) = nullptr;  // MPI_Init_thread when a launcher started us
  void (*mpi_finalize)(Runtime&) = nullptr;             // MPI_Finalize, or MPI_Abort after a failure
  void (*mpi_broadcast)(void*, int) = nullptr;          // bytes from world rank 0 to all (NCCL's unique id)
  // accel::comm::abort: tell the other ranks, then MPI_Abort (returns only where MPI is not running).
  void (*mpi_abort)(const std::string& reason, int exit_code) = nullptr;
  // NCCL's, set by accel/comm/nccl.hpp: stops its watchdog thread before CUDA unloads.
  void (*nccl_shutdown)() = nullptr;
  // accel::comm::abort: aborts every NCCL communicator of the process (ncclCommAbort: kernels end).
  void (*nccl_abort)(const std::string& reason) = nullptr;
};

inline Runtime& runtime() {
  static Runtime* const instance = new Runtime();
  return *instance;
}

/// A communicator of this process failed in a way that leaves work pending (see the top): remembered
/// for finalize() and the messages.
inline void note_failure(const std::string& what) {
  Runtime& r = runtime();
  if (!r.any_failure.exchange(true)) {
    const std::lock_guard<std::recursive_mutex> lock(r.mutex);
    r.first_failure = what;
  }
}

}  // namespace accel::comm::detail
