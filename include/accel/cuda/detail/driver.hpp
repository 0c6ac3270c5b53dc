// accel/cuda/detail/driver.hpp — the CUDA driver (libcuda) and NVML, loaded at run time, never linked.
//
// Linking libcuda would make every program that includes accel fail to start on a machine without
// an NVIDIA driver ("libcuda.so.1: cannot open shared object file") — the machine on which the CPU
// backend is most needed. The runtime (cudart) loads the driver the same way. The few driver and
// NVML entry points the backend needs to *detect* devices without creating a context are looked up
// here once; the handles are never closed (they must outlive static destruction). libcuda is opened
// once, by driver_library(), which the module and launch calls (cuda/detail/module_api.hpp) share.
#pragma once

#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/detail/dynamic_library.hpp>

#include <cuda.h>

#include <string>

namespace accel::cuda::detail {

/// The driver entry points accel calls directly. Members are null when libcuda could not be loaded.
struct DriverApi {
  bool loaded = false;
  std::string error;  ///< why libcuda.so.1 could not be loaded
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driver_get_version = nullptr;
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDevicePrimaryCtxGetState) primary_ctx_get_state = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;

  /// "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected".
  [[nodiscard]] std::string describe(CUresult status) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (get_error_name != nullptr) (void)get_error_name(status, &name);
    if (get_error_string != nullptr) (void)get_error_string(status, &text);
    std::string out = name != nullptr ? name : "CUresult " + std::to_string(static_cast<int>(status));
    if (text != nullptr) out += std::string(": ") + text;
    return out;
  }
};

/// libcuda.so.1, opened on first use (thread-safe) and never closed; empty, with error(), when the
/// machine has no driver.
inline const accel::detail::DynamicLibrary& driver_library() {
  static const auto* const library = new accel::detail::DynamicLibrary(accel::detail::DynamicLibrary::try_open({"libcuda.so.1"}));
  return *library;
}

inline DriverApi load_driver() {
  DriverApi api;
  const accel::detail::DynamicLibrary& library = driver_library();
  if (!library) {
    api.error = "libcuda.so.1 cannot be loaded: " + library.error();
    return api;
  }
  accel::detail::SymbolTable table(library);
  table.require(api.init, "cuInit")
      .require(api.driver_get_version, "cuDriverGetVersion")
      .require(api.device_get_count, "cuDeviceGetCount")
      .optional(api.device_get, "cuDeviceGet")
      .optional(api.primary_ctx_get_state, "cuDevicePrimaryCtxGetState")
      .optional(api.get_error_name, "cuGetErrorName")
      .optional(api.get_error_string, "cuGetErrorString");
  if (!table.complete()) {
    api.error = table.error() + " (a stub or broken driver)";
    return api;
  }
  api.loaded = true;
  return api;
}

/// The process's driver API, loaded on first use (thread-safe), never unloaded.
inline const DriverApi& driver() {
  static const DriverApi* const api = new DriverApi(load_driver());
  return *api;
}

// ---- NVML: device enumeration that neither initialises CUDA nor makes fork unsafe -------------------

using NvmlReturn = int;  // nvmlReturn_t; NVML_SUCCESS == 0
struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;
inline constexpr NvmlReturn nvml_success = 0;
inline constexpr unsigned nvml_mig_enabled = 1;      // NVML_DEVICE_MIG_ENABLE
inline constexpr unsigned nvml_uuid_buffer_size = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

struct NvmlApi {
  bool loaded = false;
  std::string error;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*device_get_count)(unsigned*) = nullptr;
  NvmlReturn (*device_get_handle_by_index)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*device_get_uuid)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*device_get_mig_mode)(NvmlDevice, unsigned*, unsigned*) = nullptr;
};

inline NvmlApi load_nvml() {
  NvmlApi api;
  // Never closed, like the driver: NVML stays initialised for the life of the process.
  static const auto* const library = new accel::detail::DynamicLibrary(accel::detail::DynamicLibrary::try_open({"libnvidia-ml.so.1"}));
  if (!*library) {
    api.error = "libnvidia-ml.so.1 cannot be loaded: " + library->error();
    return api;
  }
  accel::detail::SymbolTable table(*library);
  table.require(api.init, "nvmlInit_v2")
      .require(api.device_get_count, "nvmlDeviceGetCount_v2")
      .require(api.device_get_handle_by_index, "nvmlDeviceGetHandleByIndex_v2")
      .require(api.device_get_uuid, "nvmlDeviceGetUUID")
      .optional(api.device_get_mig_mode, "nvmlDeviceGetMigMode");
  if (!table.complete()) {
    api.error = table.error() + " (accel needs these NVML entry points)";
    return api;
  }
  if (const NvmlReturn status = api.init(); status != nvml_success) {
    api.error = "nvmlInit_v2 failed with NVML error " + std::to_string(status);
    return api;
  }
  api.loaded = true;  // NVML stays initialised for the life of the process (never nvmlShutdown)
  return api;
}

inline const NvmlApi& nvml() {
  static const NvmlApi* const api = new NvmlApi(load_nvml());
  return *api;
}

}  // namespace accel::cuda::detail
