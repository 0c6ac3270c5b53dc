// Tests of the host floating-point value types: accel::half, accel::bfloat16, accel::float8_e4m3,
// accel::float8_e5m2. Every conversion is checked against oracles written independently here:
//   - a nearest-value search over a table of every finite value of the format, decoded with ldexp;
//   - GCC's _Float16 (IEEE binary16 with round to nearest even) for half, where the compiler has it;
//   - the classic integer add-and-shift rounding for bfloat16;
// over every bit pattern of the small type and a prime-stride sweep of all float bit patterns.
#include <accel/core/bfloat16.hpp>
#include <accel/core/float8.hpp>
#include <accel/core/half.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace {

constexpr std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }
constexpr float float_of(std::uint32_t u) { return std::bit_cast<float>(u); }

/// A small float format as the oracle sees it, independently of accel::detail.
struct Layout {
  int exp_bits;
  int mant_bits;
  bool has_inf;  // false: "fn" layout, only the all-ones pattern is NaN
};

constexpr Layout half_layout{5, 10, true};
constexpr Layout bf16_layout{8, 7, true};
constexpr Layout e4m3_layout{4, 3, false};
constexpr Layout e5m2_layout{5, 2, true};

bool is_nan_pattern(const Layout& l, std::uint32_t bits) {
  const std::uint32_t exp = (bits >> l.mant_bits) & ((1u << l.exp_bits) - 1);
  const std::uint32_t man = bits & ((1u << l.mant_bits) - 1);
  if (exp != (1u << l.exp_bits) - 1) return false;
  return l.has_inf ? man != 0 : man == (1u << l.mant_bits) - 1;
}

/// The value of a non-NaN pattern, by the textbook formula.
double decode(const Layout& l, std::uint32_t bits) {
  const int bias = (1 << (l.exp_bits - 1)) - 1;
  const std::uint32_t exp = (bits >> l.mant_bits) & ((1u << l.exp_bits) - 1);
  const std::uint32_t man = bits & ((1u << l.mant_bits) - 1);
  const double sign = (bits >> (l.exp_bits + l.mant_bits)) & 1 ? -1.0 : 1.0;
  if (l.has_inf && exp == (1u << l.exp_bits) - 1) return sign * std::numeric_limits<double>::infinity();
  if (exp == 0) return sign * std::ldexp(static_cast<double>(man), 1 - bias - l.mant_bits);
  return sign * std::ldexp(static_cast<double>(man + (1u << l.mant_bits)),
                           static_cast<int>(exp) - bias - l.mant_bits);
}

/// Round to nearest, ties to even, by searching the table of all non-negative finite values.
class NearestOracle {
 public:
  explicit NearestOracle(Layout l) {
    const std::uint32_t sign_bit = 1u << (l.exp_bits + l.mant_bits);
    std::uint32_t b = 0;
    for (; b < sign_bit && !is_nan_pattern(l, b) && !std::isinf(decode(l, b)); ++b) {
      table_.push_back({decode(l, b), b});
    }
    // The first value past the largest finite one: rounding to it means overflow.
    const std::uint32_t top = b - 1;
    const double spacing = decode(l, top) - decode(l, top - 1);
    table_.push_back({decode(l, top) + spacing, b});
    // inf, or for the fn format (no inf) the largest finite value: torch 2.15 saturates.
    overflow_ = l.has_inf ? b : top;
    sign_bit_ = sign_bit;
  }

  /// Bits of the rounded value of x (not NaN).
  std::uint32_t operator()(double x) const {
    const std::uint32_t sign = std::signbit(x) ? sign_bit_ : 0;
    const double a = std::fabs(x);
    if (a >= table_.back().value) return sign | overflow_;
    const auto hi = std::upper_bound(table_.begin(), table_.end(), a,
                                     [](double v, const Entry& e) { return v < e.value; });
    const auto lo = hi - 1;
    const double mid = (lo->value + hi->value) / 2;  // exact: both have few significant bits
    const Entry* pick = &*lo;
    if (a > mid || (a == mid && (lo->bits & 1) != 0)) pick = &*hi;
    if (pick == &table_.back()) return sign | overflow_;
    return sign | pick->bits;
  }

 private:
  struct Entry {
    double value;
    std::uint32_t bits;
  };
  std::vector<Entry> table_;
  std::uint32_t overflow_ = 0;
  std::uint32_t sign_bit_ = 0;
};

