// accel/cuda/detail/module_api.hpp — the driver's module and launch entry points, and the launch helpers
// every CUDA op shares (cuda/detail/random_fill.hpp, cuda/ops.hpp).
//
// Kernels accel compiles with NVRTC are cubins loaded with cuModuleLoadData and launched with
// cuLaunchKernel: host code over the driver API, so no nvcc-compiled code is needed. The driver is
// opened at run time (cuda/detail/driver.hpp says why it is never linked).
#pragma once

#include <accel/core/error.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/detail/driver.hpp>
#include <accel/cuda/error.hpp>
#include <accel/cuda/stream.hpp>
#include <accel/detail/dynamic_library.hpp>
#include <accel/ops/op_builder.hpp>

#include <cuda.h>

#include <cstdint>
#include <string>

namespace accel::cuda::detail {

/// The driver entry points for modules and launches (dlopen'ed; null members when unavailable).
struct ModuleApi {
  bool loaded = false;
  std::string error;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            CUstream, void**, void**) = nullptr;
  CUresult (*memset_d32_async)(CUdeviceptr, unsigned, std::size_t, CUstream) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
  CUresult (*occupancy_max_active_blocks)(int*, CUfunction, int, std::size_t) = nullptr;  // optional
  // cuModuleUnload and cuGetErrorString are optional too: a module is then never unloaded, an error
  // shows as its number.

  [[nodiscard]] std::string describe(CUresult r) const {
    const char* s = nullptr;
    if (get_error_string != nullptr) (void)get_error_string(r, &s);
    return s != nullptr ? std::string(s) : "CUresult " + std::to_string(static_cast<int>(r));
  }
};

inline const ModuleApi& module_api() {
  static const ModuleApi* const api = [] {
    auto* a = new ModuleApi;
    const accel::detail::DynamicLibrary& library = driver_library();  // opened once, with detection's
    if (!library) {
      a->error = "libcuda.so.1 cannot be loaded: " + library.error();
      return a;
    }
    accel::detail::SymbolTable table(library);
    table.require(a->module_load_data, "cuModuleLoadData")
        .optional(a->module_unload, "cuModuleUnload")
        .require(a->module_get_function, "cuModuleGetFunction")
        .require(a->launch_kernel, "cuLaunchKernel")
        .require(a->memset_d32_async, "cuMemsetD32Async")
        .optional(a->get_error_string, "cuGetErrorString")
        .optional(a->occupancy_max_active_blocks, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (!table.complete()) {
      a->error = table.error();
      return a;
    }
    a->loaded = true;
    return a;
  }();
  return *api;
}

inline void check_cu(CUresult r, const std::string& what) {
  if (r != CUDA_SUCCESS) {
    const Errc code = r == CUDA_ERROR_OUT_OF_MEMORY ? Errc::out_of_memory : Errc::runtime_failure;
    throw Error(code, what + ": " + module_api().describe(r), static_cast<std::int64_t>(r));
  }
}

/// Whether cuModuleLoadData's failure says the image itself is unusable (rather than the device or
/// context: out of memory, a lost context), so that a cached one should be evicted and rebuilt.
inline bool is_image_error(CUresult r) noexcept {
  switch (r) {
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_INVALID_SOURCE:
    case CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND:
    case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED:
      return true;
    default:
      return false;
  }
}

inline int sm_count(int device) {
  int n = 0;
  ACCEL_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  return n;
}

/// Where a cuda op runs: its module's device, its functions.
struct LoadedKernels {
  ops::LoadedOp op;
  int device = 0;
  int sms = 1;
};

/// How many blocks of `block` threads of f the device runs at once (one wave of a grid-stride kernel);
/// `per_sm_if_unknown` per multiprocessor when the driver cannot say.
inline unsigned resident_blocks(CUfunction f, unsigned block, int sms, int per_sm_if_unknown) {
  int per_sm = 0;
  const ModuleApi& api = module_api();
  if (api.occupancy_max_active_blocks == nullptr ||
      api.occupancy_max_active_blocks(&per_sm, f, static_cast<int>(block), 0) != CUDA_SUCCESS || per_sm < 1) {
    per_sm = per_sm_if_unknown;
  }
  return static_cast<unsigned>(sms) * static_cast<unsigned>(per_sm);
}

inline void launch(CUfunction f, unsigned grid, unsigned block, StreamRef s, void** params, const char* what) {
  check_cu(module_api().launch_kernel(f, grid, 1, 1, block, 1, 1, 0, reinterpret_cast<CUstream>(s.get()), params,
                                      nullptr),
           std::string("cuLaunchKernel(") + what + ")");
}

inline void check_stream_device(const LoadedKernels& k, StreamRef s, const char* op) {
  if (s.device_index() != k.device) {
    throw InvalidArgumentError(std::string(op) + ": the op was loaded on cuda:" + std::to_string(k.device) +
                               ", the stream is on cuda:" + std::to_string(s.device_index()));
  }
}

}  // namespace accel::cuda::detail
