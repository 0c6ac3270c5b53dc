// accel/comm/comm_error.hpp — accel::comm::CommError: a communication operation failed or timed out.
//
// It says what torch's "Watchdog caught collective operation timeout" does not: the engine's code and
// string (MPI_Error_string, ncclGetErrorString), NCCL's last error text (ncclGetLastError), a hint per
// code, the operation, its count and dtype, the root or peer, this rank, the operation's sequence
// number on its communicator (the n-th operation this rank issued on it: sends and receives count only
// on the ranks that issue them, so after unequal point-to-point traffic one collective has different
// sequence numbers on different ranks) and, on MPI, its collective number (the n-th collective on the
// communicator: the same on every rank, so the same number on two ranks is the same collective). For
// a timeout it names the ranks that did not arrive when the engine can tell (MPI), and the
// communicator's flight recorder was written to stderr.
//
// After a CommError the communicator is failed: every later operation on it throws a CommError that
// quotes the first one. code() is Errc::runtime_failure; native_code() is the engine's code (an MPI
// error class, an ncclResult_t; 0 for a timeout).
#pragma once

#include <accel/core/dtype.hpp>
#include <accel/core/error.hpp>
#include <accel/core/source_location.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace accel::comm {

class CommError : public Error {
 public:
  struct Info {
    std::string engine;         ///< "mpi", "nccl"
    std::string communicator;   ///< "world", "split of world (color 1)", ...
    int engine_code = 0;        ///< MPI error class, ncclResult_t; 0 when the engine reported nothing
    std::string engine_string;  ///< MPI_Error_string / ncclGetErrorString of engine_code
    std::string last_error;     ///< ncclGetLastError (NCCL; may describe an earlier asynchronous failure)
    std::string hint;           ///< what usually causes this code, and what to try
    std::string op;             ///< "all_reduce", "recv", ...; empty for communicator-level failures
    std::size_t count = 0;      ///< elements per rank, as the operation counts them
    std::optional<Dtype> dtype;
    int peer = -1;              ///< root or peer of the operation, -1 when it has none
    int rank = -1;              ///< this rank in the communicator
    int size = 0;               ///< ranks in the communicator
    std::uint64_t seq = 0;      ///< sequence number of the operation on this rank's communicator (0: none)
    /// The collective's number among the communicator's collectives, alike on every rank (MPI; 0 for
    /// send and recv, for NCCL, and for failures outside an operation).
    std::uint64_t collective = 0;
    bool timed_out = false;
    double waited_seconds = 0;  ///< how long the operation had waited when it failed
    std::vector<int> missing_ranks;  ///< ranks that had not reached the operation (timeouts, when known)
  };

  CommError(Info info, const std::string& what, source_location where = source_location::current())
      : Error(Errc::runtime_failure, what, info.engine_code, where), info_(std::move(info)) {}

  [[nodiscard]] const Info& info() const noexcept { return info_; }
  [[nodiscard]] bool timed_out() const noexcept { return info_.timed_out; }
  [[nodiscard]] std::uint64_t seq() const noexcept { return info_.seq; }
  [[nodiscard]] std::uint64_t collective() const noexcept { return info_.collective; }
  [[nodiscard]] const std::vector<int>& missing_ranks() const noexcept { return info_.missing_ranks; }

 private:
  Info info_;
};

}  // namespace accel::comm
