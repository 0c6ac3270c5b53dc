// accel/core/bfloat16.hpp — accel::bfloat16: the brain floating-point value type used on the host.
//
// bfloat16 is the top half of a float: 1 sign, 8 exponent (bias 127), 7 mantissa bits. It converts
// from float, double and integers with one correctly rounded step (nearest, ties to even; subnormals
// kept, overflow to infinity) and to float exactly, by appending 16 zero bits — except that a
// signalling NaN also gets float's quiet bit set (0x7F81 -> 0x7FC10000), as hardware conversions do.
//
// A NaN keeps its sign and top payload bits and comes out quiet, as AVX512-BF16's VCVTNEPS2BF16 and
// Arm's BFCVT give; torch's c10::BFloat16 instead writes one canonical 0x7FC0 for every NaN.
#pragma once

#include <accel/core/half.hpp>  // detail:: rounding core

#include <bit>
#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace accel {

/// bfloat16: float's exponent range with 8 significant bits. Trivially copyable and trivially default
/// constructible (`bfloat16 b;` is uninitialised, `bfloat16 b{};` is +0).
class bfloat16 {
 public:
  static constexpr detail::SmallFloatFormat format{8, 7, true, true};

  bfloat16() = default;
  /// Rounds to nearest, ties to even; overflow gives +-inf; NaN stays NaN (quiet).
  constexpr explicit bfloat16(float value) noexcept : bits_(narrow(detail::from_float<format>(value))) {}
  /// Rounds the double once (no double rounding through float).
  constexpr explicit bfloat16(double value) noexcept : bits_(narrow(detail::from_double<format>(value))) {}
  /// Exactly rounded from the integer; wider than 64 bits (__int128) is not accepted.
  template <detail::SmallFloatInteger I>
  constexpr explicit bfloat16(I value) noexcept : bits_(narrow(detail::from_integer<format>(value))) {}

  /// The bfloat16 whose bit pattern is `bits`.
  [[nodiscard]] static constexpr bfloat16 from_bits(std::uint16_t bits) noexcept {
    bfloat16 b;
    b.bits_ = bits;
    return b;
  }
  [[nodiscard]] constexpr std::uint16_t bits() const noexcept { return bits_; }

  /// Exact (NaNs come out quiet). Arithmetic and comparisons go through float.
  constexpr operator float() const noexcept {
    // Any NaN gets float's quiet bit: a signalling one is quieted, a quiet one already has it.
    const bool nan = (bits_ & 0x7F80) == 0x7F80 && (bits_ & 0x007F) != 0;
    return std::bit_cast<float>((static_cast<std::uint32_t>(bits_) << 16) | (nan ? 0x400000u : 0));
  }

 private:
  static constexpr std::uint16_t narrow(std::uint32_t bits) noexcept {
    return static_cast<std::uint16_t>(bits);
  }
  std::uint16_t bits_;
};

static_assert(sizeof(bfloat16) == 2 && alignof(bfloat16) == 2);
static_assert(std::is_trivially_copyable_v<bfloat16>);

}  // namespace accel

template <>
struct std::numeric_limits<accel::bfloat16> : accel::detail::SmallFloatLimits {
  static constexpr bool has_infinity = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr bool is_iec559 = false;  // not an IEEE 754 interchange format
  static constexpr int digits = 8;
  static constexpr int digits10 = 2;
  static constexpr int max_digits10 = 4;
  static constexpr int min_exponent = -125;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent = 128;
  static constexpr int max_exponent10 = 38;

  static constexpr accel::bfloat16 min() noexcept { return accel::bfloat16::from_bits(0x0080); }
  static constexpr accel::bfloat16 lowest() noexcept { return accel::bfloat16::from_bits(0xFF7F); }
  static constexpr accel::bfloat16 max() noexcept { return accel::bfloat16::from_bits(0x7F7F); }
  static constexpr accel::bfloat16 epsilon() noexcept { return accel::bfloat16::from_bits(0x3C00); }
  static constexpr accel::bfloat16 round_error() noexcept { return accel::bfloat16::from_bits(0x3F00); }
  static constexpr accel::bfloat16 infinity() noexcept { return accel::bfloat16::from_bits(0x7F80); }
  static constexpr accel::bfloat16 quiet_NaN() noexcept { return accel::bfloat16::from_bits(0x7FC0); }
  static constexpr accel::bfloat16 signaling_NaN() noexcept { return accel::bfloat16::from_bits(0x7FA0); }
  static constexpr accel::bfloat16 denorm_min() noexcept { return accel::bfloat16::from_bits(0x0001); }
};
