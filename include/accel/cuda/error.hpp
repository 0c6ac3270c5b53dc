// accel/cuda/error.hpp — accel::CudaError and the checks every CUDA runtime call goes through.
//
//   ACCEL_CUDA_CHECK(cudaMalloc(&p, n));            throws on failure; the message is built only then
//   if (!ACCEL_CUDA_CHECK_NOTHROW(cudaFree(p))) ... for destructors: never throws, tolerates
//                                                   cudaErrorCudartUnloading (static destruction)
//
// What a failing call throws (every exception carries the cudaError_t as native_code(), the failing
// call's text and the call site):
//   cudaErrorMemoryAllocation                       -> accel::OutOfMemoryError
//   no driver / driver too old / no device / stub   -> accel::BackendUnavailableError
//   a sticky error (illegal address, launch failure, device assert, ...)
//                                                   -> accel::CudaError with Errc::context_lost: the
//                                                      CUDA context is unusable, restart the process
//   anything else                                   -> accel::CudaError with Errc::runtime_failure
// Before throwing, the runtime's last-error slot is cleared (cudaGetLastError) so a non-sticky error
// does not resurface from an unrelated later call. Sticky errors cannot be cleared; they are reported
// as fatal, never as retryable.
#pragma once

#include <accel/core/error.hpp>
#include <accel/core/source_location.hpp>
#include <accel/cuda/detail/cuda_api.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace accel {

namespace cuda {

/// True for errors that leave the CUDA context unusable: every later CUDA call in this process fails
/// with the same error ("the process must be terminated and relaunched", driver_types.h).
[[nodiscard]] constexpr bool is_sticky(cudaError_t status) noexcept {
  switch (static_cast<int>(status)) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
    case 226:  // cudaErrorContained (CUDA >= 12.4): a contained device exception
    case 721:  // cudaErrorTensorMemoryLeak (CUDA >= 12.8)
      return true;
    default:
      return false;
  }
}

/// True for errors that mean CUDA cannot be used in this process at all: no driver, a driver older
/// than the runtime, no device, a stub libcuda, or a fork after CUDA was initialised.
[[nodiscard]] constexpr bool is_unavailable(cudaError_t status) noexcept {
  switch (status) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorStubLibrary:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemNotReady:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorInitializationError:
      return true;
    default:
      return false;
  }
}

/// The portable category of a CUDA status.
[[nodiscard]] constexpr Errc errc_of(cudaError_t status) noexcept {
  if (status == cudaErrorMemoryAllocation) return Errc::out_of_memory;
  if (is_sticky(status)) return Errc::context_lost;
  if (is_unavailable(status)) return Errc::backend_unavailable;
  if (status == cudaErrorInvalidValue || status == cudaErrorInvalidDevice ||
      status == cudaErrorInvalidDevicePointer || status == cudaErrorInvalidResourceHandle) {
    return Errc::invalid_argument;
  }
  return Errc::runtime_failure;
}

/// "cudaErrorIllegalAddress" (cudaGetErrorName; a table lookup, safe without a driver).
[[nodiscard]] inline std::string_view error_name(cudaError_t status) noexcept {
  const char* name = cudaGetErrorName(status);
  return name != nullptr ? std::string_view(name) : std::string_view("cudaError(unknown)");
}

/// "an illegal memory access was encountered" (cudaGetErrorString).
[[nodiscard]] inline std::string_view error_string(cudaError_t status) noexcept {
  const char* text = cudaGetErrorString(status);
  return text != nullptr ? std::string_view(text) : std::string_view("unrecognized error code");
}

namespace detail {

inline std::string site_of(const source_location& where) {
  std::string_view file = where.file_name();
  if (const auto slash = file.rfind("include/accel/"); slash != std::string_view::npos) {
    file.remove_prefix(slash + 8);  // "accel/cuda/memory.hpp" rather than an absolute path
  }
  return std::string(file) + ":" + std::to_string(where.line());
}

// "cudaMalloc(&p, n) failed with cudaErrorMemoryAllocation (out of memory) at accel/cuda/memory.hpp:42
//  [context]; <what it means>"
inline std::string format_message(cudaError_t status, std::string_view call, const source_location& where,
                                  std::string_view context) {
  std::string message;
  if (!context.empty()) {
    message += context;
    message += ": ";
  }
  message += call.empty() ? std::string_view("CUDA call") : call;
  message += " failed with ";
  message += error_name(status);
  message += " (";
  message += error_string(status);
  message += ") at ";
  message += site_of(where);
  if (is_sticky(status)) {
    message += "; this is a sticky error: the CUDA context is unusable and every later CUDA call in this "
               "process will fail; restart the process";
  } else if (status == cudaErrorInitializationError) {
    message += "; if this process was forked after CUDA was initialised, CUDA cannot be used in it "
               "(use spawn, not fork)";
  }
  return message;
}

}  // namespace detail

}  // namespace cuda

