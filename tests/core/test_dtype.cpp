#include <accel/core/dtype.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

using accel::Dtype;

// dtype_of and cpp_type_t are one table read both ways.
static_assert(accel::dtype_of<float> == Dtype::float32);
static_assert(accel::dtype_of<double> == Dtype::float64);
static_assert(accel::dtype_of<accel::half> == Dtype::float16);
static_assert(accel::dtype_of<accel::bfloat16> == Dtype::bfloat16);
static_assert(accel::dtype_of<std::int8_t> == Dtype::int8);
static_assert(accel::dtype_of<std::uint8_t> == Dtype::uint8);
static_assert(accel::dtype_of<std::int32_t> == Dtype::int32);
static_assert(accel::dtype_of<std::int64_t> == Dtype::int64);
static_assert(accel::dtype_of<bool> == Dtype::boolean);
static_assert(accel::dtype_of<accel::float8_e4m3> == Dtype::float8_e4m3);
static_assert(accel::dtype_of<accel::float8_e5m2> == Dtype::float8_e5m2);
static_assert(accel::dtype_of<const volatile accel::half> == Dtype::float16);
static_assert(std::is_same_v<accel::cpp_type_t<Dtype::float16>, accel::half>);
static_assert(std::is_same_v<accel::cpp_type_t<Dtype::boolean>, bool>);
static_assert(std::is_same_v<accel::cpp_type_t<Dtype::float8_e4m3>, accel::float8_e4m3>);
static_assert(accel::HasDtype<float> && accel::HasDtype<const std::int64_t>);
// Every standard signed integer type maps by its size, whichever of long / long long std::int64_t
// names (on Linux it is long, and long long used to have no Dtype).
static_assert(sizeof(long long) == 8 && accel::dtype_of<long long> == Dtype::int64);
static_assert(sizeof(long) != 8 || accel::dtype_of<long> == Dtype::int64);
static_assert(sizeof(long) != 4 || accel::dtype_of<long> == Dtype::int32);
static_assert(accel::dtype_of<const long long> == Dtype::int64);
static_assert(accel::dtype_of<int> == Dtype::int32);
static_assert(accel::dtype_of<signed char> == Dtype::int8);
static_assert(accel::HasDtype<long long> && accel::HasDtype<volatile long>);
static_assert(!accel::HasDtype<unsigned long long> && !accel::HasDtype<unsigned long>);
static_assert(!accel::HasDtype<short>);
#if defined(__SIZEOF_INT128__)
__extension__ using dtype_test_int128 = __int128;
static_assert(!accel::HasDtype<dtype_test_int128>);
#endif
// Types without a Dtype are rejected (dtype_of<T> would static_assert with the list of valid T).
static_assert(!accel::HasDtype<char>);  // distinct from std::int8_t (signed char)
static_assert(!accel::HasDtype<std::int16_t>);
static_assert(!accel::HasDtype<std::uint64_t>);
static_assert(!accel::HasDtype<long double>);
static_assert(!accel::HasDtype<float*>);
static_assert(accel::size_of(Dtype::bfloat16) == 2);
static_assert(accel::name(Dtype::float8_e4m3) == "float8_e4m3fn");

namespace {
template <Dtype D>
void check_size_matches_cpp_type() {
  INFO(D);
  CHECK(accel::size_of(D) == sizeof(accel::cpp_type_t<D>));
  CHECK(accel::dtype_of<accel::cpp_type_t<D>> == D);
}

template <std::size_t... I>
void check_sizes_match_cpp_types(std::index_sequence<I...>) {
  (check_size_matches_cpp_type<accel::all_dtypes[I]>(), ...);
}

std::string parse_error(std::string_view text) {
  try {
    (void)accel::parse_dtype(text);
  } catch (const accel::InvalidArgumentError& e) {
    CHECK(e.code() == accel::Errc::invalid_argument);
    return e.what();
  }
  FAIL("parse_dtype accepted '" << std::string(text) << "'");
  return {};
}
}  // namespace

TEST_CASE("all_dtypes lists every Dtype once, in enumerator order") {
  REQUIRE(accel::all_dtypes.size() == 11);
  for (std::size_t i = 0; i < accel::all_dtypes.size(); ++i) {
    CHECK(static_cast<std::size_t>(accel::all_dtypes[i]) == i);
  }
}

