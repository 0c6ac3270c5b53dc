// accel/comm/detail/state_base.hpp — what every engine's per-communicator state holds, written once:
// MpiState (mpi_engine.hpp) and NcclState (nccl_engine.hpp) derive from it and add their handles.
//
// The rank and size, the name, the timeout (ACCEL_COMM_TIMEOUT when created), the next sequence
// number, the flight recorder (ACCEL_COMM_TRACE_SIZE), whether ACCEL_COMM_LOG records, and the first
// failure (later operations are refused quoting it). `mutex` guards the failure fields and the
// engine's own mutable fields.
#pragma once

#include <accel/comm/comm_error.hpp>
#include <accel/comm/detail/config.hpp>
#include <accel/comm/detail/op.hpp>
#include <accel/comm/detail/op_log.hpp>
#include <accel/comm/flight_recorder.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <utility>

namespace accel::comm::detail {

struct StateBase {
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  std::string name;  // "world", "split of world (color 1)", "group [0, 2] of world", ...
  std::atomic<std::int64_t> timeout_ns{0};
  std::atomic<std::uint64_t> next_seq{0};
  FlightRecorder recorder;
  bool log = false;

  std::atomic<bool> failed{false};
  mutable std::mutex mutex;  // guards the fields below (and the engine's own)
  std::string failure;       // what() of the first failure
  std::uint64_t failed_seq = 0;

  StateBase(std::string n, std::size_t trace)
      : name(std::move(n)), timeout_ns(timeout_from_env().count()), recorder(trace), log(op_log().enabled()) {}
  StateBase(const StateBase&) = delete;
  StateBase& operator=(const StateBase&) = delete;

  [[nodiscard]] std::chrono::nanoseconds timeout() const noexcept {
    return std::chrono::nanoseconds(timeout_ns.load(std::memory_order_relaxed));
  }

  /// Remembers the first failure (operation #seq, `what`); true when this one was it.
  bool record_failure(std::uint64_t seq, const std::string& what) {
    const std::lock_guard<std::mutex> lock(mutex);
    if (failed.load()) return false;
    failure = what;
    failed_seq = seq;
    failed.store(true);
    return true;
  }

  /// The first failure's what() and operation.
  [[nodiscard]] std::pair<std::string, std::uint64_t> first_failure() const {
    const std::lock_guard<std::mutex> lock(mutex);
    return {failure, failed_seq};
  }

  /// Marks #seq failed in the flight recorder and writes the error and the recorder to stderr
  /// (`describe`: the engine's description of this communicator).
  void report(const std::string& describe, std::uint64_t seq, const CommError& error) {
    recorder.failed(seq, error.timed_out());
    const std::string dump =
        recorder.dump("accel::comm flight recorder (" + describe + ", pid " + std::to_string(::getpid()) + "), after " +
                      error.info().op + " #" + std::to_string(seq) + (error.timed_out() ? " timed out:" : " failed:"));
    std::fprintf(stderr, "%s\n%s", error.what(), dump.c_str());
    std::fflush(stderr);
  }

  /// The message of an operation refused because the communicator failed before; `seq` 0: refused at
  /// the call, before it took a sequence number.
  [[nodiscard]] std::string refusal(const char* after, std::uint64_t seq) const {
    const auto [first, first_seq] = first_failure();
    return std::string(seq == 0 ? "refused (not numbered)" : "refused") + ": this communicator failed at operation #" +
           std::to_string(first_seq) + after +
           " (create a new one, or end the job). The first failure: " + first;
  }
};

}  // namespace accel::comm::detail
