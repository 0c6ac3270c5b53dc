// accel/core/float8.hpp — accel::float8_e4m3 and accel::float8_e5m2: the two OCP FP8 value types.
//
// They follow torch's float8_e4m3fn and float8_e5m2 bit for bit on conversion from float:
//   float8_e4m3  (E4M3FN) 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; only
//                S.1111.111 (0x7F, 0xFF) is NaN; max 448. Rounds to nearest, ties to even; a value
//                that rounds above 448 (|x| > 464) and +-inf saturate to +-448 (0x7E / 0xFE), as
//                torch 2.15's c10::Float8_e4m3fn does ("finite overflow or inf -> saturate").
//   float8_e5m2  1 sign, 5 exponent (bias 15), 2 mantissa bits; IEEE layout with infinities; max
//                57344. Rounds to nearest, ties to even; overflow gives +-inf.
// Every NaN input becomes the all-ones NaN (0x7F / 0xFF by sign), as in c10. Conversion to float is
// exact; NaNs come out quiet. The two types are kept together because they are one format family
// and are always used as a pair (forward E4M3, gradients E5M2).
#pragma once

#include <accel/core/half.hpp>  // detail:: rounding core

#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace accel {

/// OCP FP8 E4M3FN (torch.float8_e4m3fn). Trivially copyable and trivially default constructible.
class float8_e4m3 {
 public:
  static constexpr detail::SmallFloatFormat format{4, 3, false, false};

  float8_e4m3() = default;
  /// Rounds to nearest, ties to even; above 448 after rounding, or +-inf: +-448; NaN: NaN (0x7F/0xFF).
  constexpr explicit float8_e4m3(float value) noexcept : bits_(narrow(detail::from_float<format>(value))) {}
  /// Rounds the double once (no double rounding through float).
  constexpr explicit float8_e4m3(double value) noexcept : bits_(narrow(detail::from_double<format>(value))) {}
  /// Exactly rounded from the integer; wider than 64 bits (__int128) is not accepted.
  template <detail::SmallFloatInteger I>
  constexpr explicit float8_e4m3(I value) noexcept : bits_(narrow(detail::from_integer<format>(value))) {}

  [[nodiscard]] static constexpr float8_e4m3 from_bits(std::uint8_t bits) noexcept {
    float8_e4m3 f;
    f.bits_ = bits;
    return f;
  }
  [[nodiscard]] constexpr std::uint8_t bits() const noexcept { return bits_; }

  /// Exact. Arithmetic and comparisons go through float.
  constexpr operator float() const noexcept { return detail::to_float<format>(bits_); }

 private:
  static constexpr std::uint8_t narrow(std::uint32_t bits) noexcept {
    return static_cast<std::uint8_t>(bits);
  }
  std::uint8_t bits_;
};

/// OCP FP8 E5M2 (torch.float8_e5m2). Trivially copyable and trivially default constructible.
class float8_e5m2 {
 public:
  static constexpr detail::SmallFloatFormat format{5, 2, true, false};

  float8_e5m2() = default;
  /// Rounds to nearest, ties to even; overflow gives +-inf; NaN gives 0x7F/0xFF.
  constexpr explicit float8_e5m2(float value) noexcept : bits_(narrow(detail::from_float<format>(value))) {}
  /// Rounds the double once (no double rounding through float).
  constexpr explicit float8_e5m2(double value) noexcept : bits_(narrow(detail::from_double<format>(value))) {}
  /// Exactly rounded from the integer; wider than 64 bits (__int128) is not accepted.
  template <detail::SmallFloatInteger I>
  constexpr explicit float8_e5m2(I value) noexcept : bits_(narrow(detail::from_integer<format>(value))) {}

  [[nodiscard]] static constexpr float8_e5m2 from_bits(std::uint8_t bits) noexcept {
    float8_e5m2 f;
    f.bits_ = bits;
    return f;
  }
  [[nodiscard]] constexpr std::uint8_t bits() const noexcept { return bits_; }

