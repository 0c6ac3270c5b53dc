// accel/core/half.hpp — accel::half: the IEEE 754 binary16 value type used on the host.
//
// half stores the 16 bits and converts: from float, double and integers with one correctly rounded
// step (round to nearest, ties to even; subnormals kept; overflow to infinity), to float exactly.
// Arithmetic happens in float through the implicit conversion to float: half + half is a float (not
// a half, unlike torch's c10::Half, whose operators round the result back to Half); convert it back
// with half(...) to store it.
//
// The conversions are portable integer code, constexpr, and give the same bits as x86's F16C and
// GCC's _Float16, NaNs included: a NaN keeps its sign and top payload bits and comes out quiet.
// F16C is not used even where available: under DAZ (-ffast-math) it flushes subnormal inputs.
//
// detail:: below holds the rounding core that bfloat16.hpp and float8.hpp share.
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace accel {

namespace detail {

/// A binary floating-point format narrower than float: 1 sign bit, exp_bits, mant_bits.
struct SmallFloatFormat {
  int exp_bits;
  int mant_bits;
  /// true: IEEE layout, an all-ones exponent is inf (mantissa 0) or NaN. false: the "fn" layout of
  /// float8_e4m3fn — no infinities, only the all-ones pattern is NaN, and a finite overflow or an
  /// infinity saturates to the largest finite value with the input's sign (as torch >= 2.15's c10 does).
  bool has_inf;
  /// true: a NaN keeps its sign and top payload bits and is made quiet (IEEE 754, x86 hardware).
  /// false: every NaN becomes the all-ones pattern with the input's sign (torch's fp8 conversions).
  bool nan_keeps_payload;
};

/// sig / 2^s rounded to nearest, ties to even. s may be <= 0 (exact) or >= 64 (all bits discarded).
[[nodiscard]] constexpr std::uint64_t shift_right_rne(std::uint64_t sig, int s) noexcept {
  if (s <= 0) return sig << -s;
  if (s > 64) return 0;  // sig < 2^64 <= 2^(s-1): below half a unit
  const std::uint64_t kept = s == 64 ? 0 : sig >> s;
  const std::uint64_t rest = s == 64 ? sig : sig & ((std::uint64_t{1} << s) - 1);
  const std::uint64_t halfway = std::uint64_t{1} << (s - 1);
  return kept + ((rest > halfway || (rest == halfway && (kept & 1))) ? 1 : 0);
}

template <SmallFloatFormat F>
inline constexpr std::uint32_t sign_bit = std::uint32_t{1} << (F.exp_bits + F.mant_bits);
template <SmallFloatFormat F>
inline constexpr std::uint32_t all_ones_exponent = ((std::uint32_t{1} << F.exp_bits) - 1) << F.mant_bits;
template <SmallFloatFormat F>
inline constexpr std::uint32_t canonical_nan = all_ones_exponent<F> | ((std::uint32_t{1} << F.mant_bits) - 1);

/// Bits of the NaN that a NaN input with `payload` (the top `payload_bits` of its mantissa) becomes.
template <SmallFloatFormat F>
[[nodiscard]] constexpr std::uint32_t nan_bits(bool negative, std::uint64_t payload,
                                               int payload_bits) noexcept {
  const std::uint32_t sign = negative ? sign_bit<F> : 0;
  if constexpr (!F.nan_keeps_payload) {
    return sign | canonical_nan<F>;
  } else {
    const auto top = static_cast<std::uint32_t>(payload >> (payload_bits - F.mant_bits));
    return sign | all_ones_exponent<F> | (std::uint32_t{1} << (F.mant_bits - 1)) | top;
  }
}

/// Bits of (-1)^negative * sig * 2^exp2 in format F, rounded to nearest, ties to even.
template <SmallFloatFormat F>
[[nodiscard]] constexpr std::uint32_t round_to(bool negative, std::uint64_t sig, int exp2) noexcept {
  constexpr int bias = (1 << (F.exp_bits - 1)) - 1;
  constexpr int e_min = 1 - bias;
  constexpr std::uint64_t max_finite = F.has_inf ? all_ones_exponent<F> - 1 : canonical_nan<F> - 1;
  const std::uint32_t sign = negative ? sign_bit<F> : 0;
  if (sig == 0) return sign;
  // Exponent of the result: the value's own, or e_min for subnormals, whose spacing is fixed.
  const int e = exp2 + static_cast<int>(std::bit_width(sig)) - 1;
  const int te = e < e_min ? e_min : e;
  // n = value / 2^(te - mant_bits), rounded: in [2^mant_bits, 2^(mant_bits+1)] or below for subnormals.
  const std::uint64_t n = shift_right_rne(sig, te - F.mant_bits - exp2);
  // Adding n (implicit bit included) to the exponent field lets a round-up carry into the exponent,
  // and gives the subnormal encoding when n < 2^mant_bits.
  const std::uint64_t bits = (static_cast<std::uint64_t>(te - e_min) << F.mant_bits) + n;
  // Overflow: infinity where the format has one, else saturation to the largest finite value.
  if (bits > max_finite) {
    return sign | (F.has_inf ? all_ones_exponent<F> : static_cast<std::uint32_t>(max_finite));
  }
  return sign | static_cast<std::uint32_t>(bits);
}

/// Infinity in format F; formats without one (e4m3fn) saturate to the largest finite value
/// (0x7E / 0xFE for e4m3fn), as torch 2.15's c10::Float8_e4m3fn does.
template <SmallFloatFormat F>
[[nodiscard]] constexpr std::uint32_t inf_bits(bool negative) noexcept {
  return (negative ? sign_bit<F> : 0) | (F.has_inf ? all_ones_exponent<F> : canonical_nan<F> - 1);
}

/// Integer types the small-float constructors accept: at most 64 bits. A 128-bit integer
/// (__int128, which std::integral accepts under -std=gnu++20) would be truncated to 64 bits by
/// from_integer, so it is rejected rather than silently converted wrongly; cast it to double first.
template <class I>
concept SmallFloatInteger = std::integral<I> && sizeof(I) <= sizeof(std::uint64_t);

template <SmallFloatFormat F>
[[nodiscard]] constexpr std::uint32_t from_float(float value) noexcept {
  const auto u = std::bit_cast<std::uint32_t>(value);
  const bool negative = (u >> 31) != 0;
  const std::uint32_t exp = (u >> 23) & 0xFF;
  const std::uint32_t man = u & 0x7FFFFF;
  if (exp == 0xFF) return man == 0 ? inf_bits<F>(negative) : nan_bits<F>(negative, man, 23);
  if (exp == 0) return round_to<F>(negative, man, -149);
  return round_to<F>(negative, man | 0x800000, static_cast<int>(exp) - 150);
}

/// Rounds the double directly (not through float, which would round twice).
template <SmallFloatFormat F>
[[nodiscard]] constexpr std::uint32_t from_double(double value) noexcept {
  const auto u = std::bit_cast<std::uint64_t>(value);
  const bool negative = (u >> 63) != 0;
  const auto exp = static_cast<std::uint32_t>((u >> 52) & 0x7FF);
  const std::uint64_t man = u & 0xFFFFFFFFFFFFF;
  if (exp == 0x7FF) return man == 0 ? inf_bits<F>(negative) : nan_bits<F>(negative, man, 52);
  if (exp == 0) return round_to<F>(negative, man, -1074);
  return round_to<F>(negative, man | (std::uint64_t{1} << 52), static_cast<int>(exp) - 1075);
}

template <SmallFloatFormat F, SmallFloatInteger I>
[[nodiscard]] constexpr std::uint32_t from_integer(I value) noexcept {
  const auto wide = static_cast<std::uint64_t>(value);  // modular: negation below handles INT64_MIN
  if constexpr (std::is_signed_v<I>) {
    if (value < 0) return round_to<F>(true, std::uint64_t{0} - wide, 0);
  }
  return round_to<F>(false, wide, 0);
}

/// Exact widening to float of a format with fewer exponent bits than float (every value is a float
/// normal). NaNs keep sign and payload and come out quiet, as hardware conversions do.
template <SmallFloatFormat F>
[[nodiscard]] constexpr float to_float(std::uint32_t bits) noexcept {
  static_assert(F.exp_bits < 8, "to_float<F> needs a format whose values are all float normals");
  constexpr int bias = (1 << (F.exp_bits - 1)) - 1;
  constexpr std::uint32_t exp_mask = (std::uint32_t{1} << F.exp_bits) - 1;
  constexpr std::uint32_t man_mask = (std::uint32_t{1} << F.mant_bits) - 1;
  const std::uint32_t sign = (bits & sign_bit<F>) != 0 ? 0x80000000u : 0;
  const std::uint32_t exp = (bits >> F.mant_bits) & exp_mask;
  const std::uint32_t man = bits & man_mask;
  std::uint32_t out = 0;
  if (exp == exp_mask && (F.has_inf || man == man_mask)) {
    out = 0x7F800000u | (man << (23 - F.mant_bits)) | (man != 0 ? 0x400000u : 0);
  } else if (exp == 0) {
    if (man != 0) {  // subnormal: man * 2^(1 - bias - mant_bits), renormalised for float
      const int width = static_cast<int>(std::bit_width(man));
      const auto float_exp = static_cast<std::uint32_t>(1 - bias - F.mant_bits + width - 1 + 127);
      out = (float_exp << 23) | ((man << (24 - width)) & 0x7FFFFFu);
    }
  } else {
    out = ((exp - bias + 127) << 23) | (man << (23 - F.mant_bits));
  }
  return std::bit_cast<float>(sign | out);
}

/// What std::numeric_limits says alike for half, bfloat16 and the float8 types.
struct SmallFloatLimits {
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_quiet_NaN = true;
  static constexpr std::float_denorm_style has_denorm = std::denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int radix = 2;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
};

}  // namespace detail

/// IEEE 754 binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; max 65504.
/// Trivially copyable and trivially default constructible (like float, `half h;` is uninitialised;
/// `half h{};` is +0).
class half {
 public:
  static constexpr detail::SmallFloatFormat format{5, 10, true, true};

  half() = default;
  /// Rounds to nearest, ties to even; overflow gives +-inf; NaN stays NaN (quiet).
  constexpr explicit half(float value) noexcept : bits_(narrow(detail::from_float<format>(value))) {}
  /// Rounds the double once (no double rounding through float).
  constexpr explicit half(double value) noexcept : bits_(narrow(detail::from_double<format>(value))) {}
  /// Exactly rounded from the integer (half(1) would otherwise be ambiguous between float and double).
  /// Integers wider than 64 bits (__int128) are not accepted: see detail::SmallFloatInteger.
  template <detail::SmallFloatInteger I>
  constexpr explicit half(I value) noexcept : bits_(narrow(detail::from_integer<format>(value))) {}

  /// The half whose bit pattern is `bits`.
  [[nodiscard]] static constexpr half from_bits(std::uint16_t bits) noexcept {
    half h;
    h.bits_ = bits;
    return h;
  }
  [[nodiscard]] constexpr std::uint16_t bits() const noexcept { return bits_; }

  /// Exact. Arithmetic and comparisons go through float.
  constexpr operator float() const noexcept { return detail::to_float<format>(bits_); }

 private:
  static constexpr std::uint16_t narrow(std::uint32_t bits) noexcept {
    return static_cast<std::uint16_t>(bits);
  }
  std::uint16_t bits_;
};

static_assert(sizeof(half) == 2 && alignof(half) == 2);
static_assert(std::is_trivially_copyable_v<half>);

}  // namespace accel

template <>
struct std::numeric_limits<accel::half> : accel::detail::SmallFloatLimits {
  static constexpr bool has_infinity = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr bool is_iec559 = true;
  static constexpr int digits = 11;
  static constexpr int digits10 = 3;
  static constexpr int max_digits10 = 5;
  static constexpr int min_exponent = -13;
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent = 16;
  static constexpr int max_exponent10 = 4;

  static constexpr accel::half min() noexcept { return accel::half::from_bits(0x0400); }
  static constexpr accel::half lowest() noexcept { return accel::half::from_bits(0xFBFF); }
  static constexpr accel::half max() noexcept { return accel::half::from_bits(0x7BFF); }
  static constexpr accel::half epsilon() noexcept { return accel::half::from_bits(0x1400); }
  static constexpr accel::half round_error() noexcept { return accel::half::from_bits(0x3800); }
  static constexpr accel::half infinity() noexcept { return accel::half::from_bits(0x7C00); }
  static constexpr accel::half quiet_NaN() noexcept { return accel::half::from_bits(0x7E00); }
  static constexpr accel::half signaling_NaN() noexcept { return accel::half::from_bits(0x7D00); }
  static constexpr accel::half denorm_min() noexcept { return accel::half::from_bits(0x0001); }
};
