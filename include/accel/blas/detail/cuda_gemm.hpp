// accel/blas/detail/cuda_gemm.hpp — GEMM on CudaBackend: cuBLAS (cublasGemmEx /
// cublasGemmStridedBatchedEx) on the stream's own handle, from any translation unit (no nvcc needed).
//
// Row-major through the operand swap: a row-major m x n C is a column-major n x m C^T, and
// C^T = op(B)^T op(A)^T, so cuBLAS is asked for (op_b, op_a, n, m, k, B, A). float runs in float
// (CUBLAS_COMPUTE_32F, no TF32), bfloat16 and half accumulate in float. cuBLAS takes 32-bit sizes:
// larger ones are an InvalidArgumentError at the call. A GEMM with a GELU epilogue runs on cuBLASLt
// instead (cuda_epilogue.hpp). Compiled only where accel has CUDA.
#pragma once

#if defined(ACCEL_HAS_CUDA)

#include <accel/blas/detail/arguments.hpp>
#include <accel/blas/detail/cublas_handles.hpp>
#include <accel/blas/detail/cuda_epilogue.hpp>
#include <accel/blas/detail/gemm_impl.hpp>
#include <accel/cuda/backend.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace accel::blas::detail {

template <class T>
[[nodiscard]] constexpr cudaDataType cuda_type() noexcept {
  if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
  else if constexpr (std::is_same_v<T, bfloat16>) return CUDA_R_16BF;
  else return CUDA_R_16F;
}

[[nodiscard]] constexpr cublasOperation_t cublas_op(Trans t) noexcept { return t == Trans::yes ? CUBLAS_OP_T : CUBLAS_OP_N; }

inline int checked_int(const Call& call, const char* name, std::int64_t v) {
  if (v > std::numeric_limits<int>::max()) {
    invalid(call, std::string(name) + " = " + std::to_string(v) + " exceeds cuBLAS's 32-bit limit (2^31 - 1)");
  }
  return static_cast<int>(v);
}

template <>
struct GemmImpl<CudaBackend> {
  template <class T>
  static constexpr bool supports = is_gemm_type<T>;

  template <class T>
  static void run(const Call& call, cuda::StreamRef stream, const GemmArgs<T>& g) {
    const int m = checked_int(call, "m", g.m), n = checked_int(call, "n", g.n), k = checked_int(call, "k", g.k);
    const int lda = checked_int(call, "lda", g.lda), ldb = checked_int(call, "ldb", g.ldb);
    const int ldc = checked_int(call, "ldc", g.ldc), batch = checked_int(call, "batch_count", g.batch);
    if (g.empty()) return;
    const cuda::Devices::DeviceGuard device(stream.device_index());
    const CublasHandle& h = cublas_handles().get(stream);
    constexpr cudaDataType type = cuda_type<T>();
    if (g.epilogue != Epilogue::none) {
      run_lt_epilogue(call, stream, g, h, type);
      return;
    }
    const CublasApi& api = cublas();
    cublasStatus_t status;
    const std::lock_guard<std::mutex> lock(h.mutex);
    if (g.batch == 1) {
      status = api.gemm_ex(h.handle, cublas_op(g.tb), cublas_op(g.ta), n, m, k, &g.alpha, g.b, type, ldb, g.a, type,
                           lda, &g.beta, g.c, type, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    } else {
      status = api.gemm_strided_batched_ex(h.handle, cublas_op(g.tb), cublas_op(g.ta), n, m, k, &g.alpha, g.b, type, ldb,
                                           g.stride_b, g.a, type, lda, g.stride_a, &g.beta, g.c, type, ldc, g.stride_c,
                                           batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    if (status != CUBLAS_STATUS_SUCCESS) [[unlikely]] {
      throw_cublas(call.str() + ": " + (g.batch == 1 ? "cublasGemmEx" : "cublasGemmStridedBatchedEx"), status);
    }
  }
};

}  // namespace accel::blas::detail

#endif  // ACCEL_HAS_CUDA