/// Float inputs to sweep: every float bit pattern at a prime stride, plus the given specials.
std::vector<float> sweep_floats(const std::vector<float>& specials) {
  std::vector<float> out;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFu; u += 997) {
    out.push_back(float_of(static_cast<std::uint32_t>(u)));
  }
  for (float f : specials) {
    out.push_back(f);
    out.push_back(-f);
    out.push_back(std::nextafter(f, 0.0f));
    out.push_back(std::nextafter(f, std::numeric_limits<float>::infinity()));
  }
  return out;
}

/// Every value of the format and every midpoint between neighbours: the rounding boundaries.
std::vector<float> boundaries(const Layout& l) {
  std::vector<float> out;
  const std::uint32_t sign_bit = 1u << (l.exp_bits + l.mant_bits);
  for (std::uint32_t b = 0; b + 1 < sign_bit; ++b) {
    if (is_nan_pattern(l, b) || is_nan_pattern(l, b + 1)) continue;
    const double lo = decode(l, b), hi = decode(l, b + 1);
    out.push_back(static_cast<float>(lo));
    if (!std::isinf(hi)) out.push_back(static_cast<float>((lo + hi) / 2));
  }
  return out;
}

template <class T>
std::uint32_t bits_u32(T v) {
  return v.bits();
}

/// Counts inputs where T(f) differs from the expected bits; reports the first few.
template <class T, class Expected>
void check_against(const std::vector<float>& inputs, Expected expected, const char* what) {
  std::size_t mismatches = 0;
  for (float f : inputs) {
    const std::uint32_t want = expected(f);
    const std::uint32_t got = bits_u32(T(f));
    if (got != want && ++mismatches <= 5) {
      FAIL_CHECK(what << ": input 0x" << std::hex << bits_of(f) << " gave 0x" << got << ", want 0x" << want);
    }
  }
  CHECK_MESSAGE(mismatches == 0, what << ": " << mismatches << " of " << inputs.size() << " differ");
}

/// Non-NaN patterns survive a round trip through float, and widen to the textbook value;
/// NaN patterns widen to a NaN of the same sign.
template <class T, class Bits>
void check_exhaustive_round_trip(const Layout& l, std::uint32_t nan_quiet_bit, bool keeps_payload) {
  const std::uint32_t count = 2u << (l.exp_bits + l.mant_bits);
  std::size_t bad = 0;
  for (std::uint32_t b = 0; b < count; ++b) {
    const T x = T::from_bits(static_cast<Bits>(b));
    const float f = x;
    const bool negative = (b >> (l.exp_bits + l.mant_bits)) != 0;
    if (is_nan_pattern(l, b)) {
      const std::uint32_t back = T(f).bits();
      const std::uint32_t want = keeps_payload ? (b | nan_quiet_bit) : (negative ? count - 1 : count / 2 - 1);
      if (!std::isnan(f) || std::signbit(f) != negative || (bits_of(f) & 0x400000u) == 0 || back != want) {
        ++bad;
      }
      continue;
    }
    const double v = decode(l, b);
    if (static_cast<double>(f) != v || std::signbit(f) != negative || T(f).bits() != b) {
      if (++bad <= 5) FAIL_CHECK("pattern 0x" << std::hex << b << " widened to " << f);
    }
  }
  CHECK(bad == 0);
}

}  // namespace

// ---- half ---------------------------------------------------------------------------------------

static_assert(accel::half(1.0f).bits() == 0x3C00);
static_assert(accel::half(-2.0).bits() == 0xC000);
static_assert(static_cast<float>(accel::half::from_bits(0x3555)) == 0x1.554p-2f);
static_assert(std::is_trivially_default_constructible_v<accel::half>);

