// accel/random/detail/portable_math.hpp — log, sin and cos that give the same bits on the host and
// on the device, for Box–Muller (distributions.hpp).
//
// Why not the math library: glibc's and CUDA's log/sin/cos are each accurate to an ulp or two but
// round differently, so normals drawn on a GPU would differ from the CPU backend's in the last bits,
// and by thousands of ulps near the zeros of sin and cos (CUDA's __sincosf). These functions use
// only IEEE-754 double additions, subtractions, multiplications and one division, each rounded on
// its own — every product goes through mul_rn, so neither nvcc (--fmad) nor g++ (-ffp-contract
// with FMA) can fuse it into the add that follows — and therefore give identical results on every
// target. Accuracy: log, sin and cos within about 0.52 ulp (double-double arithmetic where it
// matters; correctly rounded but for results very near a midpoint), sin/cos on [0, 16] with the
// argument reduced against pi/2 held to 139 bits, so results stay accurate next to the zeros.
//
// Host and device code, NVRTC-compatible (no CUDA or standard header under __CUDACC_RTC__).
// The polynomials are Taylor series, truncated where the next term is below 2^-60 of the result.
#pragma once

#include <accel/random/philox.hpp>

#if !defined(__CUDACC_RTC__) && !defined(__CUDA_ARCH__)
#include <cstring>
#endif

// Host: keep a product from being fused into the add that follows it (see mul_rn). Not under nvcc:
// its front end does not know the builtin (and nvcc's host pass does not form FMAs unless asked to
// with an -march that has them).
#if defined(__has_builtin) && !defined(__CUDACC__)
#if __has_builtin(__builtin_assoc_barrier)
#define ACCEL_DETAIL_ASSOC_BARRIER(x) __builtin_assoc_barrier(x)
#endif
#endif
#ifndef ACCEL_DETAIL_ASSOC_BARRIER
#define ACCEL_DETAIL_ASSOC_BARRIER(x) (x)
#endif

