// accel/core/dtype.hpp — accel::Dtype: the element types accel moves and computes on.
//
// Names are torch's: name(Dtype::float16) is "float16", as in str(torch.float16) minus "torch.".
// parse_dtype() accepts those names, torch's aliases ("half", "float", "long", ...), the short forms
// DeepSpeed configs use ("fp16", "bf16", "fp32") and an optional "torch." prefix, so the string a
// Python caller prints can be read back. Matching is exact and case-sensitive; anything else throws
// InvalidArgumentError quoting the input and listing the valid names.
//
// The enumerator for bool is Dtype::boolean (`bool` is a keyword); its name is "bool".
// The enumerator for torch's float8_e4m3fn is Dtype::float8_e4m3; its name is "float8_e4m3fn".
#pragma once

#include <accel/core/bfloat16.hpp>
#include <accel/core/error.hpp>
#include <accel/core/float8.hpp>
#include <accel/core/half.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

namespace accel {

/// Element type of a buffer. The values are stable: they may be stored and sent between processes.
enum class Dtype : std::uint8_t {
  float32,
  float16,
  bfloat16,
  float64,
  int8,
  uint8,
  int32,
  int64,
  boolean,      ///< C++ bool, one byte; named "bool"
  float8_e4m3,  ///< torch.float8_e4m3fn
  float8_e5m2,
};

/// Every Dtype, in enumerator order.
inline constexpr std::array<Dtype, 11> all_dtypes{
    Dtype::float32, Dtype::float16, Dtype::bfloat16, Dtype::float64,     Dtype::int8,       Dtype::uint8,
    Dtype::int32,   Dtype::int64,   Dtype::boolean,  Dtype::float8_e4m3, Dtype::float8_e5m2};

namespace detail {
/// The C++ type of each Dtype, in enumerator order: the one table dtype_of and cpp_type_t read.
using DtypeCppTypes = std::tuple<float, half, bfloat16, double, std::int8_t, std::uint8_t, std::int32_t,
                                 std::int64_t, bool, float8_e4m3, float8_e5m2>;

template <class T, class Types>
struct DtypeIndex;
template <class T, class... Ts>
struct DtypeIndex<T, std::tuple<Ts...>> {
  static constexpr std::size_t value = [] {
    constexpr std::array<bool, sizeof...(Ts)> same{std::is_same_v<T, Ts>...};
    std::size_t i = 0;
    while (i < same.size() && !same[i]) ++i;
    return i;  // == sizeof...(Ts) when T is not in the list
  }();
};

/// The type T is looked up as: cv-qualifiers dropped, and every standard signed integer type
/// (signed char, short, int, long, long long) replaced by the fixed-width std::intN_t of its size,
/// so that long and long long both find int64 whichever of them std::int64_t names. Sizes without a
/// Dtype (short, __int128) and char, wchar_t, charN_t stay as they are and have none.
template <class T>
struct DtypeKey {
  using U = std::remove_cv_t<T>;
  static constexpr bool standard_signed =
      std::is_same_v<U, signed char> || std::is_same_v<U, short> || std::is_same_v<U, int> ||
      std::is_same_v<U, long> || std::is_same_v<U, long long>;
  using type = std::conditional_t<
      standard_signed && sizeof(U) == 8, std::int64_t,
      std::conditional_t<standard_signed && sizeof(U) == 4, std::int32_t,
                         std::conditional_t<standard_signed && sizeof(U) == 1, std::int8_t, U>>>;
};
template <class T>
using dtype_key_t = typename DtypeKey<T>::type;
}  // namespace detail

/// True for the C++ types that have a Dtype (cv-qualifiers ignored; long and long long alike).
template <class T>
concept HasDtype = detail::DtypeIndex<detail::dtype_key_t<T>, detail::DtypeCppTypes>::value <
                   std::tuple_size_v<detail::DtypeCppTypes>;

namespace detail {
template <class T>
consteval Dtype dtype_of_impl() {
  static_assert(HasDtype<T>,
                "accel::dtype_of<T>: T has no accel::Dtype. Supported: float, double, accel::half, "
                "accel::bfloat16, accel::float8_e4m3, accel::float8_e5m2, std::int8_t, std::uint8_t, "
                "std::int32_t, std::int64_t (any signed integer type of 1, 4 or 8 bytes), bool");
  return static_cast<Dtype>(DtypeIndex<dtype_key_t<T>, DtypeCppTypes>::value);
}
}  // namespace detail

/// The Dtype of a C++ element type: dtype_of<accel::half> == Dtype::float16; dtype_of<long> and
/// dtype_of<long long> are both Dtype::int64 where they are 8 bytes.
template <class T>
inline constexpr Dtype dtype_of = detail::dtype_of_impl<T>();

/// The C++ element type of a Dtype: cpp_type_t<Dtype::float16> is accel::half.
template <Dtype D>
using cpp_type_t = std::tuple_element_t<static_cast<std::size_t>(D), detail::DtypeCppTypes>;

/// Bytes per element; 0 for a value that is not a Dtype.
[[nodiscard]] constexpr std::size_t size_of(Dtype dtype) noexcept {
  switch (dtype) {
    case Dtype::float64:
    case Dtype::int64: return 8;
    case Dtype::float32:
    case Dtype::int32: return 4;
    case Dtype::float16:
    case Dtype::bfloat16: return 2;
    case Dtype::int8:
    case Dtype::uint8:
    case Dtype::boolean:
    case Dtype::float8_e4m3:
    case Dtype::float8_e5m2: return 1;
  }
  return 0;
}

/// torch's name: "float32", "bfloat16", "bool", "float8_e4m3fn", ...; "unknown" for a non-Dtype.
[[nodiscard]] constexpr std::string_view name(Dtype dtype) noexcept {
  switch (dtype) {
    case Dtype::float32: return "float32";
    case Dtype::float16: return "float16";
    case Dtype::bfloat16: return "bfloat16";
    case Dtype::float64: return "float64";
    case Dtype::int8: return "int8";
    case Dtype::uint8: return "uint8";
    case Dtype::int32: return "int32";
    case Dtype::int64: return "int64";
    case Dtype::boolean: return "bool";
    case Dtype::float8_e4m3: return "float8_e4m3fn";
    case Dtype::float8_e5m2: return "float8_e5m2";
  }
  return "unknown";
}

/// True for the floating-point types, float8 included (torch's dtype.is_floating_point).
[[nodiscard]] constexpr bool is_floating_point(Dtype dtype) noexcept {
  switch (dtype) {
    case Dtype::float32:
    case Dtype::float16:
    case Dtype::bfloat16:
    case Dtype::float64:
    case Dtype::float8_e4m3:
    case Dtype::float8_e5m2: return true;
    default: return false;
  }
}

namespace detail {
struct DtypeAlias {
  std::string_view alias;
  Dtype dtype;
};
/// Every accepted spelling besides name(): torch's attribute aliases, then common short forms.
inline constexpr std::array<DtypeAlias, 12> dtype_aliases{{
    {"float", Dtype::float32},
    {"fp32", Dtype::float32},
    {"half", Dtype::float16},
    {"fp16", Dtype::float16},
    {"bf16", Dtype::bfloat16},
    {"double", Dtype::float64},
    {"fp64", Dtype::float64},
    {"int", Dtype::int32},
    {"long", Dtype::int64},
    {"float8_e4m3", Dtype::float8_e4m3},
    {"fp8_e4m3", Dtype::float8_e4m3},
    {"fp8_e5m2", Dtype::float8_e5m2},
}};
}  // namespace detail

/// Reads a dtype name or alias, with or without a "torch." prefix ("torch.half", "bf16", "int64").
/// Throws InvalidArgumentError quoting the input and listing every accepted name.
[[nodiscard]] inline Dtype parse_dtype(std::string_view text) {
  std::string_view key = text;
  if (key.starts_with("torch.")) key.remove_prefix(6);
  for (const Dtype d : all_dtypes) {
    if (key == name(d)) return d;
  }
  for (const auto& a : detail::dtype_aliases) {
    if (key == a.alias) return a.dtype;
  }
  std::string valid;
  for (const Dtype d : all_dtypes) {
    if (!valid.empty()) valid += ", ";
    valid += name(d);
    std::string aliases;
    for (const auto& a : detail::dtype_aliases) {
      if (a.dtype != d) continue;
      aliases += aliases.empty() ? " (" : ", ";
      aliases += a.alias;
    }
    if (!aliases.empty()) valid += aliases + ")";
  }
  throw InvalidArgumentError("unknown dtype '" + std::string(text) + "': expected one of " + valid +
                             ", optionally prefixed with 'torch.'");
}

/// Prints name(dtype); a template over the stream type so that this header needs only <iosfwd>.
template <class CharT, class Traits>
std::basic_ostream<CharT, Traits>& operator<<(std::basic_ostream<CharT, Traits>& os, Dtype dtype) {
  return os << name(dtype);
}

}  // namespace accel