TEST_CASE("half: known answers") {
  CHECK(accel::half(1.0f).bits() == 0x3C00);
  CHECK(accel::half(-2.0f).bits() == 0xC000);
  CHECK(accel::half(65504.0f).bits() == 0x7BFF);
  CHECK(accel::half(1.0f / 3.0f).bits() == 0x3555);
  CHECK(accel::half(0.1f).bits() == 0x2E66);
  CHECK(accel::half(0.0f).bits() == 0x0000);
  CHECK(accel::half(-0.0f).bits() == 0x8000);
  CHECK(accel::half(65519.0f).bits() == 0x7BFF);  // just below the halfway point to 65536
  CHECK(accel::half(65520.0f).bits() == 0x7C00);  // halfway, ties to even: inf
  CHECK(accel::half(-1e10f).bits() == 0xFC00);
  CHECK(accel::half(std::numeric_limits<float>::infinity()).bits() == 0x7C00);
  CHECK(accel::half(0x1p-14f).bits() == 0x0400);             // smallest normal
  CHECK(accel::half(0x1p-14f - 0x1p-24f).bits() == 0x03FF);  // largest subnormal
  CHECK(accel::half(0x1p-24f).bits() == 0x0001);             // smallest subnormal
  CHECK(accel::half(0x1p-25f).bits() == 0x0000);             // half of it: tie, to even (zero)
  CHECK(accel::half(std::nextafter(0x1p-25f, 1.0f)).bits() == 0x0001);
  CHECK(accel::half(0x3p-25f).bits() == 0x0002);         // tie between 1 and 2 ulps: to even
  CHECK(accel::half(1.0f + 0x1p-11f).bits() == 0x3C00);  // tie: to even
  CHECK(accel::half(1.0f + 0x3p-11f).bits() == 0x3C02);  // tie: to even
  CHECK(accel::half(1e-8f).bits() == 0x0000);
  CHECK(static_cast<float>(accel::half::from_bits(0x7BFF)) == 65504.0f);
  CHECK(static_cast<float>(accel::half::from_bits(0x0001)) == 0x1p-24f);
  CHECK(std::isinf(static_cast<float>(accel::half::from_bits(0xFC00))));
}

TEST_CASE("half: NaN stays NaN, keeps its sign and top payload, comes out quiet") {
  CHECK(accel::half(std::numeric_limits<float>::quiet_NaN()).bits() == 0x7E00);
  CHECK(accel::half(float_of(0x7F800001)).bits() == 0x7E00);  // signalling, payload below half's bits
  CHECK(accel::half(float_of(0xFFA12345)).bits() == 0xFF09);
  CHECK(accel::half(std::numeric_limits<double>::quiet_NaN()).bits() == 0x7E00);
  const float widened = accel::half::from_bits(0x7C01);  // signalling NaN
  CHECK(bits_of(widened) == 0x7FC02000);
}

TEST_CASE("half: exhaustive round trip of all 65536 patterns") {
  check_exhaustive_round_trip<accel::half, std::uint16_t>(half_layout, 0x0200, true);
}

TEST_CASE("half: float -> half matches the nearest-value oracle") {
  const NearestOracle oracle(half_layout);
  auto inputs = sweep_floats({65504.0f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1p-14f, 1.0f});
  const auto edges = boundaries(half_layout);
  inputs.insert(inputs.end(), edges.begin(), edges.end());
  check_against<accel::half>(
      inputs,
      [&](float f) {
        return std::isnan(f) ? ((bits_of(f) >> 16) & 0x8000) | 0x7E00 | ((bits_of(f) >> 13) & 0x3FF)
                             : oracle(f);
      },
      "half vs nearest");
}

#if defined(__FLT16_MAX__)
TEST_CASE("half: agrees bit for bit with the compiler's _Float16") {
  auto inputs = sweep_floats({65504.0f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1p-14f});
  const auto edges = boundaries(half_layout);
  inputs.insert(inputs.end(), edges.begin(), edges.end());
  check_against<accel::half>(
      inputs,
      [](float f) {
        volatile float in = f;  // keep the conversion at run time
        return static_cast<std::uint32_t>(std::bit_cast<std::uint16_t>(static_cast<_Float16>(in)));
      },
      "half vs _Float16");

  std::size_t bad = 0;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {  // widening, NaNs included
    const auto h = std::bit_cast<_Float16>(static_cast<std::uint16_t>(b));
    bad += bits_of(static_cast<float>(h)) != bits_of(accel::half::from_bits(static_cast<std::uint16_t>(b)));
  }
  CHECK(bad == 0);

  // double -> half rounds once. A pseudo-random walk over double bit patterns near half's range.
  std::uint64_t state = 0x9E3779B97F4A7C15u;
  bad = 0;
  for (int i = 0; i < 200000; ++i) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    const std::uint64_t exp = 1023 - 30 + (state >> 58) % 50;  // 2^-30 .. 2^19
    const double d = std::bit_cast<double>((state & 0x800FFFFFFFFFFFFFu) | (exp << 52));
    volatile double in = d;
    bad += std::bit_cast<std::uint16_t>(static_cast<_Float16>(in)) != accel::half(d).bits();
  }
  CHECK(bad == 0);
}
#endif

