// accel/random/distributions.hpp — cuRAND's transforms from 32-bit Philox words to uniform and
// normal values (curand_uniform.h, curand_normal.h), for host and device code.
//
// Same formulas, same constants and the same order of rounding as cuRAND. Uniforms are exact
// integer-to-float arithmetic: identical on every target and to cuRAND's generators. Box–Muller
// needs log, sqrt, sin and cos: cuRAND calls the C library on the host and CUDA's intrinsics on the
// device (__sincosf, sincospi), so its host and device normals differ — by thousands of ulps near
// the zeros of sin and cos. accel computes them with detail/portable_math.hpp, whose log/sin/cos use
// only separately rounded IEEE operations (sqrt is IEEE too): the same bits on the CPU, under nvcc
// and under NVRTC, within 2 ulp of cuRAND's host generator. Builds with -ffast-math (or nvcc's
// --use_fast_math) give up that guarantee.
#pragma once

#include <accel/random/detail/portable_math.hpp>
#include <accel/random/philox.hpp>

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

}  // namespace detail

/// A float in (0, 1] from one word (_curand_uniform): x * 2^-32 + 2^-33. Never 0; 1 for x near 2^32.
[[nodiscard]] ACCEL_HOST_DEVICE constexpr float uniform_float(u32 x) noexcept {
#if defined(__CUDA_ARCH__)
  // x * 2^-32 is exact, so one fused multiply-add rounds as the multiply then add below does: the same
  // bits in one instruction instead of two (the kernels build with --fmad=false, and a uniform fill
  // on an H100 is bound by instruction issue as much as by memory).
  return __fmaf_rn(static_cast<float>(x), detail::two_pow32_inv, detail::two_pow32_inv / 2.0f);
#else
  return static_cast<float>(x) * detail::two_pow32_inv + detail::two_pow32_inv / 2.0f;
#endif
}

/// A double in (0, 1] from two words with 53 random bits (_curand_uniform_double_hq):
/// z = x ^ (y << 21), z * 2^-53 + 2^-54.
[[nodiscard]] ACCEL_HOST_DEVICE constexpr double uniform_double(u32 x, u32 y) noexcept {
  const u64 z = static_cast<u64>(x) ^ (static_cast<u64>(y) << (53 - 32));
#if defined(__CUDA_ARCH__)
  return __fma_rn(static_cast<double>(z), detail::two_pow53_inv, detail::two_pow53_inv / 2.0);  // exact product
#else
  return static_cast<double>(z) * detail::two_pow53_inv + detail::two_pow53_inv / 2.0;
#endif
}

/// Two standard normal floats from two words (_curand_box_muller): radius from x, angle from y.
[[nodiscard]] ACCEL_HOST_DEVICE inline Float2 box_muller(u32 x, u32 y) noexcept {
  const float u = uniform_float(x);
  const float v = detail::mul_rn(static_cast<float>(y), detail::two_pow32_inv_2pi) + detail::two_pow32_inv_2pi / 2;
  // In double, rounded once to float: closer to the exact value than cuRAND's float steps (whose
  // logf/sinf/sqrtf/product each round).
  Float2 r{};
  detail::portable_box_muller_float(u, v, &r.x, &r.y);
  return r;
}

/// Two standard normal doubles from four words (_curand_box_muller_double): radius from (x0, x1),
/// angle from (y0, y1), 53 bits each.
[[nodiscard]] ACCEL_HOST_DEVICE inline Double2 box_muller_double(u32 x0, u32 x1, u32 y0, u32 y1) noexcept {
  const double u = uniform_double(x0, x1);
  const u64 zy = static_cast<u64>(y0) ^ (static_cast<u64>(y1) << (53 - 32));
  const double v = static_cast<double>(zy) * (detail::two_pow53_inv * 2.0) + detail::two_pow53_inv;
  Double2 r{};
  detail::portable_box_muller(u, detail::mul_rn(v, detail::pi_double), &r.x, &r.y);
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