TEST_CASE("size_of gives bytes per element") {
  CHECK(accel::size_of(Dtype::float32) == 4);
  CHECK(accel::size_of(Dtype::float16) == 2);
  CHECK(accel::size_of(Dtype::bfloat16) == 2);
  CHECK(accel::size_of(Dtype::float64) == 8);
  CHECK(accel::size_of(Dtype::int8) == 1);
  CHECK(accel::size_of(Dtype::uint8) == 1);
  CHECK(accel::size_of(Dtype::int32) == 4);
  CHECK(accel::size_of(Dtype::int64) == 8);
  CHECK(accel::size_of(Dtype::boolean) == 1);
  CHECK(accel::size_of(Dtype::float8_e4m3) == 1);
  CHECK(accel::size_of(Dtype::float8_e5m2) == 1);
  CHECK(accel::size_of(static_cast<Dtype>(200)) == 0);
  check_sizes_match_cpp_types(std::make_index_sequence<accel::all_dtypes.size()>{});
}

TEST_CASE("name gives torch's names") {
  CHECK(accel::name(Dtype::float32) == "float32");
  CHECK(accel::name(Dtype::float16) == "float16");
  CHECK(accel::name(Dtype::bfloat16) == "bfloat16");
  CHECK(accel::name(Dtype::float64) == "float64");
  CHECK(accel::name(Dtype::int8) == "int8");
  CHECK(accel::name(Dtype::uint8) == "uint8");
  CHECK(accel::name(Dtype::int32) == "int32");
  CHECK(accel::name(Dtype::int64) == "int64");
  CHECK(accel::name(Dtype::boolean) == "bool");
  CHECK(accel::name(Dtype::float8_e4m3) == "float8_e4m3fn");
  CHECK(accel::name(Dtype::float8_e5m2) == "float8_e5m2");
  CHECK(accel::name(static_cast<Dtype>(200)) == "unknown");
  std::ostringstream os;
  os << Dtype::bfloat16 << ' ' << Dtype::boolean;
  CHECK(os.str() == "bfloat16 bool");
}

TEST_CASE("parse_dtype reads every name, alias and torch. form") {
  for (const Dtype d : accel::all_dtypes) {
    CHECK(accel::parse_dtype(accel::name(d)) == d);
    CHECK(accel::parse_dtype("torch." + std::string(accel::name(d))) == d);
  }
  const std::pair<const char*, Dtype> aliases[] = {
      {"float", Dtype::float32},        {"fp32", Dtype::float32},
      {"half", Dtype::float16},         {"fp16", Dtype::float16},
      {"bf16", Dtype::bfloat16},        {"double", Dtype::float64},
      {"fp64", Dtype::float64},         {"int", Dtype::int32},
      {"long", Dtype::int64},           {"float8_e4m3", Dtype::float8_e4m3},
      {"fp8_e4m3", Dtype::float8_e4m3}, {"fp8_e5m2", Dtype::float8_e5m2},
      {"torch.half", Dtype::float16},   {"torch.long", Dtype::int64},
      {"torch.float", Dtype::float32},
  };
  for (const auto& alias : aliases) {
    INFO("alias: " << alias.first);  // no structured binding: clang 14 cannot capture one in INFO
    CHECK(accel::parse_dtype(alias.first) == alias.second);
  }
}

TEST_CASE("parse_dtype rejects anything else, quoting it and listing the valid names") {
  const std::string msg = parse_error("float31");
  CHECK(msg.find("'float31'") != std::string::npos);
  for (const Dtype d : accel::all_dtypes) {
    CHECK(msg.find(std::string(accel::name(d))) != std::string::npos);
  }
  CHECK(msg.find("half") != std::string::npos);
  CHECK(msg.find("bf16") != std::string::npos);
  // Each alias beside the name it stands for, and only there.
  CHECK(msg ==
        "unknown dtype 'float31': expected one of float32 (float, fp32), float16 (half, fp16), bfloat16 (bf16), "
        "float64 (double, fp64), int8, uint8, int32 (int), int64 (long), bool, float8_e4m3fn (float8_e4m3, fp8_e4m3), "
        "float8_e5m2 (fp8_e5m2), optionally prefixed with 'torch.'");
  CHECK(parse_error("").find("''") != std::string::npos);
  CHECK(parse_error("Float32").find("'Float32'") != std::string::npos);  // case-sensitive, as torch
  CHECK(parse_error("float32 ").find("'float32 '") != std::string::npos);
  CHECK(parse_error("torch.").find("'torch.'") != std::string::npos);
  CHECK(parse_error("torch.Float32").find("'torch.Float32'") != std::string::npos);
  CHECK(parse_error("torch.torch.float32").find("'torch.torch.float32'") != std::string::npos);
  CHECK(parse_error("bool_").find("'bool_'") != std::string::npos);
}

TEST_CASE("is_floating_point") {
  const std::set<Dtype> floating{Dtype::float32, Dtype::float16,     Dtype::bfloat16,
                                 Dtype::float64, Dtype::float8_e4m3, Dtype::float8_e5m2};
  for (const Dtype d : accel::all_dtypes) {
    INFO(d);
    CHECK(accel::is_floating_point(d) == (floating.count(d) == 1));
  }
}