TEST_CASE("half: double and integer inputs are rounded once") {
  // 1 + 2^-11 + 2^-40 is above the midpoint 1 + 2^-11; through float it would become the tie.
  CHECK(accel::half(1.0 + 0x1p-11 + 0x1p-40).bits() == 0x3C01);
  CHECK(accel::half(static_cast<float>(1.0 + 0x1p-11 + 0x1p-40)).bits() == 0x3C00);
  CHECK(accel::half(65519.99999).bits() == 0x7BFF);
  CHECK(accel::half(1e300).bits() == 0x7C00);
  CHECK(accel::half(-1e-300).bits() == 0x8000);
  CHECK(accel::half(0x1p-1074).bits() == 0x0000);  // double's smallest subnormal
  CHECK(accel::half(1).bits() == 0x3C00);
  CHECK(accel::half(-3).bits() == 0xC200);
  CHECK(accel::half(2049).bits() == 0x6800);  // 2048 + 1: tie, to even
  CHECK(accel::half(2051).bits() == 0x6802);  // 2052
  CHECK(accel::half(65520u).bits() == 0x7C00);
  CHECK(accel::half(std::numeric_limits<std::int64_t>::min()).bits() == 0xFC00);
  CHECK(accel::half(true).bits() == 0x3C00);
}

// A 128-bit integer (std::integral under -std=gnu++20) used to be truncated to its low 64 bits:
// half(__int128(1) << 64) was +0. The integer constructors take at most 64 bits, so it does not
// convert at all (cast it to double or float first).
template <class T, class I>
concept constructible_from_integer = requires(I i) { T(i); };
static_assert(constructible_from_integer<accel::half, std::int64_t>);
static_assert(constructible_from_integer<accel::half, std::uint64_t>);
static_assert(constructible_from_integer<accel::bfloat16, long long>);
static_assert(constructible_from_integer<accel::float8_e4m3, unsigned long long>);
#if defined(__SIZEOF_INT128__)
__extension__ using int128 = __int128;
__extension__ using uint128 = unsigned __int128;
static_assert(!constructible_from_integer<accel::half, int128>);
static_assert(!constructible_from_integer<accel::half, uint128>);
static_assert(!constructible_from_integer<accel::bfloat16, int128>);
static_assert(!constructible_from_integer<accel::bfloat16, uint128>);
static_assert(!constructible_from_integer<accel::float8_e4m3, int128>);
static_assert(!constructible_from_integer<accel::float8_e5m2, uint128>);
static_assert(!std::is_constructible_v<accel::half, int128>);
// The supported route: through double, which rounds 2^64 exactly.
static_assert(accel::half(static_cast<double>(int128{1} << 64)).bits() == 0x7C00);
static_assert(accel::bfloat16(static_cast<double>(int128{1} << 64)).bits() == 0x5F80);
#endif

// What the header comments say: half + half is a float (c10::Half's operators would give a Half),
// and bfloat16 -> float appends 16 zero bits except that a signalling NaN is made quiet.
static_assert(std::is_same_v<decltype(accel::half(1.0f) + accel::half(2.0f)), float>);
static_assert(std::is_same_v<decltype(accel::bfloat16(1.0f) * accel::bfloat16(2.0f)), float>);
static_assert(std::bit_cast<std::uint32_t>(static_cast<float>(accel::bfloat16::from_bits(0x7F81))) ==
              0x7FC10000u);
static_assert(std::bit_cast<std::uint32_t>(static_cast<float>(accel::bfloat16::from_bits(0x3F81))) ==
              0x3F810000u);

TEST_CASE("half: arithmetic, comparison and limits go through float") {
  const accel::half a(1.5f), b(2.25f);
  CHECK(a + b == 3.75f);
  CHECK(a < b);
  CHECK(accel::half(std::nanf("")) != accel::half(std::nanf("")));
  CHECK(static_cast<double>(a) == 1.5);
  std::ostringstream os;
  os << a;
  CHECK(os.str() == "1.5");
  using L = std::numeric_limits<accel::half>;
  CHECK(static_cast<float>(L::max()) == 65504.0f);
  CHECK(static_cast<float>(L::lowest()) == -65504.0f);
  CHECK(static_cast<float>(L::min()) == 0x1p-14f);
  CHECK(static_cast<float>(L::denorm_min()) == 0x1p-24f);
  CHECK(static_cast<float>(L::epsilon()) == 0x1p-10f);
  CHECK(std::isinf(static_cast<float>(L::infinity())));
  CHECK(std::isnan(static_cast<float>(L::quiet_NaN())));
  CHECK(L::digits == 11);
  accel::half z{};
  CHECK(z.bits() == 0);
}

