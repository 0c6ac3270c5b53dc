// RngApi conformance: per-device Philox generators, their 16-byte state, and fills on streams that
// equal accel::rng::fill_* (hence cuRAND's host generator) at the offsets reserved in call order.
//
// A backend whose GPU fills are pending (NotSupportedError) skips the fill checks, saying why.
#include "backends.hpp"

#include <accel/concepts/rng.hpp>
#include <accel/cpu/random.hpp>
#include <accel/random/fill.hpp>
#include <accel/random/generator.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <algorithm>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <cmath>
#include <string>
#include <vector>

namespace {

static_assert(accel::RngApi<accel::CpuBackend> && accel::RngApi<accel::AnyBackend>);
using RngBackends = ConformanceBackends;

#define ACCEL_SKIP_UNLESS_RNG(B) ACCEL_SKIP_UNLESS_AVAILABLE(B);

std::pair<std::uint64_t, std::uint64_t> decode(const std::array<std::byte, 16>& s) {
  std::uint64_t seed = 0, offset = 0;
  for (int i = 0; i < 8; ++i) {
    seed |= static_cast<std::uint64_t>(s[i]) << (8 * i);
    offset |= static_cast<std::uint64_t>(s[8 + i]) << (8 * i);
  }
  return {seed, offset};
}

std::array<std::byte, 16> encode(std::uint64_t seed, std::uint64_t offset) {
  std::array<std::byte, 16> s{};
  for (int i = 0; i < 8; ++i) {
    s[i] = static_cast<std::byte>(seed >> (8 * i));
    s[8 + i] = static_cast<std::byte>(offset >> (8 * i));
  }
  return s;
}

// Copies a device buffer back to the host, in s's order, and waits.
template <class B, class T>
std::vector<T> to_host(const B& b, typename B::StreamRef s, const accel::Buffer<T, B>& buf) {
  std::vector<T> host(buf.size());
  b.copy_async(s, host.data(), buf.data(), buf.size() * sizeof(T));
  s.synchronize();
  return host;
}

// Distance in units in the last place between two finite values of the same sign convention.
template <class T>
std::uint64_t ulp_distance(T a, T b) {
  using Bits = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  const auto ordered = [](T v) {
    Bits bits;
    std::memcpy(&bits, &v, sizeof v);
    return bits < 0 ? std::numeric_limits<Bits>::min() - bits : bits;  // monotonic in v
  };
  const Bits x = ordered(a), y = ordered(b);
  return x > y ? static_cast<std::uint64_t>(x - y) : static_cast<std::uint64_t>(y - x);
}

// Normals: every backend computes Box–Muller with accel::rng's portable log/sin/cos, so they equal
// accel::rng's host fills bit for bit on a GPU too.
template <class B, class T>
bool normals_match(const B& b, const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return false;
  std::uint64_t worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, ulp_distance(got[i], want[i]));
  if (worst != 0) MESSAGE(b.name() << ": largest normal difference " << worst << " ulp");
  return same_bits(got, want);
}

template <class T>
std::vector<T> reference_uniform(std::size_t n, std::uint64_t seed, std::uint64_t offset) {
  std::vector<T> r(n);
  accel::rng::fill_uniform(std::span<T>(r), seed, offset);
  return r;
}

