// cpu_common.h — helpers shared by accel's CPU kernels (compiled by the op builders' host toolchain:
// -O3 -march=native -fopenmp -shared -fPIC -std=c++17 -fno-math-errno -ffp-contract=off).
//
// Determinism: every kernel splits its elements statically (thread t of T gets a contiguous range
// whose bounds depend only on the element count and T, aligned to 64 elements) and computes each
// element with the same explicit operations (fmaf where a fused multiply-add is meant; contraction is
// off), so a result's bits do not depend on the thread count or on which path — vector body or scalar
// tail — an element falls in. Reductions use fixed-size chunks combined in a fixed order.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include <omp.h>

#include "accel_ops_abi.h"
#include "cpu_convert.h"  // bfloat16 / float16 <-> float, ld<D> / st<D>

#define ACCEL_EXPORT extern "C" __attribute__((visibility("default")))

namespace accel_kernels {

// 2: AVX-512 (F, BW, VL); 1: AVX2 + FMA; 0: scalar — what -march=native gave this build.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
constexpr int isa = 2;
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int isa = 1;
#else
constexpr int isa = 0;
#endif

inline float load_as_float(const void* base, int dtype, long long i) {
  switch (dtype) {
    case ACCEL_DTYPE_F16: return half_to_float(static_cast<const std::uint16_t*>(base)[i]);
    case ACCEL_DTYPE_BF16: return bf16_to_float(static_cast<const std::uint16_t*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

// n floats from `src` (dtype) into dst.
inline void to_float(float* __restrict dst, const void* src, int dtype, long long n) {
  if (dtype == ACCEL_DTYPE_F32) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * 4);
  } else if (dtype == ACCEL_DTYPE_BF16) {
    const auto* s = static_cast<const std::uint16_t*>(src);
    for (long long i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
  } else {
    const auto* s = static_cast<const std::uint16_t*>(src);
    for (long long i = 0; i < n; ++i) dst[i] = half_to_float(s[i]);
  }
}

// n floats from src into `dst` (dtype), rounded to nearest even.
inline void from_float(void* dst, int dtype, const float* __restrict src, long long n) {
  if (dtype == ACCEL_DTYPE_F32) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * 4);
  } else if (dtype == ACCEL_DTYPE_BF16) {
    auto* d = static_cast<std::uint16_t*>(dst);
    for (long long i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
  } else {
    auto* d = static_cast<std::uint16_t*>(dst);
    for (long long i = 0; i < n; ++i) d[i] = float_to_half(src[i]);
  }
}

inline long long dtype_size(int dtype) { return dtype == ACCEL_DTYPE_F32 ? 4 : 2; }

// Thread t's share [begin, end) of n elements split T ways, bounds aligned to 64 elements.
inline void static_range(long long n, int t, int T, long long* begin, long long* end) {
  const long long blocks = (n + 63) / 64;
  const long long b0 = blocks * t / T;
  const long long b1 = blocks * (t + 1) / T;
  *begin = b0 * 64 < n ? b0 * 64 : n;
  *end = b1 * 64 < n ? b1 * 64 : n;
}

inline int thread_count(int requested) { return requested > 0 ? requested : omp_get_max_threads(); }

}  // namespace accel_kernels

ACCEL_EXPORT int accel_ops_abi_version(void) { return ACCEL_OPS_ABI_VERSION; }
ACCEL_EXPORT int accel_ops_isa(void) { return accel_kernels::isa; }