// ---- bfloat16 -----------------------------------------------------------------------------------

/// The usual integer rounding: add 0x7FFF plus the kept LSB, then truncate. NaNs: top half, quiet.
static std::uint32_t bf16_integer_oracle(float f) {
  const std::uint32_t u = bits_of(f);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return (u >> 16) | 0x40;
  return (u + 0x7FFF + ((u >> 16) & 1)) >> 16;
}

static_assert(accel::bfloat16(1.0f).bits() == 0x3F80);
static_assert(static_cast<float>(accel::bfloat16::from_bits(0x4049)) == 3.140625f);

TEST_CASE("bfloat16: known answers") {
  CHECK(accel::bfloat16(1.0f).bits() == 0x3F80);
  CHECK(accel::bfloat16(3.140625f).bits() == 0x4049);
  CHECK(accel::bfloat16(3.14159265f).bits() == 0x4049);
  CHECK(accel::bfloat16(float_of(0x3F808000)).bits() == 0x3F80);  // tie, kept LSB even: down
  CHECK(accel::bfloat16(float_of(0x3F818000)).bits() == 0x3F82);  // tie, kept LSB odd: up
  CHECK(accel::bfloat16(float_of(0x3F808001)).bits() == 0x3F81);
  CHECK(accel::bfloat16(-2.0f).bits() == 0xC000);
  CHECK(accel::bfloat16(-0.0f).bits() == 0x8000);
  CHECK(accel::bfloat16(std::numeric_limits<float>::max()).bits() == 0x7F80);  // rounds up to inf
  CHECK(accel::bfloat16(float_of(0x7F7F7FFF)).bits() == 0x7F7F);
  CHECK(accel::bfloat16(float_of(0x00008000)).bits() == 0x0000);  // subnormal tie: to even
  CHECK(accel::bfloat16(float_of(0x00018000)).bits() == 0x0002);
  CHECK(accel::bfloat16(float_of(0x00000001)).bits() == 0x0000);
  CHECK(accel::bfloat16(-std::numeric_limits<float>::infinity()).bits() == 0xFF80);
  CHECK(accel::bfloat16(std::numeric_limits<float>::quiet_NaN()).bits() == 0x7FC0);
  CHECK(accel::bfloat16(float_of(0x7F800001)).bits() == 0x7FC0);     // signalling: quieted
  CHECK(accel::bfloat16(float_of(0xFFA12345)).bits() == 0xFFE1);     // sign and top payload kept
  CHECK(bits_of(accel::bfloat16::from_bits(0x7F81)) == 0x7FC10000);  // widening quiets
  // Integers and doubles round once: 2^60 + 2^52 + 1 is just above a tie; via double it is the tie.
  CHECK(accel::bfloat16((std::int64_t{1} << 60) + (std::int64_t{1} << 52) + 1).bits() == 0x5D81);
  CHECK(accel::bfloat16(1.0 + 0x1p-8 + 0x1p-40).bits() == 0x3F81);
  CHECK(accel::bfloat16(1e39).bits() == 0x7F80);
  CHECK(accel::bfloat16(7).bits() == 0x40E0);
}

TEST_CASE("bfloat16: exhaustive round trip of all 65536 patterns") {
  check_exhaustive_round_trip<accel::bfloat16, std::uint16_t>(bf16_layout, 0x0040, true);
  std::size_t bad = 0;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    if (is_nan_pattern(bf16_layout, b)) continue;
    bad += bits_of(accel::bfloat16::from_bits(static_cast<std::uint16_t>(b))) != b << 16;
  }
  CHECK(bad == 0);
}

TEST_CASE("bfloat16: float -> bfloat16 matches the integer and nearest-value oracles") {
  auto inputs = sweep_floats({std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                              std::numeric_limits<float>::denorm_min(), 1.0f});
  const auto edges = boundaries(bf16_layout);
  inputs.insert(inputs.end(), edges.begin(), edges.end());
  check_against<accel::bfloat16>(inputs, bf16_integer_oracle, "bfloat16 vs integer rounding");
  const NearestOracle oracle(bf16_layout);
  std::vector<float> finite;
  std::copy_if(inputs.begin(), inputs.end(), std::back_inserter(finite),
               [](float f) { return !std::isnan(f); });
  check_against<accel::bfloat16>(
      finite, [&](float f) { return oracle(f); }, "bfloat16 vs nearest");
}

