// accel/cuda/device.hpp — the CUDA backend's devices.
//
// device_count(), is_available() and availability() never throw and never create a CUDA context;
// where NVML is present they do not even initialise the driver, so the process stays safe to fork
// (see cuda/detail/detect.hpp). Everything else that needs a device throws BackendUnavailableError,
// with the reason, when there is none.
//
// The current device is the CUDA runtime's (cudaSetDevice/cudaGetDevice), per thread, with one
// refinement taken from torch: a DeviceGuard that merely *restores* a device on which this process has
// no context yet does not call cudaSetDevice (which since CUDA 12 creates the primary context); it
// remembers the device as the thread's current one and the next accel call that needs it makes it
// current. Raw CUDA calls made between the two see the guard's device; accel calls never do. A
// cudaSetDevice made outside accel in between takes precedence over the remembered device.
// synchronize() lives with the streams (cuda/stream.hpp), since it reports their host-task failures.
#pragma once

#include <accel/backend/devices.hpp>
#include <accel/concepts/device.hpp>
#include <accel/core/device.hpp>
#include <accel/core/error.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/detail/detect.hpp>
#include <accel/cuda/detail/driver.hpp>
#include <accel/cuda/error.hpp>
#include <accel/detail/lazy_init.hpp>

#include <string>

namespace accel::cuda {

namespace detail {

// The device this thread's accel calls treat as current when it differs from the runtime's (see the
// top of this header). It holds only while the runtime's device is still the one the DeviceGuard left
// (`runtime`): a cudaSetDevice made outside accel since then wins.
struct PendingDevice {
  int device = -1;   // -1: the runtime's current device is the thread's current device
  int runtime = -1;  // the runtime's current device when `device` was set
};

inline PendingDevice& pending_device() noexcept {
  thread_local PendingDevice pending;
  return pending;
}

// The thread's current device given the runtime's; drops a pending device the runtime no longer backs.
inline int logical_device(int runtime) noexcept {
  PendingDevice& pending = pending_device();
  if (pending.device < 0) return runtime;
  if (pending.runtime == runtime) return pending.device;
  pending.device = -1;
  return runtime;
}

// lazy_call callbacks waiting for the first device initialisation of this process (torch's lazy-init
// contract: accel/detail/lazy_init.hpp).
inline accel::detail::LazyInit& lazy_init() {
  static accel::detail::LazyInit* const state = new accel::detail::LazyInit("cuda");  // leaked: usable during static destruction
  return *state;
}

// Called by everything that initialises the runtime, after it did: runs the queued callbacks (once;
// TaskError when one throws, and the next call runs the queue again from it).
inline void ensure_lazy_init() { lazy_init().ensure(); }

// Whether `device` already has an active primary context (driver API; false while the driver is not
// initialised, true when unknown, so the caller falls back to plain cudaSetDevice).
inline bool has_primary_context(int device) noexcept {
  const DriverApi& api = driver();
  if (api.device_get == nullptr || api.primary_ctx_get_state == nullptr) return true;
  CUdevice handle{};
  const CUresult got = api.device_get(&handle, device);
  // Detection through NVML leaves the driver uninitialised, and no context exists before cuInit.
  if (got == CUDA_ERROR_NOT_INITIALIZED) return false;
  if (got != CUDA_SUCCESS) return true;
  unsigned flags = 0;
  int active = 0;
  if (api.primary_ctx_get_state(handle, &flags, &active) != CUDA_SUCCESS) return true;
  return active != 0;
}

[[noreturn]] inline void throw_unavailable(source_location where = source_location::current()) {
  throw BackendUnavailableError("CUDA backend unavailable: " + detection().reason, cudaErrorNoDevice, where);
}

}  // namespace detail

/// Device enumeration and selection for accel::CudaBackend; the naming and index checks are shared
/// (backend/devices.hpp: check_device throws BackendUnavailableError when there is no device).
struct Devices : DeviceNames<Devices, DeviceType::cuda> {
  /// CUDA devices visible to this process (honours CUDA_VISIBLE_DEVICES); 0 when unavailable.
  [[nodiscard]] static int device_count() noexcept { return detail::detection().count; }

  [[nodiscard]] static Availability availability() {
    const auto& found = detail::detection();
    if (found.count > 0) return {true, {}};
    return {false, found.reason.empty() ? std::string("no CUDA device") : found.reason};
  }

  [[nodiscard]] static bool is_available() noexcept { return device_count() > 0; }

  /// Throws BackendUnavailableError (with the reason) when no CUDA device can be used.
  static void require_available() {
    if (!is_available()) [[unlikely]] detail::throw_unavailable();
  }

  /// BackendUnavailableError with the reason; check_device() throws it when there is no device.
  [[noreturn]] static void throw_unavailable() { detail::throw_unavailable(); }

  /// Makes `index` the calling thread's current device (cudaSetDevice: creates its primary context).
  static void set_device(int index) {
    check_device(index);
    ACCEL_CUDA_CHECK(cudaSetDevice(index));
    detail::pending_device().device = -1;
    detail::ensure_lazy_init();
  }

  /// The calling thread's current device.
  [[nodiscard]] static int current_device() {
    require_available();
    int runtime = 0;
    ACCEL_CUDA_CHECK(cudaGetDevice(&runtime));
    return detail::logical_device(runtime);
  }

  /// The driver's CUDA version as 1000 * major + 10 * minor (13000 for 13.0); 0 without a driver.
  /// Read without initialising CUDA.
  [[nodiscard]] static int driver_version() noexcept { return detail::detection().driver_version; }
  /// The CUDA runtime version this build uses (CUDART_VERSION).
  [[nodiscard]] static constexpr int runtime_version() noexcept { return CUDART_VERSION; }

  /// The product name of device `index`, e.g. "NVIDIA H100 80GB HBM3" (cudaGetDeviceProperties).
  [[nodiscard]] static std::string product_name(int index) {
    check_device(index);
    cudaDeviceProp properties{};
    ACCEL_CUDA_CHECK(cudaGetDeviceProperties(&properties, index));
    return properties.name;
  }

  /// Makes a device current for the calling thread; restores the previous one when destroyed, without
  /// creating a context on it if it has none (see the top of this header). Not copyable, not movable.
  class DeviceGuard {
   public:
    explicit DeviceGuard(int index) : index_(index) {
      check_device(index);
      int runtime = 0;
      ACCEL_CUDA_CHECK(cudaGetDevice(&runtime));
      previous_ = detail::logical_device(runtime);
      if (runtime != index) ACCEL_CUDA_CHECK(cudaSetDevice(index));
      detail::pending_device().device = -1;
      if (!detail::lazy_init().initialized()) [[unlikely]] {
        try {
          detail::lazy_init().ensure();
        } catch (...) {
          restore();
          throw;
        }
      }
    }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;
    ~DeviceGuard() { restore(); }

    [[nodiscard]] int previous_device() const noexcept { return previous_; }
    [[nodiscard]] int device() const noexcept { return index_; }

   private:
    void restore() noexcept {
      if (previous_ == index_) return;
      if (detail::has_primary_context(previous_)) {
        (void)ACCEL_CUDA_CHECK_NOTHROW(cudaSetDevice(previous_));
      } else {
        detail::pending_device() = {previous_, index_};
      }
    }

    int index_;
    int previous_ = 0;
  };
};

}  // namespace accel::cuda
