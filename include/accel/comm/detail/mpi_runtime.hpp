// accel/comm/detail/mpi_runtime.hpp — MPI for the process: MPI_Init_thread with MPI_THREAD_MULTIPLE
// (CPU streams call MPI from their worker threads and the host thread at once), MPI_Finalize at the
// end — or MPI_Abort when a communicator failed, since a clean finalize waits for every rank, the one
// that never arrived included — and the library's version for communication_backend_version().
// Compiled only where accel has MPI; the hooks are installed into the runtime when this header is
// included (an inline variable's initialiser).
#pragma once

#if defined(ACCEL_HAS_MPI)

#include <accel/comm/detail/config.hpp>
#include <accel/comm/detail/runtime.hpp>
#include <accel/core/error.hpp>
#include <accel/detail/comm_engine.hpp>

#include <mpi.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <string>

namespace accel::comm::detail {

[[nodiscard]] inline const char* thread_level_name(int level) noexcept {
  if (level == MPI_THREAD_SINGLE) return "MPI_THREAD_SINGLE";
  if (level == MPI_THREAD_FUNNELED) return "MPI_THREAD_FUNNELED";
  if (level == MPI_THREAD_SERIALIZED) return "MPI_THREAD_SERIALIZED";
  if (level == MPI_THREAD_MULTIPLE) return "MPI_THREAD_MULTIPLE";
  return "an unknown thread level";
}

/// MPI is initialised with MPI_THREAD_MULTIPLE (by accel now, or by the program before); anything else
/// is an error that says what to do.
inline void mpi_ensure_initialized(Runtime& r, int* argc, char*** argv) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized != 0) throw InvalidStateError("accel::comm: MPI was finalized; it cannot be used again in this process");
  int provided = 0;
  if (initialized == 0) {
    const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      throw BackendUnavailableError("accel::comm: MPI_Init_thread failed (error " + std::to_string(rc) + ")", rc);
    }
    r.mpi_initialized_by_accel = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    throw InvalidStateError(std::string("accel::comm: MPI provides ") + thread_level_name(provided) +
                            ", but accel's CPU streams call MPI from several threads: it needs MPI_THREAD_MULTIPLE "
                            "(initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...), or let "
                            "accel::comm::init do it; Open MPI must be built with thread support)");
  }
  // Errors come back as codes (then CommErrors), not as MPI's default abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

inline void mpi_finalize(Runtime& r) {
  if (!r.mpi_initialized_by_accel) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized != 0) return;
  if (r.any_failure.load()) {
    std::fprintf(stderr,
                 "accel::comm: a communicator failed in this process; ending the job with MPI_Abort rather than "
                 "MPI_Finalize, which would wait for every rank, the one that did not arrive included. The first "
                 "failure: %s\n",
                 r.first_failure.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
}

/// "Open MPI v4.1.4 (MPI 3.1)": the library's first line up to its first comma, and the standard.
[[nodiscard]] inline std::string mpi_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING + 1] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);  // callable before MPI_Init
  std::string line(text, static_cast<std::size_t>(length));
  line = line.substr(0, line.find_first_of(",\n"));
  std::string clean;
  for (const char c : line) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      if (!clean.empty() && clean.back() != ' ') clean += ' ';
    } else {
      clean += c;
    }
  }
  while (!clean.empty() && clean.back() == ' ') clean.pop_back();
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  return clean + " (MPI " + std::to_string(major) + "." + std::to_string(minor) + ")";
}

/// `bytes` of world rank 0 into every rank's `data` (MPI_Ibcast on MPI_COMM_WORLD, waited for against
/// ACCEL_COMM_TIMEOUT): how NCCL's unique id reaches the ranks under mpirun.
inline void mpi_broadcast(void* data, int bytes) {
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_Ibcast(data, bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &request);
  const auto timeout = timeout_from_env();
  const auto start = std::chrono::steady_clock::now();
  int done = 0;
  while (rc == MPI_SUCCESS && done == 0) {
    rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done == 0 && std::chrono::steady_clock::now() - start > timeout) {
      throw InvalidStateError("accel::comm: broadcasting NCCL's unique id over MPI timed out: a rank did not call "
                              "world<CudaBackend>()");
    }
  }
  if (rc != MPI_SUCCESS) {
    throw InvalidStateError("accel::comm: broadcasting NCCL's unique id over MPI failed (error " + std::to_string(rc) +
                            ")");
  }
}

inline const bool mpi_hooks_installed = [] {
  Runtime& r = runtime();
  r.mpi_init = &mpi_ensure_initialized;
  r.mpi_finalize = &mpi_finalize;
  r.mpi_broadcast = &mpi_broadcast;
  accel::detail::comm_version_probe(accel::detail::CommEngine::mpi).store(&mpi_version);
  return true;
}();

}  // namespace accel::comm::detail

#else  // a build without MPI says so

#include <accel/detail/comm_engine.hpp>

#include <string>

namespace accel::comm::detail {
inline std::string mpi_version_unavailable() {
  return "unavailable: accel was built without MPI (install an MPI library, e.g. libopenmpi-dev, and reconfigure)";
}
inline const bool mpi_hooks_installed = [] {
  accel::detail::comm_version_probe(accel::detail::CommEngine::mpi).store(&mpi_version_unavailable);
  return true;
}();
}  // namespace accel::comm::detail

#endif  // ACCEL_HAS_MPI
