// accel/random/distributions.hpp — cuRAND's transforms from 32-bit Philox words to uniform and
// normal values (curand_uniform.h, curand_normal.h), for host and device code.
//
// Same formulas, same constants and the same order of rounding as cuRAND, so the host path gives
// the bits of cuRAND's host generator. Uniforms are exact integer-to-float arithmetic and identical
// on every target. Box–Muller calls log/sqrt/sin/cos: on the host the C library's (as cuRAND's host
// generator does), on the device the CUDA intrinsics cuRAND's device code uses (__sincosf,
// sincospi). Normals therefore match cuRAND on each side, and host and device differ in the last
// bits exactly as cuRAND's own host and device generators do. Builds with -ffast-math or a vector
// math library change the host normals too.
#pragma once

#include <accel/random/philox.hpp>

#if !defined(__CUDACC_RTC__)
#include <cmath>
#endif

// Host: keep a product from being fused into the add that follows it (see detail::mul_rn). Not
// under nvcc: its front end does not know the builtin (and nvcc's host pass does not form FMAs
// unless asked to with an -march that has them).
#if defined(__has_builtin) && !defined(__CUDACC__)
#if __has_builtin(__builtin_assoc_barrier)
#define ACCEL_DETAIL_ASSOC_BARRIER(x) __builtin_assoc_barrier(x)
#endif
#endif
#ifndef ACCEL_DETAIL_ASSOC_BARRIER
#define ACCEL_DETAIL_ASSOC_BARRIER(x) (x)
#endif

namespace accel::rng {

/// Two floats: one Box–Muller pair (x from sin, y from cos).
struct Float2 {
  float x, y;
};

/// Two doubles: one Box–Muller pair (x from sin, y from cos).
struct Double2 {
  double x, y;
};

namespace detail {

// cuRAND's constants (curand_globals.h), spelled as cuRAND spells them so they round alike.
inline constexpr float two_pow32_inv = 2.3283064e-10f;               // 2^-32 exactly
inline constexpr float two_pow32_inv_2pi = 2.3283064e-10f * 6.2831855f;  // 2^-32 * 2pi, in float
inline constexpr double two_pow53_inv = 1.1102230246251565e-16;      // 2^-53 exactly
inline constexpr double pi_double = 3.1415926535897932;

// a*b rounded on its own. cuRAND's host code multiplies, then adds; a fused multiply-add (which
// g++ forms under -march with FMA) changes the last bit, and through sin/cos near their zeros many
// more. Products by powers of two are exact and need no barrier.
[[nodiscard]] ACCEL_HOST_DEVICE inline float mul_rn(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return ACCEL_DETAIL_ASSOC_BARRIER(a * b);
#endif
}
[[nodiscard]] ACCEL_HOST_DEVICE inline double mul_rn(double a, double b) noexcept {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return ACCEL_DETAIL_ASSOC_BARRIER(a * b);
#endif
}

}  // namespace detail

/// A float in (0, 1] from one word (_curand_uniform): x * 2^-32 + 2^-33. Never 0; 1 for x near 2^32.
[[nodiscard]] ACCEL_HOST_DEVICE constexpr float uniform_float(u32 x) noexcept {
  return static_cast<float>(x) * detail::two_pow32_inv + detail::two_pow32_inv / 2.0f;
}

/// A double in (0, 1] from two words with 53 random bits (_curand_uniform_double_hq):
/// z = x ^ (y << 21), z * 2^-53 + 2^-54.
[[nodiscard]] ACCEL_HOST_DEVICE constexpr double uniform_double(u32 x, u32 y) noexcept {
  const u64 z = static_cast<u64>(x) ^ (static_cast<u64>(y) << (53 - 32));
  return static_cast<double>(z) * detail::two_pow53_inv + detail::two_pow53_inv / 2.0;
}

/// Two standard normal floats from two words (_curand_box_muller): radius from x, angle from y.
[[nodiscard]] ACCEL_HOST_DEVICE inline Float2 box_muller(u32 x, u32 y) noexcept {
  const float u = uniform_float(x);
  const float v = detail::mul_rn(static_cast<float>(y), detail::two_pow32_inv_2pi) + detail::two_pow32_inv_2pi / 2;
  Float2 r{};
#if defined(__CUDA_ARCH__)
  const float s = sqrtf(-2.0f * logf(u));
  __sincosf(v, &r.x, &r.y);
#else
  const float s = std::sqrt(-2.0f * std::log(u));
  r.x = std::sin(v);
  r.y = std::cos(v);
#endif
  r.x *= s;
  r.y *= s;
  return r;
}

/// Two standard normal doubles from four words (_curand_box_muller_double): radius from (x0, x1),
/// angle from (y0, y1), 53 bits each.
[[nodiscard]] ACCEL_HOST_DEVICE inline Double2 box_muller_double(u32 x0, u32 x1, u32 y0, u32 y1) noexcept {
  const double u = uniform_double(x0, x1);
  const u64 zy = static_cast<u64>(y0) ^ (static_cast<u64>(y1) << (53 - 32));
  const double v = static_cast<double>(zy) * (detail::two_pow53_inv * 2.0) + detail::two_pow53_inv;
  Double2 r{};
#if defined(__CUDA_ARCH__)
  const double s = sqrt(-2.0 * log(u));
  sincospi(v, &r.x, &r.y);
#else
  const double s = std::sqrt(-2.0 * std::log(u));
  r.x = std::sin(v * detail::pi_double);
  r.y = std::cos(v * detail::pi_double);
#endif
  r.x *= s;
  r.y *= s;
  return r;
}

/// mean + stddev * z, rounded as cuRAND's generator rounds it: the product, then the sum.
[[nodiscard]] ACCEL_HOST_DEVICE inline float scale_normal(float z, float mean, float stddev) noexcept {
  return detail::mul_rn(z, stddev) + mean;
}
[[nodiscard]] ACCEL_HOST_DEVICE inline double scale_normal(double z, double mean, double stddev) noexcept {
  return detail::mul_rn(z, stddev) + mean;
}

}  // namespace accel::rng