/// A failed CUDA runtime call: the status, its name and description, the call's text, the call site.
/// code() is Errc::context_lost for sticky errors (the context is unusable), else runtime_failure (or
/// the category errc_of() gives). native_code() is the cudaError_t.
class CudaError : public Error {
 public:
  CudaError(cudaError_t status, std::string_view call, source_location where = source_location::current(),
            std::string_view context = {})
      : Error(cuda::errc_of(status), cuda::detail::format_message(status, call, where, context), status, where),
        status_(status),
        call_(call) {}

  /// The cudaError_t the call returned.
  [[nodiscard]] cudaError_t status() const noexcept { return status_; }
  /// "cudaErrorIllegalAddress".
  [[nodiscard]] std::string_view name() const noexcept { return cuda::error_name(status_); }
  /// "an illegal memory access was encountered".
  [[nodiscard]] std::string_view description() const noexcept { return cuda::error_string(status_); }
  /// The text of the failing call, e.g. "cudaMalloc(&p, n)".
  [[nodiscard]] const std::string& call() const noexcept { return call_; }
  /// True when the CUDA context is unusable (a sticky error).
  [[nodiscard]] bool context_lost() const noexcept { return cuda::is_sticky(status_); }

 private:
  cudaError_t status_;
  std::string call_;
};

namespace cuda::detail {

/// Clears the runtime's last error (non-sticky ones) and throws the exception `status` maps to.
[[noreturn, gnu::cold, gnu::noinline]] inline void throw_error(cudaError_t status, std::string_view call,
                                                              source_location where,
                                                              std::string_view context = {}) {
  (void)cudaGetLastError();
  if (status == cudaErrorMemoryAllocation) {
    throw OutOfMemoryError(format_message(status, call, where, context), 0, status, where);
  }
  if (is_unavailable(status)) {
    throw BackendUnavailableError(format_message(status, call, where, context), status, where);
  }
  throw CudaError(status, call, where, context);
}

/// Throws (see throw_error) unless status is cudaSuccess.
inline void check(cudaError_t status, std::string_view call,
                  source_location where = source_location::current()) {
  if (status != cudaSuccess) [[unlikely]] throw_error(status, call, where);
}

/// For destructors and other no-throw paths: true on success. A failure is cleared and reported on
/// stderr, except cudaErrorCudartUnloading (the runtime is being torn down at exit: nothing to free).
[[gnu::cold, gnu::noinline]] inline void report_nothrow(cudaError_t status, const char* call,
                                                      source_location where) noexcept {
  (void)cudaGetLastError();
  if (status == cudaErrorCudartUnloading) return;
  try {
    const std::string message = format_message(status, call, where, {});
    std::fprintf(stderr, "accel: warning: %s (ignored: no-throw path)\n", message.c_str());
  } catch (...) {
    std::fprintf(stderr, "accel: warning: %s failed (ignored: no-throw path)\n", call);
  }
}

inline bool check_nothrow(cudaError_t status, const char* call,
                          source_location where = source_location::current()) noexcept {
  if (status == cudaSuccess) [[likely]] return true;
  report_nothrow(status, call, where);
  return false;
}

}  // namespace cuda::detail

}  // namespace accel

/// Evaluates a CUDA runtime call and throws the matching accel exception if it fails
/// (see accel/cuda/error.hpp). The message is built only on failure.
#define ACCEL_CUDA_CHECK(...)                                                                         \
  do {                                                                                                \
    const ::cudaError_t accel_cuda_status_ = (__VA_ARGS__);                                           \
    if (accel_cuda_status_ != ::cudaSuccess) [[unlikely]] {                                           \
      ::accel::cuda::detail::throw_error(accel_cuda_status_, #__VA_ARGS__, ::accel::source_location::current()); \
    }                                                                                                 \
  } while (false)

/// The same for no-throw paths (destructors): yields true on success; a failure is cleared and
/// reported on stderr, cudaErrorCudartUnloading silently.
#define ACCEL_CUDA_CHECK_NOTHROW(...) \
  (::accel::cuda::detail::check_nothrow((__VA_ARGS__), #__VA_ARGS__, ::accel::source_location::current()))
