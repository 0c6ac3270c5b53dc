// Philox4x32-10 without an oracle: Random123's known-answer vectors, the engine's cuRAND device-API
// semantics, cuRAND host-generator output recorded from libcurand 10 (CUDA 13), the layout rules,
// value ranges and thread-count invariance. test_philox_curand.cpp checks against live cuRAND.
#include <accel/core/cpu_features.hpp>
#include <accel/random/distributions.hpp>
#include <accel/random/fill.hpp>
#include <accel/random/philox.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#if defined(ACCEL_HAS_CUDA) && __has_include(<nvrtc.h>)
#include <nvrtc.h>

#include <string>
#define ACCEL_TEST_NVRTC 1
#endif

namespace rng = accel::rng;
using rng::U32x2;
using rng::U32x4;

namespace doctest {
template <>
struct StringMaker<U32x4> {
  static String convert(const U32x4& v) {
    char text[64];
    std::snprintf(text, sizeof text, "{%08x %08x %08x %08x}", v.x, v.y, v.z, v.w);
    return text;
  }
};
template <>
struct StringMaker<U32x2> {
  static String convert(const U32x2& v) {
    char text[32];
    std::snprintf(text, sizeof text, "{%08x %08x}", v.x, v.y);
    return text;
  }
};
}  // namespace doctest