// ---- float8 -------------------------------------------------------------------------------------

static_assert(accel::float8_e4m3(448.0f).bits() == 0x7E);
static_assert(accel::float8_e4m3(480.0f).bits() == 0x7E);  // overflow saturates (torch 2.15)
static_assert(accel::float8_e4m3(-std::numeric_limits<float>::infinity()).bits() == 0xFE);
static_assert(accel::float8_e5m2(1.0f).bits() == 0x3C);

TEST_CASE("float8_e4m3: known answers, torch's float8_e4m3fn") {
  using F = accel::float8_e4m3;
  CHECK(F(448.0f).bits() == 0x7E);
  CHECK(F(1.0f).bits() == 0x38);
  CHECK(F(-2.0f).bits() == 0xC0);
  CHECK(F(240.0f).bits() == 0x77);
  CHECK(F(0.1f).bits() == 0x1D);
  CHECK(F(464.0f).bits() == 0x7E);                          // tie between 448 and 480: to even
  // Past the rounding boundary, and +-inf (there is none): saturate to +-448, as torch 2.15's c10
  // Float8_e4m3fn does (older torch gave NaN).
  CHECK(F(std::nextafter(464.0f, 480.0f)).bits() == 0x7E);  // 464.00003f, 0x43E80001
  CHECK(F(std::bit_cast<float>(0x43E80001u)).bits() == 0x7E);
  CHECK(F(-std::bit_cast<float>(0x43E80001u)).bits() == 0xFE);
  CHECK(F(480.0f).bits() == 0x7E);
  CHECK(F(1e6f).bits() == 0x7E);
  CHECK(F(-1e6f).bits() == 0xFE);
  CHECK(F(std::numeric_limits<float>::max()).bits() == 0x7E);
  CHECK(F(std::numeric_limits<float>::infinity()).bits() == 0x7E);
  CHECK(F(-std::numeric_limits<float>::infinity()).bits() == 0xFE);
  CHECK(F(1e300).bits() == 0x7E);
  CHECK(F(std::numeric_limits<double>::infinity()).bits() == 0x7E);
  CHECK(F(-std::numeric_limits<double>::infinity()).bits() == 0xFE);
  CHECK(F(1000).bits() == 0x7E);
  CHECK(F(std::numeric_limits<std::int64_t>::min()).bits() == 0xFE);
  CHECK(F(std::numeric_limits<float>::quiet_NaN()).bits() == 0x7F);
  CHECK(F(-std::numeric_limits<float>::quiet_NaN()).bits() == 0xFF);
  CHECK(F(0x1p-9f).bits() == 0x01);   // smallest subnormal
  CHECK(F(0x1p-10f).bits() == 0x00);  // half of it: tie, to even
  CHECK(F(0x3p-10f).bits() == 0x02);
  CHECK(F(0x1p-6f).bits() == 0x08);  // smallest normal
  CHECK(F(-0.0f).bits() == 0x80);
  CHECK(F(448.0).bits() == 0x7E);
  CHECK(F(-448).bits() == 0xFE);
  CHECK(static_cast<float>(F::from_bits(0x7E)) == 448.0f);
  CHECK(static_cast<float>(F::from_bits(0x78)) == 256.0f);  // exponent field 15 is a normal binade
  CHECK(std::isnan(static_cast<float>(F::from_bits(0x7F))));
  CHECK(std::signbit(static_cast<float>(F::from_bits(0xFF))));
  CHECK(static_cast<float>(std::numeric_limits<F>::max()) == 448.0f);
  CHECK(static_cast<float>(std::numeric_limits<F>::denorm_min()) == 0x1p-9f);
  CHECK(static_cast<float>(std::numeric_limits<F>::epsilon()) == 0.125f);
  CHECK(!std::numeric_limits<F>::has_infinity);
}

