// accel/blas/detail/cublas_api.hpp — the cuBLAS entry points accel calls, loaded with dlopen on first use.
//
// Linking libcublas would make every program built with accel::blas fail to start where CUDA is absent;
// like the driver and NVRTC, cuBLAS is opened when the first CUDA GEMM needs it (the library of the
// toolkit accel was built with first: libcublas.so.<major>; ACCEL_CUBLAS_LIBRARY overrides). Only the
// types come from <cublas_v2.h>. Compiled only where accel has CUDA.
#pragma once

#if defined(ACCEL_HAS_CUDA)

#include <accel/detail/dynamic_library.hpp>

#include <cublas_v2.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace accel::blas::detail {

/// The cuBLAS functions accel uses (the C ABI, not the C++ overloads <cublas_v2.h> adds).
struct CublasApi {
  accel::detail::DynamicLibrary library;
  std::string error;  ///< why cuBLAS cannot be used; empty when it can

  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*set_workspace)(cublasHandle_t, void*, std::size_t) = nullptr;
  cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t) = nullptr;
  cublasStatus_t (*get_version)(cublasHandle_t, int*) = nullptr;
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                            const void*, const void*, cudaDataType, int, long long, const void*,
                                            cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                            long long, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  const char* (*status_string)(cublasStatus_t) = nullptr;  // optional (cuBLAS 11.4+)

  [[nodiscard]] bool loaded() const noexcept { return error.empty(); }

  /// "CUBLAS_STATUS_INVALID_VALUE: an unsupported value or parameter was passed to the function".
  [[nodiscard]] std::string describe(cublasStatus_t status) const {
    std::string out = status_name(status);
    if (const char* s = status_string != nullptr ? status_string(status) : nullptr) out += std::string(": ") + s;
    return out;
  }

  [[nodiscard]] static std::string status_name(cublasStatus_t status) {
    switch (status) {
      case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
      case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
      case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
      case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
      case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
      case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
      case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
      case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
      case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
      case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
      default: return "cublasStatus_t " + std::to_string(static_cast<int>(status));
    }
  }
};

/// The names a toolkit library is tried under (accel::detail::toolkit_library_candidates), its soname
/// that of the toolkit's major: `stem`.so.<major>.
[[nodiscard]] inline std::vector<std::string> toolkit_library_candidates(const char* override_var, const std::string& stem) {
  return accel::detail::toolkit_library_candidates(override_var, stem, stem + ".so." + std::to_string(CUBLAS_VER_MAJOR));
}

/// ACCEL_CUBLAS_LIBRARY, libcublas.so.<major>, libcublas.so, then the toolkit's folders.
[[nodiscard]] inline std::vector<std::string> cublas_candidates() {
  return toolkit_library_candidates("ACCEL_CUBLAS_LIBRARY", "libcublas");
}

inline CublasApi* load_cublas() {
  auto* api = new CublasApi;
  try {
    const std::vector<std::string> names = cublas_candidates();
    api->library = accel::detail::DynamicLibrary::try_open(names.begin(), names.end());
    if (!api->library) {
      api->error = "cuBLAS cannot be loaded (install the CUDA toolkit's cuBLAS, or set ACCEL_CUBLAS_LIBRARY): " +
                   api->library.error();
      return api;
    }
    accel::detail::SymbolTable table(api->library);
    table.require(api->create, "cublasCreate_v2")
        .require(api->destroy, "cublasDestroy_v2")
        .require(api->set_stream, "cublasSetStream_v2")
        .require(api->set_workspace, "cublasSetWorkspace_v2")
        .require(api->set_math_mode, "cublasSetMathMode")
        .require(api->get_version, "cublasGetVersion_v2")
        .require(api->gemm_ex, "cublasGemmEx")
        .require(api->gemm_strided_batched_ex, "cublasGemmStridedBatchedEx")
        .optional(api->status_string, "cublasGetStatusString");
    if (!table.complete()) api->error = table.error() + " (cuBLAS 11 or newer is required)";
  } catch (...) {
    api->error = "cuBLAS cannot be loaded (out of memory)";
  }
  return api;
}

/// The process's cuBLAS table: loaded on first use (thread-safe), never unloaded (handles may be used
/// until the process ends).
inline const CublasApi& cublas() {
  static const CublasApi* const api = load_cublas();
  return *api;
}

}  // namespace accel::blas::detail

#endif  // ACCEL_HAS_CUDA
