// accel/detail/small_float_vectors.hpp — bfloat16 and half to and from float, four elements at a time.
//
// GCC vector extensions of 16 bytes (the width every x86-64 and Arm target has, so no target attribute
// and no run-time dispatch): the same bits as accel::bfloat16's and accel::half's scalar conversions —
// rounding to nearest, ties to even, subnormals kept, overflow to infinity; a NaN comes out quiet with
// its sign and top payload. Shared by MPI's user-defined sums over small floats (comm/detail/mpi_types.hpp)
// and the CPU GEMM that narrows a float product to bfloat16 (blas/detail/cpu_half.hpp).
#pragma once

#include <accel/core/bfloat16.hpp>

#include <cstdint>
#include <cstring>

namespace accel::detail::small_float {

typedef std::uint16_t u16x4 __attribute__((vector_size(8)));
typedef std::uint32_t u32x4 __attribute__((vector_size(16)));
typedef std::int32_t i32x4 __attribute__((vector_size(16)));
typedef float f32x4 __attribute__((vector_size(16)));

inline f32x4 widen_bf16(const std::uint16_t* p) noexcept {  // bfloat16 -> float; a signalling NaN made quiet
  u16x4 h;
  std::memcpy(&h, p, sizeof h);
  const u32x4 w = __builtin_convertvector(h, u32x4);
  const u32x4 signalling = (u32x4)(((w & 0x7F80u) == 0x7F80u) & ((w & 0x7Fu) != 0u) & ((w & 0x40u) == 0u));
  return (f32x4)((w << 16) | (signalling & 0x400000u));
}

inline void narrow_bf16(f32x4 sum, std::uint16_t* p) noexcept {  // float -> bfloat16, as bfloat16(float)
  const u32x4 r = (u32x4)sum;
  const u32x4 nan = (u32x4)((r & 0x7FFFFFFFu) > 0x7F800000u);
  const u32x4 rounded = (r + 0x7FFFu + ((r >> 16) & 1u)) >> 16;
  const u32x4 quiet = (r >> 16) | 0x40u;
  const u16x4 out = __builtin_convertvector((nan & quiet) | (~nan & rounded), u16x4);
  std::memcpy(p, &out, sizeof out);
}

inline f32x4 widen_half(const std::uint16_t* p) noexcept {  // half -> float, exactly; NaNs made quiet
  u16x4 h16;
  std::memcpy(&h16, p, sizeof h16);
  const u32x4 h = __builtin_convertvector(h16, u32x4);
  const u32x4 sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  const u32x4 normal = ((exp + 112u) << 23) | (man << 13);
  // m * 2^-24, exact (m < 1024 converts as a signed int: SSE2 has no unsigned conversion)
  const u32x4 subnormal = (u32x4)(__builtin_convertvector((i32x4)man, f32x4) * 0x1p-24f);
  const u32x4 special = 0x7F800000u | (man << 13) | ((u32x4)(man != 0u) & 0x400000u);  // inf, quiet NaN
  const u32x4 is_zero_exp = (u32x4)(exp == 0u), is_max_exp = (u32x4)(exp == 0x1Fu);
  return (f32x4)(sign | (is_zero_exp & subnormal) | (is_max_exp & special) | (~(is_zero_exp | is_max_exp) & normal));
}

inline void narrow_half(f32x4 sum, std::uint16_t* p) noexcept {  // float -> half, as half(float)
  const u32x4 bits = (u32x4)sum;
  const u32x4 sign = (bits >> 16) & 0x8000u, u = bits & 0x7FFFFFFFu;
  const u32x4 nan = (u32x4)(u > 0x7F800000u), big = (u32x4)(u >= 0x47800000u);  // >= 65536: infinity
  const u32x4 tiny = (u32x4)(u < 0x38800000u);  // below half's smallest normal, 2^-14
  // Subnormal results: adding 0.5 puts the value's half-subnormal bits at the bottom of the float,
  // rounded by the float addition (nearest, ties to even).
  const u32x4 subnormal = (u32x4)((f32x4)u + 0.5f) - 0x3F000000u;
  const u32x4 normal = (u + 0xC8000FFFu + ((u >> 13) & 1u)) >> 13;  // rebias by -112 << 23, round to even
  const u32x4 quiet_nan = 0x7E00u | ((u >> 13) & 0x3FFu);
  const u32x4 out = sign | (nan & quiet_nan) | (~nan & big & 0x7C00u) | (~big & tiny & subnormal) |
                    (~big & ~tiny & normal);
  const u16x4 out16 = __builtin_convertvector(out, u16x4);
  std::memcpy(p, &out16, sizeof out16);
}

// g++ 12 at -O3, inlining this into accel::blas's widened product in pieces (blas/detail/cpu_half.hpp)
// with a constant n, reported the tail loop's iteration 2^62 - 1 as undefined behaviour: n there is a
// row's length, and i < n stops the loop long before; the warning is a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Waggressive-loop-optimizations"
#endif
/// dst[i] = bfloat16(src[i]) as bits, four at a time; the tail through accel::bfloat16.
inline void narrow_bf16s(std::uint16_t* dst, const float* src, std::int64_t n) noexcept {
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    f32x4 v;
    std::memcpy(&v, src + i, sizeof v);
    narrow_bf16(v, dst + i);
  }
  for (; i < n; ++i) dst[i] = bfloat16(src[i]).bits();
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace accel::detail::small_float