TEST_CASE("float8_e5m2: known answers, torch's float8_e5m2") {
  using F = accel::float8_e5m2;
  CHECK(F(1.0f).bits() == 0x3C);
  CHECK(F(57344.0f).bits() == 0x7B);
  CHECK(F(std::numeric_limits<float>::infinity()).bits() == 0x7C);
  CHECK(F(-std::numeric_limits<float>::infinity()).bits() == 0xFC);
  CHECK(F(61440.0f).bits() == 0x7C);  // tie between 57344 (odd) and 65536: to even, inf
  CHECK(F(std::nextafter(61440.0f, 0.0f)).bits() == 0x7B);
  CHECK(F(0.1f).bits() == 0x2E);
  CHECK(F(-2.0f).bits() == 0xC0);
  CHECK(F(0x1p-16f).bits() == 0x01);
  CHECK(F(0x1p-17f).bits() == 0x00);
  CHECK(F(std::numeric_limits<float>::quiet_NaN()).bits() == 0x7F);
  CHECK(F(float_of(0xFF800001)).bits() == 0xFF);
  CHECK(F(1e300).bits() == 0x7C);
  CHECK(F(3).bits() == 0x42);
  CHECK(static_cast<float>(F::from_bits(0x7B)) == 57344.0f);
  CHECK(std::isinf(static_cast<float>(F::from_bits(0x7C))));
  CHECK(std::isnan(static_cast<float>(F::from_bits(0x7D))));
  CHECK(static_cast<float>(std::numeric_limits<F>::max()) == 57344.0f);
  CHECK(static_cast<float>(std::numeric_limits<F>::min()) == 0x1p-14f);
}

TEST_CASE("float8: exhaustive round trips of all 256 patterns") {
  check_exhaustive_round_trip<accel::float8_e4m3, std::uint8_t>(e4m3_layout, 0, false);
  check_exhaustive_round_trip<accel::float8_e5m2, std::uint8_t>(e5m2_layout, 0, false);
}

TEST_CASE("float8: float -> fp8 matches the nearest-value oracle") {
  const auto nan_or = [](const NearestOracle& oracle) {
    return [&oracle](float f) { return std::isnan(f) ? (std::signbit(f) ? 0xFFu : 0x7Fu) : oracle(f); };
  };
  const NearestOracle e4m3(e4m3_layout);
  auto inputs = sweep_floats({448.0f, 464.0f, 480.0f, 0x1p-9f, 0x1p-10f, 0x1p-6f});
  auto edges = boundaries(e4m3_layout);
  inputs.insert(inputs.end(), edges.begin(), edges.end());
  check_against<accel::float8_e4m3>(inputs, nan_or(e4m3), "e4m3 vs nearest");

  const NearestOracle e5m2(e5m2_layout);
  inputs = sweep_floats({57344.0f, 61440.0f, 65536.0f, 0x1p-16f, 0x1p-17f, 0x1p-14f});
  edges = boundaries(e5m2_layout);
  inputs.insert(inputs.end(), edges.begin(), edges.end());
  check_against<accel::float8_e5m2>(inputs, nan_or(e5m2), "e5m2 vs nearest");
}

// ---- std::numeric_limits ------------------------------------------------------------------------