// Evaluated by the compiler: the block function is constexpr (Random123 kat_vectors, counter 0).
static_assert(rng::philox4x32_10({0, 0, 0, 0}, {0, 0}) == U32x4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
static_assert(std::uniform_random_bit_generator<rng::Philox4x32>);

namespace {

// Word p of the raw stream of cuRAND's host generator at offset 0 (CurandPhiloxLayout, 32-bit).
std::uint32_t layout_word(std::uint64_t seed, std::uint64_t p) {
  const U32x4 b = rng::philox4x32_10(rng::philox_counter(p >> 18, (p >> 2) & 0xFFFF), rng::philox_key(seed));
  return rng::word(b, static_cast<unsigned>(p & 3));
}

template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// True when every value is within `ulps` units in the last place of the expected one.
template <class T>
bool within_ulps(const std::vector<T>& got, const std::vector<T>& want, int ulps) {
  if (got.size() != want.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i) {
    T lo = want[i], hi = want[i];
    for (int k = 0; k < ulps; ++k) {
      lo = std::nextafter(lo, -std::numeric_limits<T>::infinity());
      hi = std::nextafter(hi, std::numeric_limits<T>::infinity());
    }
    if (got[i] < lo || got[i] > hi) {
      MESSAGE("value " << i << ": " << got[i] << " is more than " << ulps << " ulp from " << want[i]);
      return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("philox4x32_10 matches the Random123 known-answer vectors") {
  CHECK(rng::philox4x32_10({0, 0, 0, 0}, {0, 0}) == U32x4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(rng::philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
        U32x4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(rng::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
        U32x4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
  // Counter and key layout helpers: low word first, subsequence in z/w.
  CHECK(rng::philox_counter(0x0000000200000001ull, 0x0000000400000003ull) == U32x4{1, 2, 3, 4});
  CHECK(rng::philox_key(0xa4093822'299f31d0ull) == U32x2{0x299f31d0, 0xa4093822});
}

TEST_CASE("Philox4x32 follows curand_init/curand/curand4/skipahead") {
  const std::uint64_t seed = 0x123456789abcdefull;
  const U32x2 key = rng::philox_key(seed);
  for (const std::uint64_t sub : {0ull, 7ull, 0x1'0000'0001ull}) {
    for (const std::uint64_t offset : {0ull, 1ull, 2ull, 3ull, 5ull, 4ull * 0xffffffffull + 2}) {
      CAPTURE(sub);
      CAPTURE(offset);
      rng::Philox4x32 e(seed, sub, offset);
      // Word i of the subsequence is word i % 4 of block i / 4 (counter in x/y, subsequence in z/w).
      for (std::uint64_t i = offset; i < offset + 11; ++i) {
        CHECK(e() == rng::word(rng::philox4x32_10(rng::philox_counter(i / 4, sub), key), i % 4));
      }
      rng::Philox4x32 a(seed, sub, offset), b(seed, sub, offset);
      const U32x4 four = a.next4();
      CHECK(four == U32x4{b(), b(), b(), b()});
      CHECK(a == b);
    }
  }
  rng::Philox4x32 a(seed), b(seed);
  for (int i = 0; i < 13; ++i) b();
  a.discard(13);
  CHECK(a == b);
  CHECK(a.index() == 1);
  CHECK(a.counter() == U32x4{3, 0, 0, 0});
  // 4 * (2^64 - 1) words reach the last counter of subsequence 5; four more carry into subsequence 6,
  // as cuRAND's Philox_State_Incr carries.
  rng::Philox4x32 c(seed, 5);
  for (int i = 0; i < 4; ++i) c.discard(~0ull);
  CHECK(c.counter() == U32x4{0xffffffff, 0xffffffff, 5, 0});
  c.discard(4);
  CHECK(c.counter() == U32x4{0, 0, 6, 0});
  // The carry goes on from z into w: subsequence 2^32 - 1's last counter, four words on, is subsequence 2^32's first.
  rng::Philox4x32 e(seed, 0xffffffffull);
  for (int i = 0; i < 4; ++i) e.discard(~0ull);
  e.discard(4);
  CHECK(e.counter() == U32x4{0, 0, 0, 1});
  CHECK(e() == rng::philox4x32_10(U32x4{0, 0, 0, 1}, key).x);
  rng::Philox4x32 d(seed, 2, 9);
  d.discard_subsequences(3);
  CHECK(d == rng::Philox4x32(seed, 5, 9));
  // Skipping subsequences adds to the 64-bit (z, w) pair: 0x1'ffffffff + 1 carries into w.
  rng::Philox4x32 f(seed, 0x1'ffffffffull, 6);
  f.discard_subsequences(1);
  CHECK(f == rng::Philox4x32(seed, 0x2'00000000ull, 6));
  CHECK(f.counter() == U32x4{1, 0, 0, 2});
  // Equal engines give the same words: the same counter with another word index is not equal.
  rng::Philox4x32 g(seed), h(seed);
  (void)h();
  CHECK(g.counter() == h.counter());
  CHECK_FALSE(g == h);
  (void)g();
  CHECK(g == h);
  CHECK(rng::Philox4x32::min() == 0);
  CHECK(rng::Philox4x32::max() == 0xffffffffu);
}

TEST_CASE("uniform transforms stay in (0, 1] and never return 0") {
  CHECK(rng::uniform_float(0) == 0x1p-33f);
  CHECK(rng::uniform_float(0x80000000u) == 0.5f);  // 0.5 + 2^-33 rounds to 0.5
  CHECK(rng::uniform_float(0xffffffffu) == 1.0f);  // rounds up to 1: the interval is closed at 1
  CHECK(rng::uniform_double(0, 0) == 0x1p-54);
  CHECK(rng::uniform_double(1, 0) == 0x1p-53 + 0x1p-54);
  CHECK(rng::uniform_double(0, 1) == 0x1p-32 + 0x1p-54);  // y supplies bits 21..52
  CHECK(rng::uniform_double(0x001fffffu, 0xffffffffu) == 1.0);  // z = 2^53 - 1: 1 - 2^-54 rounds to 1
  const rng::Float2 n = rng::box_muller(0, 0);  // smallest radius input: the largest normal, finite
  CHECK(std::isfinite(n.x));
  CHECK(n.y == doctest::Approx(std::sqrt(-2.0 * std::log(0x1p-33))).epsilon(1e-6));
  CHECK(rng::scale_normal(1.5f, 3.0f, 2.0f) == 6.0f);
  CHECK(rng::scale_normal(-1.5, 3.0, 2.0) == 0.0);

  std::vector<float> f((1 << 20) + 3);
  std::vector<double> d((1 << 20) + 3);
  rng::fill_uniform(std::span<float>(f), 99, 5);
  rng::fill_uniform(std::span<double>(d), 99, 5);
  const auto [fmin, fmax] = std::minmax_element(f.begin(), f.end());
  const auto [dmin, dmax] = std::minmax_element(d.begin(), d.end());
  CHECK(*fmin > 0.0f);
  CHECK(*fmax <= 1.0f);
  CHECK(*dmin > 0.0);
  CHECK(*dmax < 1.0);  // 1.0 needs z = 2^53 - 1: chance 2^-53 per value
  double fsum = 0, dsum = 0;
  for (const float x : f) fsum += x;
  for (const double x : d) dsum += x;
  CHECK(fsum / static_cast<double>(f.size()) == doctest::Approx(0.5).epsilon(0.002));
  CHECK(dsum / static_cast<double>(d.size()) == doctest::Approx(0.5).epsilon(0.002));
}

TEST_CASE("fills reproduce output recorded from cuRAND's host generator") {
  // curandGenerate*() on CURAND_RNG_PSEUDO_PHILOX4_32_10 after SetSeed(seed), SetOffset(offset).
  const auto bits = [](std::uint64_t seed, std::uint64_t offset, std::size_t n) {
    std::vector<std::uint32_t> v(n);
    rng::fill_bits(v, seed, offset);
    return v;
  };
  CHECK(bits(1234, 0, 8) ==
        std::vector<std::uint32_t>{0x2090b348, 0xda7cf0ab, 0x4401906f, 0xcbca470e, 0xd115a128, 0x52fc7c75,
                                   0xc7f33f17, 0x0f1539db});
  CHECK(bits(0x123456789abcdef, (1ull << 32) + 3, 6) ==
        std::vector<std::uint32_t>{0x0725faae, 0x66b303e1, 0x3ad00479, 0x9d6f5180, 0x034a73e9, 0x6ff914ce});
  // Words 262142..262145: from subsequence 65535 (counter 0) into subsequence 0 (counter 1).
  CHECK(bits(1234, 262142, 4) == std::vector<std::uint32_t>{0x35542ec6, 0x8e29d01a, 0x9eeede35, 0x1cbe137c});

  std::vector<float> f(4);
  rng::fill_uniform(std::span<float>(f), 1234, 0);
  CHECK(f == std::vector<float>{0x1.04859ap-3f, 0x1.b4f9e2p-1f, 0x1.100642p-2f, 0x1.97948ep-1f});
  std::vector<double> d(4);
  rng::fill_uniform(std::span<double>(d), 1234, 0);
  CHECK(d == std::vector<double>{0x1.b4f9e35f0b348p-1, 0x1.97948a5c1907p-1, 0x1.cbe178b76f1acp-4,
                                 0x1.47eda813b849cp-4});
  // A double fill at an offset that starts in subsequence 1 and pass 1 of the layout.
  d.resize(6);
  rng::fill_uniform(std::span<double>(d), 1234, 262150);
  CHECK(d == std::vector<double>{0x1.2c36830474237p-2, 0x1.39df648b9f664p-1, 0x1.ed045c9967baap-1,
                                 0x1.0e0ecdc0fe425p-2, 0x1.b0306ecd77f54p-1, 0x1.8971547dccf8p-1});
  // Normals starting on the cos half of a Box–Muller pair; an odd count. cuRAND's values, within
  // 2 ulp: accel's log/sin/cos are its own (the same on every backend), cuRAND's the C library's.
  f.resize(5);
  rng::fill_normal(std::span<float>(f), 42, 3);
  CHECK(within_ulps(f, {-0x1.3c51acp+0f, 0x1.14a7e6p+1f, 0x1.10582cp+1f, -0x1.a8e594p+0f, -0x1.a211bcp-2f}, 2));
  d.resize(4);
  rng::fill_normal(std::span<double>(d), 42, 1);
  CHECK(within_ulps(d, {-0x1.54abf38e526c1p-1, 0x1.b1706d3b4c821p-2, -0x1.6f13555a03774p+0, -0x1.f9be3fcfaa932p+0},
                    2));
}

TEST_CASE("32-bit fills are one stream: word p sits at counter p / 2^18, subsequence (p / 4) % 65536") {
  const std::uint64_t seed = 0xfeedfacecafebeefull;
  std::vector<std::uint32_t> all(600000);
  rng::fill_bits(all, seed, 0);
  std::size_t wrong = 0;
  for (std::uint64_t p = 0; p < all.size(); ++p) wrong += all[p] != layout_word(seed, p);
  CHECK(wrong == 0);
  // An offset is a position in that stream, for any length, including across the pass at 2^18.
  for (const std::uint64_t offset : {1ull, 2ull, 3ull, 1021ull, 262141ull, 262144ull}) {
    for (const std::size_t n : {1u, 5u, 4099u, 300000u}) {
      CAPTURE(offset);
      CAPTURE(n);
      std::vector<std::uint32_t> part(n);
      rng::fill_bits(part, seed, offset);
      CHECK(std::equal(part.begin(), part.end(), all.begin() + static_cast<std::ptrdiff_t>(offset)));
      std::vector<float> u(n);
      rng::fill_uniform(std::span<float>(u), seed, offset);
      std::size_t bad = 0;
      for (std::size_t j = 0; j < n; ++j) bad += u[j] != rng::uniform_float(part[j]);
      CHECK(bad == 0);
    }
  }
  // Hence a 32-bit fill can be split anywhere.
  std::vector<float> whole(5000), pieces(5000);
  rng::fill_normal(std::span<float>(whole), seed, 11, 1.0f, 3.0f);
  for (std::size_t at = 0; at < pieces.size();) {
    const std::size_t n = std::min<std::size_t>(pieces.size() - at, 1 + at % 777);
    rng::fill_normal(std::span<float>(pieces).subspan(at, n), seed, 11 + at, 1.0f, 3.0f);
    at += n;
  }
  CHECK(same_bytes(whole, pieces));
}

TEST_CASE("64-bit fills take two blocks per group and restart the layout at their offset") {
  const std::uint64_t seed = 77;
  const U32x2 key = rng::philox_key(seed);
  for (const std::uint64_t offset : {0ull, 3ull, 4ull, 262150ull}) {
    CAPTURE(offset);
    const rng::CurandPhiloxLayout layout(offset, 2);
    std::vector<double> d(300000);
    rng::fill_uniform(std::span<double>(d), seed, offset);
    std::size_t bad = 0;
    for (std::size_t j = 0; j < d.size(); ++j) {
      const std::uint64_t q = layout.skip() + j;
      const U32x4 b = rng::philox4x32_10(layout.counter(q / 4, static_cast<rng::u32>(q % 4 / 2)), key);
      bad += d[j] != (q % 2 == 0 ? rng::uniform_double(b.x, b.y) : rng::uniform_double(b.z, b.w));
    }
    CHECK(bad == 0);
  }
  // Offset 4 starts in subsequence 1, so subsequence 0 is first visited at group 65535 (double
  // 262140), one block later than at offset 0: counter 1, not 2.
  const rng::CurandPhiloxLayout at4(4, 2);
  CHECK(at4.counter(0) == rng::philox_counter(0, 1));
  CHECK(at4.counter(65535) == rng::philox_counter(1, 0));
  CHECK(at4.counter(65535, 1) == rng::philox_counter(2, 0));
  CHECK(at4.counter(65536) == rng::philox_counter(2, 1));
  CHECK(at4.run_length(0) == 65535);
  CHECK(at4.run_length(65535) == 1);
  const rng::CurandPhiloxLayout at0(0, 2);
  CHECK(at0.counter(65536) == rng::philox_counter(2, 0));
  // So, unlike 32-bit fills, a double fill at offset o is not the tail of one at offset 0.
  std::vector<double> from0(262150), from4(262146);
  rng::fill_uniform(std::span<double>(from0), seed, 0);
  rng::fill_uniform(std::span<double>(from4), seed, 4);
  CHECK(std::equal(from4.begin(), from4.begin() + 262140, from0.begin() + 4));
  CHECK(from4[262140] != from0[262144]);
}

TEST_CASE("normal fills: standard moments, mean and stddev applied after Box–Muller") {
  std::vector<float> f((1 << 20) + 1);
  std::vector<double> d((1 << 20) + 1);
  rng::fill_normal(std::span<float>(f), 5, 1);
  rng::fill_normal(std::span<double>(d), 5, 1);
  double s1 = 0, s2 = 0, t1 = 0, t2 = 0;
  for (const float x : f) {
    s1 += x;
    s2 += static_cast<double>(x) * x;
  }
  for (const double x : d) {
    t1 += x;
    t2 += x * x;
  }
  const auto n = static_cast<double>(f.size());
  CHECK(std::abs(s1 / n) < 0.005);
  CHECK(s2 / n == doctest::Approx(1.0).epsilon(0.005));
  CHECK(std::abs(t1 / n) < 0.005);
  CHECK(t2 / n == doctest::Approx(1.0).epsilon(0.005));
  std::vector<float> g(f.size());
  rng::fill_normal(std::span<float>(g), 5, 1, -2.0f, 0.25f);
  std::size_t bad = 0;
  for (std::size_t j = 0; j < g.size(); ++j) bad += g[j] != rng::scale_normal(f[j], -2.0f, 0.25f);
  CHECK(bad == 0);
}

TEST_CASE("empty and tiny fills at every offset within a group") {
  std::vector<std::uint32_t> none;
  rng::fill_bits(none, 1, 3);  // no-op
  std::vector<std::uint32_t> ref(16);
  rng::fill_bits(ref, 1, 0);
  for (std::uint64_t offset = 0; offset < 8; ++offset) {
    for (std::size_t n = 1; n <= 8; ++n) {
      std::vector<std::uint32_t> v(n);
      rng::fill_bits(v, 1, offset);
      CHECK(std::equal(v.begin(), v.end(), ref.begin() + static_cast<std::ptrdiff_t>(offset)));
    }
  }
}

TEST_CASE("the fills run the widest Philox kernel this CPU has") {
  using rng::fill_detail::PhiloxKernel;
  const PhiloxKernel k = rng::fill_detail::philox_kernel();
  CAPTURE(rng::fill_detail::philox_kernel_name(k));
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // Chosen at run time, whatever this file was compiled for.
  const accel::CpuFeatures& f = accel::cpu_features();
  CHECK(k == (f.avx512f ? PhiloxKernel::avx512 : f.avx2 ? PhiloxKernel::avx2 : PhiloxKernel::sse2));
  // Each kernel runs exactly where CPUID says its instructions do (a wider one would fault).
  CHECK(rng::fill_detail::philox_kernel_runs(PhiloxKernel::sse2));
  CHECK(rng::fill_detail::philox_kernel_runs(PhiloxKernel::avx2) == f.avx2);
  CHECK(rng::fill_detail::philox_kernel_runs(PhiloxKernel::avx512) == f.avx512f);
#else
  CHECK(k == PhiloxKernel::portable);
  CHECK_FALSE(rng::fill_detail::philox_kernel_runs(PhiloxKernel::sse2));
  CHECK_FALSE(rng::fill_detail::philox_kernel_runs(PhiloxKernel::avx2));
  CHECK_FALSE(rng::fill_detail::philox_kernel_runs(PhiloxKernel::avx512));
#endif
  CHECK(rng::fill_detail::philox_kernel_runs(PhiloxKernel::portable));
  CHECK(rng::fill_detail::philox_kernel_runs(k));
  CHECK(std::string(rng::fill_kernel_name()) == rng::fill_detail::philox_kernel_name(k));
  // fill_kernel_name()'s words for each kernel, whichever this CPU runs.
  CHECK(std::string(rng::fill_detail::philox_kernel_name(PhiloxKernel::portable)) == "portable loop");
  CHECK(std::string(rng::fill_detail::philox_kernel_name(PhiloxKernel::sse2)) == "SSE2");
  CHECK(std::string(rng::fill_detail::philox_kernel_name(PhiloxKernel::avx2)) == "AVX2");
  CHECK(std::string(rng::fill_detail::philox_kernel_name(PhiloxKernel::avx512)) == "AVX-512");
}

TEST_CASE("every Philox kernel this CPU runs gives the blocks of philox4x32_10") {
  const U32x2 key{0x01234567, 0x89abcdef};
  using rng::fill_detail::PhiloxKernel;
  for (const std::size_t n : {1u, 3u, 17u, 64u, 255u}) {
    for (const U32x4 c : {U32x4{0, 0, 0, 0}, U32x4{5, 7, 0xfffffff0u, 0}}) {
      for (const PhiloxKernel k : {PhiloxKernel::portable, PhiloxKernel::sse2, PhiloxKernel::avx2, PhiloxKernel::avx512}) {
        if (!rng::fill_detail::philox_kernel_runs(k)) continue;
        CAPTURE(rng::fill_detail::philox_kernel_name(k));
        CAPTURE(n);
        // Block by block: the vector kernels may write up to fill_lane_slack blocks past n, no further.
        const std::size_t slack = rng::fill_detail::fill_lane_slack;
        std::vector<rng::u32> w(4 * (n + 2 * slack), 0xA5A5A5A5u);
        rng::fill_detail::philox_run_with(k, c, key, n, w.data(), 0, false);
        // Structure of arrays: word j of block i at j * stride + i.
        const std::size_t stride = n + slack;
        std::vector<rng::u32> soa(4 * stride, 0u);
        rng::fill_detail::philox_run_with(k, c, key, n, soa.data(), stride, false);
        // As uniform floats, block by block: uniform_float's bits.
        std::vector<float> uf(4 * (n + slack), 0.0f);
        rng::fill_detail::philox_run_with(k, c, key, n, reinterpret_cast<rng::u32*>(uf.data()), 0, true);
        std::size_t bad = 0, bad_soa = 0, bad_uniform = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const U32x4 r = rng::philox4x32_10({c.x, c.y, c.z + static_cast<rng::u32>(i), c.w}, key);
          bad += !(U32x4{w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]} == r);
          bad_soa += !(U32x4{soa[i], soa[stride + i], soa[2 * stride + i], soa[3 * stride + i]} == r);
          const rng::u32 words[4] = {r.x, r.y, r.z, r.w};
          for (int j = 0; j < 4; ++j) {
            bad_uniform += std::bit_cast<rng::u32>(uf[4 * i + static_cast<std::size_t>(j)]) !=
                           std::bit_cast<rng::u32>(rng::uniform_float(words[j]));
          }
        }
        CHECK(bad == 0);
        CHECK(bad_soa == 0);
        CHECK(bad_uniform == 0);
        CHECK(std::all_of(w.begin() + static_cast<std::ptrdiff_t>(4 * (n + slack)), w.end(),
                          [](rng::u32 v) { return v == 0xA5A5A5A5u; }));
      }
    }
  }
}

#if defined(_OPENMP)
TEST_CASE("fills give the same bytes whatever the OpenMP thread count") {
  const int saved = omp_get_max_threads();
  const std::size_t n = (1 << 20) + 13;
  const auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<std::uint32_t> b(n);
    std::vector<float> uf(n), nf(n);
    std::vector<double> ud(n), nd(n);
    rng::fill_bits(b, 31, 7);
    rng::fill_uniform(std::span<float>(uf), 31, 7);
    rng::fill_uniform(std::span<double>(ud), 31, 7);
    rng::fill_normal(std::span<float>(nf), 31, 7, 0.5f, 2.0f);
    rng::fill_normal(std::span<double>(nd), 31, 7, 0.5, 2.0);
    return std::make_tuple(b, uf, ud, nf, nd);
  };
  const auto one = run(1);
  for (const int threads : {2, 3}) {
    CAPTURE(threads);
    const auto many = run(threads);
    CHECK(same_bytes(std::get<0>(one), std::get<0>(many)));
    CHECK(same_bytes(std::get<1>(one), std::get<1>(many)));
    CHECK(same_bytes(std::get<2>(one), std::get<2>(many)));
    CHECK(same_bytes(std::get<3>(one), std::get<3>(many)));
    CHECK(same_bytes(std::get<4>(one), std::get<4>(many)));
  }
  omp_set_num_threads(saved);
}
#else
TEST_CASE("fills give the same bytes whatever the OpenMP thread count" * doctest::skip()) {
  MESSAGE("built without OpenMP: fills run on the calling thread only");
}
#endif

#if defined(ACCEL_TEST_NVRTC)
TEST_CASE("philox.hpp and distributions.hpp compile under NVRTC, with no CUDA or standard header") {
  const char* source = R"(
#include <accel/random/distributions.hpp>
using namespace accel::rng;
extern "C" __global__ void fill(unsigned* u, float* f, double* d, unsigned long long seed, unsigned long long offset) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const CurandPhiloxLayout layout(offset, 2);
  const U32x4 b = philox4x32_10(layout.counter(i, 1), philox_key(seed));
  Philox4x32 e(seed, i, offset);
  u[i] = e() ^ e.next4().w;
  const Float2 n = box_muller(b.x, b.y);
  f[i] = scale_normal(n.x, 0.0f, 1.0f) + uniform_float(b.z);
  d[i] = box_muller_double(b.x, b.y, b.z, b.w).y + uniform_double(b.x, b.y);
}
)";
  const std::string include = std::string("-I") + ACCEL_TEST_INCLUDE_DIR;
  for (const char* dialect : {"-std=c++17", "-std=c++20"}) {
    CAPTURE(dialect);
    nvrtcProgram program{};
    REQUIRE(nvrtcCreateProgram(&program, source, "fill.cu", 0, nullptr, nullptr) == NVRTC_SUCCESS);
    const char* options[] = {include.c_str(), dialect, "--gpu-architecture=compute_80"};
    const nvrtcResult result = nvrtcCompileProgram(program, 3, options);
    std::size_t size = 0;
    nvrtcGetProgramLogSize(program, &size);
    std::string log(size, '\0');
    nvrtcGetProgramLog(program, log.data());
    CAPTURE(log);
    CHECK(result == NVRTC_SUCCESS);
    nvrtcDestroyProgram(&program);
  }
}
#endif