  /// Exact. Arithmetic and comparisons go through float.
  constexpr operator float() const noexcept { return detail::to_float<format>(bits_); }

 private:
  static constexpr std::uint8_t narrow(std::uint32_t bits) noexcept {
    return static_cast<std::uint8_t>(bits);
  }
  std::uint8_t bits_;
};

static_assert(sizeof(float8_e4m3) == 1 && sizeof(float8_e5m2) == 1);
static_assert(std::is_trivially_copyable_v<float8_e4m3> && std::is_trivially_copyable_v<float8_e5m2>);

}  // namespace accel

template <>
struct std::numeric_limits<accel::float8_e4m3> : accel::detail::SmallFloatLimits {
  static constexpr bool has_infinity = false;
  static constexpr bool has_signaling_NaN = false;
  static constexpr bool is_iec559 = false;
  static constexpr int digits = 4;
  static constexpr int digits10 = 0;
  static constexpr int max_digits10 = 3;
  static constexpr int min_exponent = -5;
  static constexpr int min_exponent10 = -1;
  static constexpr int max_exponent = 9;
  static constexpr int max_exponent10 = 2;

  static constexpr accel::float8_e4m3 min() noexcept { return accel::float8_e4m3::from_bits(0x08); }
  static constexpr accel::float8_e4m3 lowest() noexcept { return accel::float8_e4m3::from_bits(0xFE); }
  static constexpr accel::float8_e4m3 max() noexcept { return accel::float8_e4m3::from_bits(0x7E); }
  static constexpr accel::float8_e4m3 epsilon() noexcept { return accel::float8_e4m3::from_bits(0x20); }
  static constexpr accel::float8_e4m3 round_error() noexcept { return accel::float8_e4m3::from_bits(0x30); }
  /// There is none; the standard asks for T() here.
  static constexpr accel::float8_e4m3 infinity() noexcept { return accel::float8_e4m3::from_bits(0x00); }
  static constexpr accel::float8_e4m3 quiet_NaN() noexcept { return accel::float8_e4m3::from_bits(0x7F); }
  static constexpr accel::float8_e4m3 signaling_NaN() noexcept { return accel::float8_e4m3::from_bits(0x00); }
  static constexpr accel::float8_e4m3 denorm_min() noexcept { return accel::float8_e4m3::from_bits(0x01); }
};

template <>
struct std::numeric_limits<accel::float8_e5m2> : accel::detail::SmallFloatLimits {
  static constexpr bool has_infinity = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr bool is_iec559 = false;
  static constexpr int digits = 3;
  static constexpr int digits10 = 0;
  static constexpr int max_digits10 = 2;
  static constexpr int min_exponent = -13;
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent = 16;
  static constexpr int max_exponent10 = 4;

  static constexpr accel::float8_e5m2 min() noexcept { return accel::float8_e5m2::from_bits(0x04); }
  static constexpr accel::float8_e5m2 lowest() noexcept { return accel::float8_e5m2::from_bits(0xFB); }
  static constexpr accel::float8_e5m2 max() noexcept { return accel::float8_e5m2::from_bits(0x7B); }
  static constexpr accel::float8_e5m2 epsilon() noexcept { return accel::float8_e5m2::from_bits(0x34); }
  static constexpr accel::float8_e5m2 round_error() noexcept { return accel::float8_e5m2::from_bits(0x38); }
  static constexpr accel::float8_e5m2 infinity() noexcept { return accel::float8_e5m2::from_bits(0x7C); }
  static constexpr accel::float8_e5m2 quiet_NaN() noexcept { return accel::float8_e5m2::from_bits(0x7F); }
  static constexpr accel::float8_e5m2 signaling_NaN() noexcept { return accel::float8_e5m2::from_bits(0x7D); }
  static constexpr accel::float8_e5m2 denorm_min() noexcept { return accel::float8_e5m2::from_bits(0x01); }
};