namespace {

/// What std::numeric_limits must say of a format, each member derived as the standard defines it
/// ([numeric.limits.members]); the derivation reproduces numeric_limits<float> and <double>.
struct ExpectedLimits {
  int digits, digits10, max_digits10, min_exponent, min_exponent10, max_exponent, max_exponent10;
  double min, max, denorm_min, epsilon;
};

ExpectedLimits expected_limits(const Layout& l) {
  const int bias = (1 << (l.exp_bits - 1)) - 1;
  const int e_min = 1 - bias;
  const int e_max = l.has_inf ? bias : bias + 1;  // "fn": the all-ones exponent is a binade of finite values
  ExpectedLimits x{};
  x.digits = l.mant_bits + 1;
  x.digits10 = static_cast<int>(std::floor((x.digits - 1) * std::log10(2.0)));
  x.max_digits10 = static_cast<int>(std::ceil(1 + x.digits * std::log10(2.0)));
  x.min_exponent = e_min + 1;  // "one more than the most negative exponent of a normal": 2^(e - 1)
  x.max_exponent = e_max + 1;
  x.min = std::ldexp(1.0, e_min);
  x.denorm_min = std::ldexp(1.0, e_min - l.mant_bits);
  x.epsilon = std::ldexp(1.0, -l.mant_bits);
  // The largest significand, in units of the last place: all ones, or one less where all ones is NaN.
  const std::uint64_t top = (std::uint64_t{1} << (l.mant_bits + 1)) - (l.has_inf ? 1 : 2);
  x.max = std::ldexp(static_cast<double>(top), e_max - l.mant_bits);
  x.min_exponent10 = static_cast<int>(std::ceil(std::log10(x.min)));
  x.max_exponent10 = static_cast<int>(std::floor(std::log10(x.max)));
  return x;
}

template <class T>
void check_matches(const Layout& l) {
  using L = std::numeric_limits<T>;
  const ExpectedLimits x = expected_limits(l);
  CHECK(L::is_specialized);
  CHECK(L::digits == x.digits);
  CHECK(L::digits10 == x.digits10);
  CHECK(L::max_digits10 == x.max_digits10);
  CHECK(L::min_exponent == x.min_exponent);
  CHECK(L::min_exponent10 == x.min_exponent10);
  CHECK(L::max_exponent == x.max_exponent);
  CHECK(L::max_exponent10 == x.max_exponent10);
  CHECK(static_cast<double>(L::min()) == x.min);
  CHECK(static_cast<double>(L::max()) == x.max);
  CHECK(static_cast<double>(L::lowest()) == -x.max);
  CHECK(static_cast<double>(L::denorm_min()) == x.denorm_min);
  CHECK(static_cast<double>(L::epsilon()) == x.epsilon);
  CHECK(static_cast<double>(L::round_error()) == 0.5);  // round to nearest: half an ulp
}

/// The members only the small types have: their NaN and infinity patterns and the fixed answers.
template <class T>
void check_small_float_limits(const Layout& l, bool iec559) {
  using L = std::numeric_limits<T>;
  check_matches<T>(l);
  const auto sign_of = [&](std::uint32_t b) { return (b >> (l.exp_bits + l.mant_bits)) & 1; };
  const auto quiet_bit = [&](std::uint32_t b) { return (b >> (l.mant_bits - 1)) & 1; };
  CHECK(L::has_infinity == l.has_inf);
  if (l.has_inf) {
    CHECK(static_cast<float>(L::infinity()) == std::numeric_limits<float>::infinity());
  } else {
    CHECK(L::infinity().bits() == 0);  // the standard's T() where there is none
  }
  const std::uint32_t quiet = L::quiet_NaN().bits();
  CHECK(L::has_quiet_NaN);
  CHECK(is_nan_pattern(l, quiet));
  CHECK(sign_of(quiet) == 0);
  CHECK(quiet_bit(quiet) == 1);
  // A signalling NaN needs a NaN pattern with the quiet bit clear: only the IEEE layouts have one.
  CHECK(L::has_signaling_NaN == l.has_inf);
  const std::uint32_t signaling = L::signaling_NaN().bits();
  if (l.has_inf) {
    CHECK(is_nan_pattern(l, signaling));
    CHECK(sign_of(signaling) == 0);
    CHECK(quiet_bit(signaling) == 0);
    CHECK(std::isnan(static_cast<float>(L::signaling_NaN())));
  } else {
    CHECK(signaling == 0);
  }
  CHECK(L::is_iec559 == iec559);
  CHECK(L::is_signed);
  CHECK(!L::is_integer);
  CHECK(!L::is_exact);
  CHECK(L::is_bounded);
  CHECK(!L::is_modulo);
  CHECK(L::radix == 2);
  CHECK(L::has_denorm == std::denorm_present);
  CHECK(L::round_style == std::round_to_nearest);
  // The conversions raise no floating-point flags: nothing traps, and tininess and denormalisation
  // loss are reported as float's are on x86 (after rounding; no loss distinguished).
  CHECK(!L::traps);
  CHECK(!L::tinyness_before);
  CHECK(!L::has_denorm_loss);
}

}  // namespace

TEST_CASE("numeric_limits: the derivation reproduces float's and double's") {
  check_matches<float>(Layout{8, 23, true});
  check_matches<double>(Layout{11, 52, true});
}

TEST_CASE("numeric_limits: half, bfloat16 and the float8 types say what their formats are") {
  SUBCASE("half") { check_small_float_limits<accel::half>(half_layout, true); }
  SUBCASE("bfloat16") { check_small_float_limits<accel::bfloat16>(bf16_layout, false); }
  SUBCASE("float8_e4m3") { check_small_float_limits<accel::float8_e4m3>(e4m3_layout, false); }
  SUBCASE("float8_e5m2") { check_small_float_limits<accel::float8_e5m2>(e5m2_layout, false); }
}