namespace accel::rng::detail {

/// a*b rounded on its own: never contracted into a fused multiply-add.
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

[[nodiscard]] ACCEL_HOST_DEVICE inline u64 double_bits(double x) noexcept {
#if defined(__CUDA_ARCH__)
  return static_cast<u64>(__double_as_longlong(x));
#else
  u64 bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}
[[nodiscard]] ACCEL_HOST_DEVICE inline double double_from_bits(u64 bits) noexcept {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  double x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

// Double-double building blocks (Dekker, Knuth): exact sums and products as hi + lo, with no fused
// multiply-add, so they give the same bits everywhere.
struct DoubleDouble {
  double hi, lo;
};
[[nodiscard]] ACCEL_HOST_DEVICE inline DoubleDouble two_sum(double a, double b) noexcept {
  const double s = a + b;
  const double bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}
[[nodiscard]] ACCEL_HOST_DEVICE inline DoubleDouble fast_two_sum(double a, double b) noexcept {  // |a| >= |b|
  const double s = a + b;
  return {s, b - (s - a)};
}
[[nodiscard]] ACCEL_HOST_DEVICE inline DoubleDouble split(double a) noexcept {  // 26 + 27 bits
  const double c = mul_rn(134217729.0, a);  // 2^27 + 1
  const double hi = c - (c - a);
  return {hi, a - hi};
}
[[nodiscard]] ACCEL_HOST_DEVICE inline DoubleDouble two_prod(double a, double b) noexcept {
  const double p = mul_rn(a, b);
  const DoubleDouble x = split(a), y = split(b);
  return {p, ((mul_rn(x.hi, y.hi) - p) + mul_rn(x.hi, y.lo) + mul_rn(x.lo, y.hi)) + mul_rn(x.lo, y.lo)};
}

/// Natural logarithm of a positive, normal, finite x (Box–Muller uses (0, 1]), within about 0.52 ulp
/// (correctly rounded but for results very near a midpoint).
/// x = 2^k * m with m in [sqrt(2)/2, sqrt(2)), f = m - 1 (exact), s = f / (2 + f), and
/// log(1 + f) = 2 atanh(s) = f - f^2/2 + s * (f^2/2 + R(s^2)), R = 2s^2/3 + 2s^4/5 + ...; the two
/// leading terms and k * ln 2 are summed exactly, so only the last addition rounds noticeably.
[[nodiscard]] ACCEL_HOST_DEVICE inline DoubleDouble portable_log_dd(double x) noexcept {
  constexpr u64 mantissa_mask = (u64{1} << 52) - 1;
  constexpr u64 sqrt2_mantissa = 0x6a09e667f3bcdULL;  // mantissa bits of sqrt(2)
  constexpr double ln2_hi = 0x1.62e42fefa3800p-1;     // 42 bits: k * ln2_hi is exact for |k| < 2048
  constexpr double ln2_lo = 0x1.ef35793c76730p-45;
  const u64 bits = double_bits(x);
  const u64 mantissa = bits & mantissa_mask;
  const int above_sqrt2 = mantissa > sqrt2_mantissa ? 1 : 0;  // then halve m, so f stays small
  const int k = static_cast<int>(bits >> 52) - 1023 + above_sqrt2;
  const double m = double_from_bits(mantissa | (static_cast<u64>(1023 - above_sqrt2) << 52));
  const double f = m - 1.0;
  const DoubleDouble hfsq = two_prod(0.5 * f, f);
  const double s = f / (2.0 + f);
  const double z = mul_rn(s, s);
  // 2/(2j+1) for j = 11 .. 1: |s| <= 0.1716, so z^11 * 2/23 < 2^-60 of the sum.
  double r = 0x1.642c8590b2164p-4;
  r = mul_rn(r, z) + 0x1.8618618618618p-4;
  r = mul_rn(r, z) + 0x1.af286bca1af28p-4;
  r = mul_rn(r, z) + 0x1.e1e1e1e1e1e1ep-4;
  r = mul_rn(r, z) + 0x1.1111111111111p-3;
  r = mul_rn(r, z) + 0x1.3b13b13b13b14p-3;
  r = mul_rn(r, z) + 0x1.745d1745d1746p-3;
  r = mul_rn(r, z) + 0x1.c71c71c71c71cp-3;
  r = mul_rn(r, z) + 0x1.2492492492492p-2;
  r = mul_rn(r, z) + 0x1.999999999999ap-2;
  r = mul_rn(r, z) + 0x1.5555555555555p-1;
  r = mul_rn(r, z);
  const double dk = static_cast<double>(k);
  const double small = mul_rn(s, hfsq.hi + r);  // s * (f^2/2 + R): < 2^-5 of the result
  const DoubleDouble lead = two_sum(mul_rn(dk, ln2_hi), f);  // k * ln2_hi is exact
  const DoubleDouble body = two_sum(lead.hi, -hfsq.hi);
  return fast_two_sum(body.hi, ((body.lo + lead.lo) - hfsq.lo) + (small + mul_rn(dk, ln2_lo)));
}

/// log(x) rounded to double.
[[nodiscard]] ACCEL_HOST_DEVICE inline double portable_log(double x) noexcept {
  const DoubleDouble l = portable_log_dd(x);
  return l.hi + l.lo;
}

/// sin(x + y) for |x| <= pi/4 (a little more after rounding), |y| <= ulp(x), within about 0.52 ulp:
/// x - x^3/6 with x^3/6 as a double-double, plus the Taylor series from x^5 to x^17 and
/// y * cos(x) ~ y * (1 - x^2/2).
[[nodiscard]] ACCEL_HOST_DEVICE inline DoubleDouble sin_kernel(double x, double y) noexcept {
  constexpr double sixth_hi = 0x1.5555555555555p-3;  // 1/6 = sixth_hi + sixth_lo
  constexpr double sixth_lo = 0x1.5555555555555p-57;
  const DoubleDouble z = two_prod(x, x);
  double p = 0x1.952c77030ad4ap-49;
  p = mul_rn(p, z.hi) - 0x1.ae7f3e733b81fp-41;
  p = mul_rn(p, z.hi) + 0x1.6124613a86d09p-33;
  p = mul_rn(p, z.hi) - 0x1.ae64567f544e4p-26;
  p = mul_rn(p, z.hi) + 0x1.71de3a556c734p-19;
  p = mul_rn(p, z.hi) - 0x1.a01a01a01a01ap-13;
  p = mul_rn(p, z.hi) + 0x1.1111111111111p-7;
  p = mul_rn(p, z.hi);  // x^5/120 - ... divided by x^3
  const DoubleDouble x3 = two_prod(z.hi, x);
  const double x3_lo = x3.lo + mul_rn(z.lo, x);
  const DoubleDouble c = two_prod(x3.hi, sixth_hi);  // x^3/6, to 2^-100 relative with the terms below
  const double c_lo = c.lo + (mul_rn(x3.hi, sixth_lo) + mul_rn(x3_lo, sixth_hi));
  const DoubleDouble lead = fast_two_sum(x, -c.hi);
  const double y_term = y - mul_rn(mul_rn(0.5, z.hi), y);
  return fast_two_sum(lead.hi, ((lead.lo - c_lo) + mul_rn(x3.hi, p)) + y_term);
}

/// cos(x + y) for the same x, y, within about 0.52 ulp: 1 - x^2/2 with x^2 exact and the rounding
/// of the difference recovered, the Taylor series from x^4 to x^18, minus y * sin(x) ~ y * x.
[[nodiscard]] ACCEL_HOST_DEVICE inline DoubleDouble cos_kernel(double x, double y) noexcept {
  const DoubleDouble z = two_prod(x, x);
  double q = -0x1.6827863b97d97p-53;
  q = mul_rn(q, z.hi) + 0x1.ae7f3e733b81fp-45;
  q = mul_rn(q, z.hi) - 0x1.93974a8c07c9dp-37;
  q = mul_rn(q, z.hi) + 0x1.1eed8eff8d898p-29;
  q = mul_rn(q, z.hi) - 0x1.27e4fb7789f5cp-22;
  q = mul_rn(q, z.hi) + 0x1.a01a01a01a01ap-16;
  q = mul_rn(q, z.hi) - 0x1.6c16c16c16c17p-10;
  q = mul_rn(q, z.hi) + 0x1.5555555555555p-5;
  const double half_z = 0.5 * z.hi;
  const double w = 1.0 - half_z;
  const double lost = (1.0 - w) - half_z;  // exact: what 1 - z/2 lost to rounding
  return fast_two_sum(w, (lost - 0.5 * z.lo) + (mul_rn(mul_rn(z.hi, z.hi), q) - mul_rn(x, y)));
}

[[nodiscard]] ACCEL_HOST_DEVICE inline DoubleDouble negate(DoubleDouble a) noexcept { return {-a.hi, -a.lo}; }

/// sin(a) and cos(a) as double-doubles, for 0 <= a <= 16 (Box–Muller's angles lie in (0, 2 pi]).
/// a = n * pi/2 + r, with pi/2 = P1 + P2 + P3 (33 + 33 + 53 bits): n * P1 and n * P2 are exact, so
/// r is found as a double-double (rh, rl) to ~2^-100 relative, even next to a multiple of pi/2.
ACCEL_HOST_DEVICE inline void portable_sincos_dd(double a, DoubleDouble* sin_a, DoubleDouble* cos_a) noexcept {
  constexpr double two_over_pi = 0x1.45f306dc9c883p-1;
  constexpr double pio2_1 = 0x1.921fb54400000p+0;
  constexpr double pio2_2 = 0x1.0b4611a600000p-34;
  constexpr double pio2_3 = 0x1.3198a2e037073p-69;
  const int n = static_cast<int>(mul_rn(a, two_over_pi) + 0.5);
  const double dn = static_cast<double>(n);
  const double r1 = a - mul_rn(dn, pio2_1);  // exact (Sterbenz; r1 on a's grid)
  const DoubleDouble s1 = two_sum(r1, -mul_rn(dn, pio2_2));  // n * pio2_2 is exact
  const DoubleDouble r = fast_two_sum(s1.hi, s1.lo - mul_rn(dn, pio2_3));  // |s1.hi| >> the rest
  const DoubleDouble s = sin_kernel(r.hi, r.lo);
  const DoubleDouble c = cos_kernel(r.hi, r.lo);
  switch (n & 3) {
    case 0: *sin_a = s; *cos_a = c; break;
    case 1: *sin_a = c; *cos_a = negate(s); break;
    case 2: *sin_a = negate(s); *cos_a = negate(c); break;
    default: *sin_a = negate(c); *cos_a = s; break;
  }
}

/// sin(a) and cos(a) rounded to double, for 0 <= a <= 16.
ACCEL_HOST_DEVICE inline void portable_sincos(double a, double* sin_a, double* cos_a) noexcept {
  DoubleDouble s{}, c{};
  portable_sincos_dd(a, &s, &c);
  *sin_a = s.hi + s.lo;
  *cos_a = c.hi + c.lo;
}

/// One Box–Muller pair for a uniform u in (0, 1] and an angle a in [0, 16]: sin(a) and cos(a) times
/// sqrt(-2 log u), each computed in double-double and rounded once (within about 0.6 ulp).
ACCEL_HOST_DEVICE inline void portable_box_muller(double u, double a, double* x, double* y) noexcept {
  const DoubleDouble l = portable_log_dd(u);
  const double t_hi = -2.0 * l.hi, t_lo = -2.0 * l.lo;  // exact
#if defined(__CUDA_ARCH__)
  const double r_hi = sqrt(t_hi);  // IEEE, correctly rounded, on both sides
#else
  const double r_hi = __builtin_sqrt(t_hi);
#endif
  const DoubleDouble sq = two_prod(r_hi, r_hi);
  // One Newton step: r = r_hi + (t - r_hi^2) / (2 r_hi); r_hi is 0 only when t is (u == 1).
  const double r_lo = r_hi > 0.0 ? (((t_hi - sq.hi) - sq.lo) + t_lo) / (2.0 * r_hi) : 0.0;
  DoubleDouble s{}, c{};
  portable_sincos_dd(a, &s, &c);
  const DoubleDouble ps = two_prod(s.hi, r_hi);
  const DoubleDouble pc = two_prod(c.hi, r_hi);
  *x = ps.hi + (ps.lo + (mul_rn(s.hi, r_lo) + mul_rn(s.lo, r_hi)));
  *y = pc.hi + (pc.lo + (mul_rn(c.hi, r_lo) + mul_rn(c.lo, r_hi)));
}

// ---- the float path ---------------------------------------------------------------------------------
// Float normals need the exact value to about 2^-40, not 2^-100: plain double evaluation (each
// function within ~1 ulp of double) rounded to float is correctly rounded but for values within
// 2^-28 ulp of a midpoint, at a third of the cost of the double-double path.

/// log(x) in plain double, within about 1 ulp (the formula of portable_log_dd, summed in double).
[[nodiscard]] ACCEL_HOST_DEVICE inline double log_double_precision(double x) noexcept {
  constexpr u64 mantissa_mask = (u64{1} << 52) - 1;
  constexpr u64 sqrt2_mantissa = 0x6a09e667f3bcdULL;
  constexpr double ln2 = 0x1.62e42fefa39efp-1;
  const u64 bits = double_bits(x);
  const u64 mantissa = bits & mantissa_mask;
  const int above_sqrt2 = mantissa > sqrt2_mantissa ? 1 : 0;
  const int k = static_cast<int>(bits >> 52) - 1023 + above_sqrt2;
  const double m = double_from_bits(mantissa | (static_cast<u64>(1023 - above_sqrt2) << 52));
  const double f = m - 1.0;
  const double hfsq = mul_rn(0.5 * f, f);
  const double s = f / (2.0 + f);
  const double z = mul_rn(s, s);
  // 2/(2j+1) for j = 9 .. 1: z^9 * 2/19 < 2^-47 of the sum's share of the result.
  double r = 0x1.af286bca1af28p-4;
  r = mul_rn(r, z) + 0x1.e1e1e1e1e1e1ep-4;
  r = mul_rn(r, z) + 0x1.1111111111111p-3;
  r = mul_rn(r, z) + 0x1.3b13b13b13b14p-3;
  r = mul_rn(r, z) + 0x1.745d1745d1746p-3;
  r = mul_rn(r, z) + 0x1.c71c71c71c71cp-3;
  r = mul_rn(r, z) + 0x1.2492492492492p-2;
  r = mul_rn(r, z) + 0x1.999999999999ap-2;
  r = mul_rn(r, z) + 0x1.5555555555555p-1;
  r = mul_rn(r, z);
  return mul_rn(static_cast<double>(k), ln2) + (f - (hfsq - mul_rn(s, hfsq + r)));
}

/// sin(a) and cos(a) in plain double for 0 <= a <= 16, within about 1 ulp; a is a float's value
/// (Box–Muller's float angle), so a two-part pi/2 (66 bits) reduces it accurately enough.
ACCEL_HOST_DEVICE inline void sincos_double_precision(double a, double* sin_a, double* cos_a) noexcept {
  constexpr double two_over_pi = 0x1.45f306dc9c883p-1;
  constexpr double pio2_1 = 0x1.921fb54400000p+0;
  constexpr double pio2_2 = 0x1.0b4611a626331p-34;  // pi/2 - pio2_1, rounded
  const int n = static_cast<int>(mul_rn(a, two_over_pi) + 0.5);
  const double dn = static_cast<double>(n);
  const double x = (a - mul_rn(dn, pio2_1)) - mul_rn(dn, pio2_2);
  const double z = mul_rn(x, x);
  double p = -0x1.ae7f3e733b81fp-41;  // sin: x^15 .. x^3 coefficients, in z
  p = mul_rn(p, z) + 0x1.6124613a86d09p-33;
  p = mul_rn(p, z) - 0x1.ae64567f544e4p-26;
  p = mul_rn(p, z) + 0x1.71de3a556c734p-19;
  p = mul_rn(p, z) - 0x1.a01a01a01a01ap-13;
  p = mul_rn(p, z) + 0x1.1111111111111p-7;
  p = mul_rn(p, z) - 0x1.5555555555555p-3;
  double q = 0x1.ae7f3e733b81fp-45;  // cos: x^16 .. x^4 coefficients, in z
  q = mul_rn(q, z) - 0x1.93974a8c07c9dp-37;
  q = mul_rn(q, z) + 0x1.1eed8eff8d898p-29;
  q = mul_rn(q, z) - 0x1.27e4fb7789f5cp-22;
  q = mul_rn(q, z) + 0x1.a01a01a01a01ap-16;
  q = mul_rn(q, z) - 0x1.6c16c16c16c17p-10;
  q = mul_rn(q, z) + 0x1.5555555555555p-5;
  const double s = x + mul_rn(mul_rn(z, x), p);
  const double c = (1.0 - 0.5 * z) + mul_rn(mul_rn(z, z), q);
  // Quadrant n: swap for odd n, negate sin for n = 2, 3 and cos for n = 1, 2 (selects, no branch).
  const bool swap = (n & 1) != 0;
  const double sin_r = swap ? c : s;
  const double cos_r = swap ? s : c;
  *sin_a = (n & 2) != 0 ? -sin_r : sin_r;
  *cos_a = ((n + 1) & 2) != 0 ? -cos_r : cos_r;
}

/// One Box–Muller pair of floats for float u in (0, 1] and angle v in [0, 2 pi + 1]: computed in
/// double, rounded once to float.
ACCEL_HOST_DEVICE inline void portable_box_muller_float(float u, float v, float* x, float* y) noexcept {
#if defined(__CUDA_ARCH__)
  const double r = sqrt(-2.0 * log_double_precision(u));
#else
  const double r = __builtin_sqrt(-2.0 * log_double_precision(u));
#endif
  double s = 0.0, c = 0.0;
  sincos_double_precision(v, &s, &c);
  *x = static_cast<float>(mul_rn(s, r));
  *y = static_cast<float>(mul_rn(c, r));
}

}  // namespace accel::rng::detail
