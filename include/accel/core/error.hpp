// accel/core/error.hpp — the exception hierarchy every accel call throws.
//
// accel::Error derives from std::runtime_error and carries:
//   - an accel::Errc (what kind of failure, portable across backends),
//   - the native status code of the failing library call, if any (cudaError_t, NCCL, errno, ...),
//   - the call site (source_location).
// Subclasses let callers catch what they can act on: OutOfMemoryError, BackendUnavailableError,
// InvalidArgumentError, CompileError. Messages name the backend and device ("cuda:3 does not exist
// (device_count() == 1)").
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <accel/core/source_location.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace accel {

/// Portable error category of an accel::Error.
enum class Errc : int {
  invalid_argument = 1,   ///< a bad value from the caller: index out of range, malformed string or blob
  out_of_memory,          ///< an allocation could not be served even after freeing cached blocks
  backend_unavailable,    ///< the backend was not built, has no driver, or has no device
  compile_failed,         ///< a JIT compile of an op failed
  runtime_failure,        ///< a native runtime call failed (retry may succeed)
  context_lost,           ///< a sticky native error: the device context is unusable
  invalid_state,          ///< the call is not allowed now (e.g. synchronizing a capturing stream)
  task_failed,            ///< a task enqueued on a stream threw
  not_supported,          ///< the capability does not exist on this backend or device
};

/// Human-readable name of an Errc, e.g. "invalid_argument".
[[nodiscard]] constexpr std::string_view to_string(Errc code) noexcept {
  switch (code) {
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::out_of_memory: return "out_of_memory";
    case Errc::backend_unavailable: return "backend_unavailable";
    case Errc::compile_failed: return "compile_failed";
    case Errc::runtime_failure: return "runtime_failure";
    case Errc::context_lost: return "context_lost";
    case Errc::invalid_state: return "invalid_state";
    case Errc::task_failed: return "task_failed";
    case Errc::not_supported: return "not_supported";
  }
  return "unknown";
}

/// Base of every exception accel throws.
class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message, std::int64_t native_code = 0,
        source_location where = source_location::current())
      : std::runtime_error(message), code_(code), native_code_(native_code), where_(where) {}

  /// Portable category.
  [[nodiscard]] Errc code() const noexcept { return code_; }
  /// Status of the failing native call (cudaError_t, ncclResult_t, errno ...), 0 when none.
  [[nodiscard]] std::int64_t native_code() const noexcept { return native_code_; }
  /// Where the error was raised.
  [[nodiscard]] const source_location& where() const noexcept { return where_; }

 private:
  Errc code_;
  std::int64_t native_code_;
  source_location where_;
};

/// A caller-supplied value is wrong (bad index, malformed string, unknown name, bad state blob).
class InvalidArgumentError : public Error {
 public:
  explicit InvalidArgumentError(const std::string& message,
                                source_location where = source_location::current())
      : Error(Errc::invalid_argument, message, 0, where) {}
};

/// An allocation failed after the allocator freed its cache and retried.
/// std::bad_alloc is not a base because accel errors carry a message; catch accel::Error or this.
class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(const std::string& message, std::size_t requested_bytes, std::int64_t native_code = 0,
                   source_location where = source_location::current())
      : Error(Errc::out_of_memory, message, native_code, where), requested_bytes_(requested_bytes) {}
  [[nodiscard]] std::size_t requested_bytes() const noexcept { return requested_bytes_; }

 private:
  std::size_t requested_bytes_;
};

/// The backend cannot be used in this process: not built, no driver, no device.
class BackendUnavailableError : public Error {
 public:
  explicit BackendUnavailableError(const std::string& message, std::int64_t native_code = 0,
                                   source_location where = source_location::current())
      : Error(Errc::backend_unavailable, message, native_code, where) {}
};

/// A JIT compile failed; log() holds the compiler's output and command() what was run.
class CompileError : public Error {
 public:
  CompileError(const std::string& message, std::string command, std::string log,
               source_location where = source_location::current())
      : Error(Errc::compile_failed, message + "\ncommand: " + command + "\n" + log, 0, where),
        command_(std::move(command)),
        log_(std::move(log)) {}
  [[nodiscard]] const std::string& command() const noexcept { return command_; }
  [[nodiscard]] const std::string& log() const noexcept { return log_; }

 private:
  std::string command_;
  std::string log_;
};

/// A call made in a state that forbids it (e.g. synchronizing a stream that is capturing).
class InvalidStateError : public Error {
 public:
  explicit InvalidStateError(const std::string& message,
                             source_location where = source_location::current())
      : Error(Errc::invalid_state, message, 0, where) {}
};

/// A host task enqueued on a stream threw; surfaced at the stream's next synchronization.
/// what() carries the original message; nested() rethrows the original exception.
class TaskError : public Error {
 public:
  TaskError(const std::string& message, std::exception_ptr original,
            source_location where = source_location::current())
      : Error(Errc::task_failed, message, 0, where), original_(std::move(original)) {}
  [[nodiscard]] std::exception_ptr original() const noexcept { return original_; }

 private:
  std::exception_ptr original_;
};

/// The capability does not exist on this backend or device.
class NotSupportedError : public Error {
 public:
  explicit NotSupportedError(const std::string& message,
                             source_location where = source_location::current())
      : Error(Errc::not_supported, message, 0, where) {}
};

}  // namespace accel
