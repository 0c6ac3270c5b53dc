// accel/comm/detail/mpi_error.hpp — MPI's error codes as text and hints (what usually causes each
// error class, and what to try), for CommError. Compiled only where accel has MPI.
#pragma once

#if defined(ACCEL_HAS_MPI)

#include <mpi.h>

#include <string>

namespace accel::comm::detail {

/// MPI_Error_string of `code`, and its class's name.
[[nodiscard]] inline std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING + 1] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(length));
}

[[nodiscard]] inline int mpi_error_class(int code) {
  int cls = code;
  if (MPI_Error_class(code, &cls) != MPI_SUCCESS) return code;
  return cls;
}

/// What usually causes an MPI error class, and what to try.
[[nodiscard]] inline std::string mpi_hint(int cls) {
  if (cls == MPI_ERR_TRUNCATE) {
    return "a message was longer than the receive buffer: the ranks passed different counts (or a send met a recv "
           "of another size); every rank must pass the same count and dtype";
  }
  if (cls == MPI_ERR_COUNT) return "a count is negative or beyond the engine's int limit";
  if (cls == MPI_ERR_TYPE) return "the datatype is not valid on this rank (did MPI finalize?)";
  if (cls == MPI_ERR_OP) return "the reduce op does not apply to this datatype";
  if (cls == MPI_ERR_ROOT) return "the root differs between ranks or is out of range";
  if (cls == MPI_ERR_RANK) return "a peer rank is out of range for this communicator";
  if (cls == MPI_ERR_COMM) return "the communicator is not valid (freed, or MPI finalized)";
  if (cls == MPI_ERR_BUFFER) return "a buffer pointer is not valid";
  if (cls == MPI_ERR_INTERN || cls == MPI_ERR_NO_MEM) {
    return "MPI ran out of memory or hit an internal error; check the machine's memory and the MPI library";
  }
  if (cls == MPI_ERR_OTHER || cls == MPI_ERR_UNKNOWN) {
    return "the MPI library reported an unspecific error: a peer process may have died; run with the MPI "
           "library's verbose options for details";
  }
  return "see the MPI library's documentation for this error class";
}

}  // namespace accel::comm::detail

#endif  // ACCEL_HAS_MPI
