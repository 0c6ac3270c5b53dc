// cpu_convert.h — float <-> bfloat16 / IEEE float16 for CPU kernels, and loads and stores of one element
// of a tensor by its storage dtype (D: ACCEL_DTYPE_* of accel_ops_abi.h), converting inline so that a
// vectorised loop reads and writes each tensor once whatever its dtype.
//
// One definition for every CPU kernel: accel's (through cpu_common.h) and a user's own op (the
// engine's attention), which adds <accel kernel dir>/cpu and <accel kernel dir>/common to its include
// directories (examples/engine/gpt_kernels.hpp). Exports nothing.
//
// Rounding is to nearest even everywhere; a NaN stays a quiet NaN with its sign and top payload (the bits
// of accel::bfloat16 / accel::half, VCVTNEPS2BF16, F16C and the CUDA kernels). Both conversions are
// integer code (float16's subnormals kept), which GCC vectorises inside `omp simd` loops; F16C's scalar
// intrinsics would not be, and they would keep a whole loop scalar.
#pragma once

#include <cstdint>
#include <cstring>

#include "accel_ops_abi.h"

namespace accel_kernels {

inline float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline std::uint32_t float_to_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bf16_to_float(std::uint16_t b) { return bits_to_float(static_cast<std::uint32_t>(b) << 16); }
inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = float_to_bits(f);
  const std::uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const std::uint32_t nan = (u >> 16) | 0x40u;
  return static_cast<std::uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

// F. Giesen's branch-light conversions (the integer fallback of F16C).
inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t o = static_cast<std::uint32_t>(h & 0x7FFFu) << 13;
  const std::uint32_t exp = o & 0x0F800000u;
  o += (127u - 15u) << 23;
  if (exp == 0x0F800000u) {
    o += (128u - 16u) << 23;  // inf / NaN
    if ((o & 0x007FFFFFu) != 0) o |= 0x00400000u;
  } else if (exp == 0) {
    o += 1u << 23;  // zero / subnormal: renormalise
    o = float_to_bits(bits_to_float(o) - bits_to_float(113u << 23));
  }
  return bits_to_float(o | sign);
}
inline std::uint16_t float_to_half(float f) {
  std::uint32_t u = float_to_bits(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7FFFFFFFu;
  std::uint32_t o;
  if (u >= (143u << 23)) {  // >= 65536: inf, or NaN
    o = u > 0x7F800000u ? (0x7E00u | ((u >> 13) & 0x3FFu)) : 0x7C00u;
  } else if (u < (113u << 23)) {  // half subnormal or zero: align with a magic add (rounds to nearest even)
    const std::uint32_t magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    o = float_to_bits(bits_to_float(u) + bits_to_float(magic)) - magic;
  } else {
    const std::uint32_t odd = (u >> 13) & 1u;
    u += (static_cast<std::uint32_t>(15 - 127) << 23) + 0xFFFu + odd;
    o = u >> 13;
  }
  return static_cast<std::uint16_t>(o | sign);
}

// Element i of a tensor stored as D, as float; and its store, rounded.
template <int D>
inline float ld(const void* base, long long i) {
  if constexpr (D == ACCEL_DTYPE_F32) {
    return static_cast<const float*>(base)[i];
  } else if constexpr (D == ACCEL_DTYPE_BF16) {
    return bf16_to_float(static_cast<const std::uint16_t*>(base)[i]);
  } else {
    return half_to_float(static_cast<const std::uint16_t*>(base)[i]);
  }
}
template <int D>
inline void st(void* base, long long i, float x) {
  if constexpr (D == ACCEL_DTYPE_F32) {
    static_cast<float*>(base)[i] = x;
  } else if constexpr (D == ACCEL_DTYPE_BF16) {
    static_cast<std::uint16_t*>(base)[i] = float_to_bf16(x);
  } else {
    static_cast<std::uint16_t*>(base)[i] = float_to_half(x);
  }
}
template <int D>
constexpr long long elem_size() {
  return D == ACCEL_DTYPE_F32 ? 4 : 2;
}

}  // namespace accel_kernels