// Runs the fill; false (with a message) when the backend's GPU fills are pending.
template <class B, class F>
bool fills_supported(const B& b, F&& fill) {
  try {
    fill();
    return true;
  } catch (const accel::NotSupportedError& e) {
    MESSAGE("SKIPPED fill checks on " << b.name() << ": " << e.what());
    return false;
  }
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("rng: state is seed then offset, and bad blobs change nothing", B, rng_state) {
  ACCEL_SKIP_UNLESS_RNG(B) {
    const B b;
    const std::array<std::byte, 16> saved = b.get_rng_state();
    b.manual_seed(1234);
    CHECK(b.initial_seed() == 1234);
    CHECK(decode(b.get_rng_state()) == std::pair<std::uint64_t, std::uint64_t>{1234, 0});

    const auto blob = encode(0x0123456789ABCDEFULL, 4096);
    b.set_rng_state(blob);
    CHECK(b.get_rng_state() == blob);
    CHECK(b.initial_seed() == 0x0123456789ABCDEFULL);
    CHECK(b.get_rng_state(0) == b.default_generator(0).get_state());

    const std::array<std::byte, 15> short_blob{};
    CHECK_THROWS_AS(b.set_rng_state(short_blob), accel::InvalidArgumentError);
    const std::array<std::byte, 17> long_blob{};
    CHECK_THROWS_AS(b.set_rng_state(long_blob), accel::InvalidArgumentError);
    CHECK_THROWS_AS(b.set_rng_state(encode(7, 6)), accel::InvalidArgumentError);
    CHECK(b.get_rng_state() == blob);  // unchanged

    const int n = b.device_count();
    CHECK_THROWS_AS((void)b.get_rng_state(n), accel::InvalidArgumentError);
    CHECK_THROWS_AS((void)b.get_rng_state(-1), accel::InvalidArgumentError);
    CHECK_THROWS_AS(b.set_rng_state(blob, n), accel::InvalidArgumentError);
    CHECK_THROWS_AS((void)b.default_generator(n), accel::InvalidArgumentError);

    const std::uint64_t s = b.seed();
    CHECK(b.initial_seed() == s);
    CHECK(decode(b.get_rng_state()).second == 0);
    b.set_rng_state(saved);
  }
}

TEST_CASE_TEMPLATE_DEFINE("rng: manual_seed_all seeds every device, manual_seed only the current one", B, rng_seed_all) {
  ACCEL_SKIP_UNLESS_RNG(B) {
    const B b;
    const int n = b.device_count();
    b.manual_seed_all(99);
    for (int i = 0; i < n; ++i) {
      CHECK(decode(b.get_rng_state(i)) == std::pair<std::uint64_t, std::uint64_t>{99, 0});
      CHECK(b.default_generator(i).initial_seed() == 99);
    }
    if (n > 1) {
      const typename B::DeviceGuard guard(1);
      b.manual_seed(5);
      CHECK(decode(b.get_rng_state(1)).first == 5);
      CHECK(decode(b.get_rng_state(0)).first == 99);
      CHECK(b.initial_seed() == 5);
    }
    b.manual_seed_all(accel::Generator::default_seed);
  }
}

TEST_CASE_TEMPLATE_DEFINE("rng: fills equal accel::rng at the reserved offsets, in call order", B, rng_fills) {
  ACCEL_SKIP_UNLESS_RNG(B) {
    const B b;
    const auto s = b.current_stream();
    const int dev = s.device_index();
    constexpr std::uint64_t seed = 20240611;
    b.manual_seed(seed);

    accel::Buffer<float, B> a(1001, s);
    if (!fills_supported(b, [&] { b.fill_uniform(s, a.data(), a.size()); })) {
      CHECK(decode(b.get_rng_state(dev)).second == 0);  // a pending fill reserves nothing
      return;
    }
    CHECK(same_bits(to_host(b, s, a), reference_uniform<float>(1001, seed, 0)));
    CHECK(decode(b.get_rng_state(dev)).second == 1004);  // 1001 rounded up to a Philox block

    // The second fill continues where the first stopped.
    accel::Buffer<std::uint32_t, B> bits(10, s);
    b.fill_bits(s, bits.data(), bits.size());
    std::vector<std::uint32_t> want_bits(10);
    accel::rng::fill_bits(std::span<std::uint32_t>(want_bits), seed, 1004);
    CHECK(same_bits(to_host(b, s, bits), want_bits));
    CHECK(decode(b.get_rng_state(dev)).second == 1016);

    // Same seed, same numbers.
    b.manual_seed(seed);
    accel::Buffer<float, B> a2(1001, s);
    b.fill_uniform(s, a2.data(), a2.size());
    CHECK(same_bits(to_host(b, s, a2), to_host(b, s, a)));

    // Normals and doubles at the offsets the generator hands out.
    const std::uint64_t off_n = decode(b.get_rng_state(dev)).second;
    accel::Buffer<float, B> nf(333, s);
    b.fill_normal(s, nf.data(), nf.size(), 2.0f, 0.5f);
    std::vector<float> want_nf(333);
    accel::rng::fill_normal(std::span<float>(want_nf), seed, off_n, 2.0f, 0.5f);
    CHECK(normals_match(b, to_host(b, s, nf), want_nf));

    const std::uint64_t off_d = decode(b.get_rng_state(dev)).second;
    CHECK(off_d == off_n + 336);
    accel::Buffer<double, B> ud(77, s);
    b.fill_uniform(s, ud.data(), ud.size());
    CHECK(same_bits(to_host(b, s, ud), reference_uniform<double>(77, seed, off_d)));
    const std::uint64_t off_nd = decode(b.get_rng_state(dev)).second;
    CHECK(off_nd == off_d + accel::Generator::wide_words(off_d, 77));
    accel::Buffer<double, B> nd(50, s);
    b.fill_normal(s, nd.data(), nd.size(), -1.0, 3.0);
    std::vector<double> want_nd(50);
    accel::rng::fill_normal(std::span<double>(want_nd), seed, off_nd, -1.0, 3.0);
    CHECK(normals_match(b, to_host(b, s, nd), want_nd));

    // n == 0 reserves nothing.
    const auto before = b.get_rng_state(dev);
    b.fill_uniform(s, a.data(), 0);
    CHECK(b.get_rng_state(dev) == before);

    // A negative, NaN or infinite stddev (or a non-finite mean) is refused, naming it, and the
    // generator does not move (torch's normal_ refuses std < 0; NaN would fill silently).
    const std::string backend(b.device_type() == accel::DeviceType::cpu ? "cpu" : "cuda");
    CHECK_THROWS_WITH_AS(b.fill_normal(s, nf.data(), nf.size(), 0.0f, -1.0f),
                         (backend + " fill_normal: stddev = -1 must be finite and >= 0").c_str(),
                         accel::InvalidArgumentError);
    CHECK_THROWS_WITH_AS(b.fill_normal(s, nd.data(), nd.size(), 0.0, std::nan("")),
                         (backend + " fill_normal: stddev = nan must be finite and >= 0").c_str(),
                         accel::InvalidArgumentError);
    CHECK_THROWS_WITH_AS(b.fill_normal(s, nf.data(), nf.size(), std::numeric_limits<float>::infinity(), 1.0f),
                         (backend + " fill_normal: mean = inf must be finite").c_str(), accel::InvalidArgumentError);
    CHECK(b.get_rng_state(dev) == before);
    b.fill_normal(s, nf.data(), nf.size(), 5.0f, 0.0f);  // stddev 0: every value is the mean
    for (const float x : to_host(b, s, nf)) REQUIRE(x == 5.0f);
  }
}

TEST_CASE_TEMPLATE_DEFINE("rng: get/set_rng_state replays a sequence; user generators are separate", B, rng_replay) {
  ACCEL_SKIP_UNLESS_RNG(B) {
    const B b;
    typename B::Stream stream;
    const typename B::StreamRef s = stream;
    const int dev = s.device_index();
    b.manual_seed(7);
    accel::Buffer<float, B> warm(5, s);
    if (!fills_supported(b, [&] { b.fill_uniform(s, warm.data(), warm.size()); })) return;

    const auto state = b.get_rng_state(dev);
    accel::Buffer<float, B> x(4096, s), y(4096, s);
    b.fill_uniform(s, x.data(), x.size());
    b.fill_normal(s, y.data(), y.size(), 0.0f, 1.0f);
    const auto hx = to_host(b, s, x), hy = to_host(b, s, y);

    b.set_rng_state(state, dev);
    accel::Buffer<float, B> x2(4096, s), y2(4096, s);
    b.fill_uniform(s, x2.data(), x2.size());
    b.fill_normal(s, y2.data(), y2.size(), 0.0f, 1.0f);
    CHECK(same_bits(to_host(b, s, x2), hx));
    CHECK(same_bits(to_host(b, s, y2), hy));

    // A user generator: its own state; the default generator does not move.
    const auto default_state = b.get_rng_state(dev);
    accel::Generator g(7);
    g.set_state(state);
    accel::Buffer<float, B> x3(4096, s);
    b.fill_uniform(s, x3.data(), x3.size(), g);
    CHECK(same_bits(to_host(b, s, x3), hx));
    CHECK(b.get_rng_state(dev) == default_state);
    CHECK(decode(g.get_state()).second == decode(state).second + 4096);

    // The other fills with a user generator: float and double normals and double uniforms, each at the
    // offset the generator hands out (reserve_wide for doubles), the default generator untouched.
    accel::Generator u(23);
    accel::Buffer<float, B> gnf(101, s);
    accel::Buffer<double, B> gud(37, s), gnd(41, s);
    const std::uint64_t off_nf = decode(u.get_state()).second;
    b.fill_normal(s, gnf.data(), gnf.size(), 1.0f, 2.0f, u);
    const std::uint64_t off_ud = decode(u.get_state()).second;
    CHECK(off_ud == off_nf + 104);
    b.fill_uniform(s, gud.data(), gud.size(), u);
    const std::uint64_t off_nd = decode(u.get_state()).second;
    CHECK(off_nd == off_ud + accel::Generator::wide_words(off_ud, 37));
    b.fill_normal(s, gnd.data(), gnd.size(), -0.5, 4.0, u);
    CHECK(decode(u.get_state()).second == off_nd + accel::Generator::wide_words(off_nd, 41));
    std::vector<float> want_gnf(101);
    accel::rng::fill_normal(std::span<float>(want_gnf), 23, off_nf, 1.0f, 2.0f);
    CHECK(normals_match(b, to_host(b, s, gnf), want_gnf));
    CHECK(same_bits(to_host(b, s, gud), reference_uniform<double>(37, 23, off_ud)));
    std::vector<double> want_gnd(41);
    accel::rng::fill_normal(std::span<double>(want_gnd), 23, off_nd, -0.5, 4.0);
    CHECK(normals_match(b, to_host(b, s, gnd), want_gnd));
    CHECK(b.get_rng_state(dev) == default_state);

    // Offsets are taken at call time: two fills on two streams get the call order's offsets.
    typename B::Stream other;
    accel::Generator h(11);
    accel::Buffer<std::uint32_t, B> p(100, s), q(100, other);
    b.fill_bits(s, p.data(), p.size(), h);
    b.fill_bits(other, q.data(), q.size(), h);
    std::vector<std::uint32_t> wp(100), wq(100);
    accel::rng::fill_bits(std::span<std::uint32_t>(wp), 11, 0);
    accel::rng::fill_bits(std::span<std::uint32_t>(wq), 11, 100);
    CHECK(same_bits(to_host(b, s, p), wp));
    CHECK(same_bits(to_host(b, typename B::StreamRef(other), q), wq));
  }
}

TEST_CASE_TEMPLATE_DEFINE("rng: each device's fills use that device's generator", B, rng_devices) {
  ACCEL_SKIP_UNLESS_RNG(B) {
    const B b;
    const int n = b.device_count();
    b.manual_seed_all(31337);
    std::vector<std::vector<float>> results;
    for (int i = 0; i < n; ++i) {
      const auto s = b.default_stream(i);
      accel::Buffer<float, B> buf(64, s);
      if (!fills_supported(b, [&] { b.fill_uniform(s, buf.data(), buf.size()); })) return;
      results.push_back(to_host(b, s, buf));
      for (int j = 0; j < n; ++j) CHECK(decode(b.get_rng_state(j)).second == (j <= i ? 64u : 0u));
    }
    for (const auto& r : results) CHECK(same_bits(r, reference_uniform<float>(64, 31337, 0)));
    b.manual_seed_all(accel::Generator::default_seed);
  }
}

TEST_CASE_TEMPLATE_APPLY(rng_state, RngBackends);
TEST_CASE_TEMPLATE_APPLY(rng_seed_all, RngBackends);
TEST_CASE_TEMPLATE_APPLY(rng_fills, RngBackends);
TEST_CASE_TEMPLATE_APPLY(rng_replay, RngBackends);
TEST_CASE_TEMPLATE_APPLY(rng_devices, RngBackends);
