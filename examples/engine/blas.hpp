// blas.hpp — the engine's matrix products: accel::blas (<accel/blas.hpp>, target accel::blas) when
// this build has it; until then a stand-in with the same calls over OpenBLAS's cblas_sgemm on the
// CPU stream (float32, CPU only), so the engine builds and trains meanwhile.
#pragma once

#include <accel/accel.hpp>  // first: accel/blas's AnyBackend path names std::get of <variant>

#if __has_include(<accel/blas.hpp>)
#include <accel/blas.hpp>
#define ENGINE_ACCEL_BLAS 1
#else
#include <accel/core/device.hpp>
#include <accel/core/error.hpp>

#include <cblas.h>

#include <cstdint>
#include <string>
#include <type_traits>

extern "C" void openblas_set_num_threads(int);

namespace accel::blas {

enum class Trans { no, yes };

// OpenBLAS's OpenMP build takes its thread count from the thread that calls it: the count is kept here
// and applied in each GEMM task, on the stream's worker.
inline int& requested_threads() {
  static int n = 0;
  return n;
}
inline void set_num_threads(int n) { requested_threads() = n; }

template <class B, class T>
void gemm(B b, typename B::StreamRef s, Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const T* a, std::int64_t lda, const T* bm, std::int64_t ldb, float beta, T* c, std::int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (b.device_type() == DeviceType::cpu) {
      s.enqueue([=, threads = requested_threads()] {
        if (threads > 0) openblas_set_num_threads(threads);
        cblas_sgemm(CblasRowMajor, ta == Trans::yes ? CblasTrans : CblasNoTrans, tb == Trans::yes ? CblasTrans : CblasNoTrans,
                    static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), bm,
                    static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
      });
      return;
    }
  }
  throw BackendUnavailableError("engine: this build has no accel::blas (<accel/blas.hpp>); the stand-in runs float32 on the CPU only");
}

template <class B, class T>
void gemm_strided_batched(B b, typename B::StreamRef s, Trans ta, Trans tb, std::int64_t m, std::int64_t n,
                          std::int64_t k, float alpha, const T* a, std::int64_t lda, std::int64_t stride_a, const T* bm,
                          std::int64_t ldb, std::int64_t stride_b, float beta, T* c, std::int64_t ldc,
                          std::int64_t stride_c, std::int64_t batch_count) {
  for (std::int64_t i = 0; i < batch_count; ++i) {
    gemm(b, s, ta, tb, m, n, k, alpha, a + i * stride_a, lda, bm + i * stride_b, ldb, beta, c + i * stride_c, ldc);
  }
}

}  // namespace accel::blas
#endif
