// accel/blas/detail/cublaslt_api.hpp — the cuBLASLt entry points accel calls (GEMMs with a fused
// epilogue: blas/gemm_gelu.hpp), loaded with dlopen on first use, as cuBLAS is (cublas_api.hpp):
// libcublasLt.so.<major> of the toolkit accel was built with first; ACCEL_CUBLASLT_LIBRARY overrides.
// Only the types come from <cublasLt.h>. Compiled only where accel has CUDA.
#pragma once

#if defined(ACCEL_HAS_CUDA)

#include <accel/blas/detail/cublas_api.hpp>
#include <accel/detail/dynamic_library.hpp>

#include <cublasLt.h>

#include <cstdint>
#include <string>
#include <vector>

namespace accel::blas::detail {

struct CublasLtApi {
  accel::detail::DynamicLibrary library;
  std::string error;  ///< why cuBLASLt cannot be used; empty when it can

  cublasStatus_t (*create)(cublasLtHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasLtHandle_t) = nullptr;
  cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t*, cublasComputeType_t, cudaDataType_t) = nullptr;
  cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t) = nullptr;
  cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void*, std::size_t) = nullptr;
  cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t*, cudaDataType, std::uint64_t, std::uint64_t,
                                  std::int64_t) = nullptr;
  cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t) = nullptr;
  cublasStatus_t (*preference_create)(cublasLtMatmulPreference_t*) = nullptr;
  cublasStatus_t (*preference_destroy)(cublasLtMatmulPreference_t) = nullptr;
  cublasStatus_t (*preference_set)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t, const void*,
                                   std::size_t) = nullptr;
  cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                              cublasLtMatmulHeuristicResult_t*, int*) = nullptr;
  cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t,
                           const void*, cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t, void*,
                           cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, std::size_t,
                           cudaStream_t) = nullptr;
  const char* (*status_string)(cublasStatus_t) = nullptr;  // optional

  [[nodiscard]] bool loaded() const noexcept { return error.empty(); }

  [[nodiscard]] std::string describe(cublasStatus_t status) const {
    std::string out = CublasApi::status_name(status);
    if (const char* s = status_string != nullptr ? status_string(status) : nullptr) out += std::string(": ") + s;
    return out;
  }
};

inline CublasLtApi* load_cublaslt() {
  auto* api = new CublasLtApi;
  try {
    const std::vector<std::string> names = toolkit_library_candidates("ACCEL_CUBLASLT_LIBRARY", "libcublasLt");
    api->library = accel::detail::DynamicLibrary::try_open(names.begin(), names.end());
    if (!api->library) {
      api->error = "cuBLASLt cannot be loaded (install the CUDA toolkit's cuBLAS, or set ACCEL_CUBLASLT_LIBRARY): " +
                   api->library.error();
      return api;
    }
    accel::detail::SymbolTable table(api->library);
    table.require(api->create, "cublasLtCreate")
        .require(api->destroy, "cublasLtDestroy")
        .require(api->desc_create, "cublasLtMatmulDescCreate")
        .require(api->desc_destroy, "cublasLtMatmulDescDestroy")
        .require(api->desc_set, "cublasLtMatmulDescSetAttribute")
        .require(api->layout_create, "cublasLtMatrixLayoutCreate")
        .require(api->layout_destroy, "cublasLtMatrixLayoutDestroy")
        .require(api->preference_create, "cublasLtMatmulPreferenceCreate")
        .require(api->preference_destroy, "cublasLtMatmulPreferenceDestroy")
        .require(api->preference_set, "cublasLtMatmulPreferenceSetAttribute")
        .require(api->heuristic, "cublasLtMatmulAlgoGetHeuristic")
        .require(api->matmul, "cublasLtMatmul")
        .optional(api->status_string, "cublasLtGetStatusString");
    if (!table.complete()) api->error = table.error() + " (cuBLASLt 11.4 or newer is required)";
  } catch (...) {
    api->error = "cuBLASLt cannot be loaded (out of memory)";
  }
  return api;
}

/// The process's cuBLASLt table: loaded on first use (thread-safe), never unloaded.
inline const CublasLtApi& cublaslt() {
  static const CublasLtApi* const api = load_cublaslt();
  return *api;
}

}  // namespace accel::blas::detail

#endif  // ACCEL_HAS_CUDA
