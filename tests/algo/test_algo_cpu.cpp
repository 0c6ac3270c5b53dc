// accel/algo on CpuBackend: every algorithm against the standard library (sizes 0, 1, odd, ~1e6), on
// the inline default stream and on a worker stream; stream order and asynchrony; temporaries from the
// caching allocator; bad arguments rejected before anything is enqueued.
#include <accel/algo/algo.hpp>
#include <accel/cpu/backend.hpp>

#include <doctest/doctest.h>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using accel::CpuBackend;
namespace algo = accel::algo;
template <class T>
using CpuBuffer = accel::Buffer<T, CpuBackend>;

constexpr CpuBackend cpu{};
const std::vector<std::size_t> sizes{0, 1, 2, 1001, 1000003};

template <class T>
CpuBuffer<T> make_buffer(const std::vector<T>& values, accel::cpu::StreamRef stream) {
  CpuBuffer<T> b(values.size(), stream);
  std::copy(values.begin(), values.end(), b.span().begin());
  return b;
}

template <class T>
std::vector<T> to_vector(const CpuBuffer<T>& b) {
  return {b.span().begin(), b.span().end()};
}

template <class T>
std::vector<T> random_values(std::size_t n, std::uint32_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> dist(-1e6, 1e6);
    for (auto& x : v) x = dist(gen);
  } else {
    std::uniform_int_distribution<T> dist(std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
    for (auto& x : v) x = dist(gen);
  }
  return v;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const accel::InvalidArgumentError& e) {
    return e.what();
  }
  return "(no InvalidArgumentError)";
}

/// A task that holds `stream` until open() (to observe that later work waits behind it).
class Gate {
 public:
  explicit Gate(accel::cpu::StreamRef stream) {
    stream.enqueue([f = opened_.get_future().share()] { f.wait(); });
  }
  void open() { opened_.set_value(); }

 private:
  std::promise<void> opened_;
};

}  // namespace

TEST_CASE("cpu_parallel says whether the CPU algorithms run on OpenMP threads") {
#if defined(_OPENMP)
  CHECK(algo::cpu_parallel);
#else
  MESSAGE("built without OpenMP (ThreadSanitizer, or no OpenMP found): the CPU algorithms run sequentially");
  CHECK_FALSE(algo::cpu_parallel);
#endif
}

TEST_CASE("fill sets every element, on the default and on a worker stream") {
  accel::cpu::Stream worker;
  for (accel::cpu::StreamRef s : {cpu.default_stream(), worker.ref()}) {
    for (std::size_t n : sizes) {
      CAPTURE(n);
      CpuBuffer<float> b(n, s);
      algo::fill(s, b, 2.5f);
      s.synchronize();
      CHECK(std::all_of(b.span().begin(), b.span().end(), [](float x) { return x == 2.5f; }));
    }
  }
}

TEST_CASE("fill of a DeviceSpan writes only that part") {
  accel::cpu::Stream s;
  CpuBuffer<std::int32_t> b(101, s);
  algo::fill(s, b, 0);
  algo::fill(s, algo::DeviceSpan(b).subspan(10, 31), 7);
  algo::fill(s, algo::DeviceSpan<std::int32_t, CpuBackend>(b.data() + 90, 11), 9);
  s.synchronize();
  for (std::size_t i = 0; i < b.size(); ++i) {
    const int expected = i >= 10 && i < 41 ? 7 : i >= 90 ? 9 : 0;
    CHECK(b.span()[i] == expected);
  }
}

TEST_CASE("DeviceSpan: the view's size and bounds, first, subspan's edges, the read-only view") {
  accel::cpu::Stream s;
  CpuBuffer<std::int32_t> b(12, s);
  const algo::DeviceSpan all(b);
  CHECK(all.data() == b.data());
  CHECK(all.size() == 12);
  CHECK(all.size_bytes() == 12 * sizeof(std::int32_t));
  CHECK(all.begin() == b.data());
  CHECK(all.end() == b.data() + 12);
  CHECK_FALSE(all.empty());
  CHECK(algo::DeviceSpan<float, CpuBackend>{}.empty());
  CHECK(algo::DeviceSpan<float, CpuBackend>{}.data() == nullptr);

  const auto head = all.first(5);
  CHECK(head.data() == b.data());
  CHECK(head.size() == 5);
  CHECK(all.first(12).size() == 12);
  CHECK(all.first(0).empty());
  const auto tail = all.subspan(12, 0);  // one past the end, empty: allowed, as std::span
  CHECK(tail.empty());
  CHECK(tail.data() == b.data() + 12);
  CHECK_THROWS_WITH_AS((void)all.first(13),
                       "accel::algo::DeviceSpan::subspan(0, 13): outside a span of 12 elements",
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS((void)all.subspan(13, 0),
                       "accel::algo::DeviceSpan::subspan(13, 0): outside a span of 12 elements",
                       accel::InvalidArgumentError);
  // offset + count wrapping around size_t must not pass the check
  CHECK_THROWS_AS((void)all.subspan(2, static_cast<std::size_t>(-1)), accel::InvalidArgumentError);

  // first() feeds the algorithms like any span: only those elements change
  algo::fill(s, b, 0);
  algo::fill(s, all.first(3), 4);
  algo::fill(s, all.subspan(3, 9).first(2), 5);
  s.synchronize();
  const std::vector<std::int32_t> expected{4, 4, 4, 5, 5, 0, 0, 0, 0, 0, 0, 0};
  CHECK(std::equal(expected.begin(), expected.end(), b.span().begin()));

  // the read-only view: from a writable span or a const buffer, same elements
  const algo::DeviceSpan<const std::int32_t, CpuBackend> ro = all.first(4);
  CHECK(ro.data() == b.data());
  CHECK(ro.size() == 4);
  const CpuBuffer<std::int32_t>& cb = b;
  const algo::DeviceSpan cro(cb);
  static_assert(std::is_same_v<decltype(cro), const algo::DeviceSpan<const std::int32_t, CpuBackend>>);
  CHECK(algo::reduce_sync(s, ro, std::int64_t{0}) == 17);  // 4 + 4 + 4 + 5
  CHECK(algo::reduce_sync(s, cro, std::int64_t{0}) == 22);
  static_assert(!std::is_constructible_v<algo::DeviceSpan<std::int32_t, CpuBackend>, const CpuBuffer<std::int32_t>&>,
                "a writable span of a const buffer must not compile");
}

TEST_CASE("a buffer of another device than the stream's is refused, naming both; a span is the caller's word") {
  if (accel::cpu::Devices::device_count() < 2) {
    MESSAGE("SKIPPED: needs ACCEL_CPU_DEVICE_COUNT=2 (the test_algo_cpu_2dev run)");
    return;
  }
  accel::cpu::Stream on0(0), on1(1);
  CpuBuffer<std::int32_t> b0(16, on0), b1(16, on1);
  algo::fill(on0, b0, 1);
  algo::fill(on1, b1, 2);
  const std::string expected = "accel::algo::fill (cpu:0): out is a buffer of device 1, not the stream's device 0";
  CHECK_THROWS_WITH_AS(algo::fill(on0, b1, 3), expected.c_str(), accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(algo::transform(on0, b1, b0, std::negate<>{}),
                       "accel::algo::transform (cpu:0): in is a buffer of device 1, not the stream's device 0",
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS((void)algo::reduce_sync(on1, b0), doctest::Contains("in is a buffer of device 0, not the stream's device 1"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(algo::sort(on1, b0), doctest::Contains("data is a buffer of device 0"), accel::InvalidArgumentError);
  on0.synchronize();
  on1.synchronize();
  CHECK(std::all_of(b1.span().begin(), b1.span().end(), [](std::int32_t x) { return x == 2; }));  // unchanged
  algo::fill(on0, algo::DeviceSpan<std::int32_t, CpuBackend>(b0.data(), 16), 5);  // a span: not checked
  CHECK(algo::reduce_sync(on0, b0, std::int64_t{0}) == 80);
  CpuBuffer<std::int32_t> empty1(0, on1);  // an empty buffer touches no memory: accepted, whatever its device
  CHECK(message_of([&] { algo::fill(on0, empty1, 3); }) == "(no InvalidArgumentError)");
  CHECK(message_of([&] { algo::transform(on0, empty1, b0, std::negate<>{}); }) == "(no InvalidArgumentError)");
}

TEST_CASE("transform: unary (with a cast), in place, binary") {
  accel::cpu::Stream s;
  for (std::size_t n : sizes) {
    CAPTURE(n);
    const auto a = random_values<std::int32_t>(n, 1);
    const auto c = random_values<std::int32_t>(n, 2);
    auto in = make_buffer(a, s);
    auto in2 = make_buffer(c, s);
    CpuBuffer<double> out(n, s);
    algo::transform(s, in, out, [](std::int32_t x) { return 0.5 * x; });
    CpuBuffer<std::int64_t> sum(n + 3, s);  // larger than needed: only the first n are written
    algo::fill(s, sum, -1);
    algo::transform(s, in, in2, sum,
                    [](std::int32_t x, std::int32_t y) { return std::int64_t{x} - 2 * std::int64_t{y}; });
    algo::transform(s, in, in, [](std::int32_t x) { return x / 3; });  // in place
    s.synchronize();
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(out.span()[i] == 0.5 * a[i]);
      REQUIRE(sum.span()[i] == std::int64_t{a[i]} - 2 * std::int64_t{c[i]});
      REQUIRE(in.span()[i] == a[i] / 3);
    }
    for (std::size_t i = n; i < n + 3; ++i) CHECK(sum.span()[i] == -1);
  }
}

TEST_CASE("reduce: the asynchronous forms and reduce_sync equal std::reduce") {
  accel::cpu::Stream s;
  for (std::size_t n : sizes) {
    CAPTURE(n);
    const auto v = random_values<std::int32_t>(n, 3);
    auto in = make_buffer(v, s);
    const std::int64_t expected = std::accumulate(v.begin(), v.end(), std::int64_t{5});

    CpuBuffer<std::int64_t> out(1, s);
    algo::reduce(s, in, out, std::int64_t{5});
    auto returned = algo::reduce(s, in, std::int64_t{5});
    static_assert(std::is_same_v<decltype(returned), CpuBuffer<std::int64_t>>);
    const auto max = algo::reduce_sync(s, in, std::numeric_limits<std::int32_t>::min(),
                                       [](std::int32_t x, std::int32_t y) { return std::max(x, y); });
    CHECK(out.span()[0] == expected);  // reduce_sync synchronized the stream
    CHECK(returned.size() == 1);
    CHECK(returned.span()[0] == expected);
    CHECK(algo::reduce_sync(s, in, std::int64_t{5}) == expected);
    CHECK(max == (n == 0 ? std::numeric_limits<std::int32_t>::min() : *std::max_element(v.begin(), v.end())));
  }
}

TEST_CASE("reduce: default init and op, floating point, an empty range gives init") {
  accel::cpu::Stream s;
  CpuBuffer<float> ones(1000003, s);
  algo::fill(s, ones, 1.0f);
  CHECK(algo::reduce_sync(s, ones) == 1000003.0f);  // every partial sum is exact in float
  CHECK(algo::reduce_sync(s, ones, 0.0) == 1000003.0);
  const auto v = random_values<double>(1000003, 4);
  auto d = make_buffer(v, s);
  CHECK(algo::reduce_sync(s, d) == doctest::Approx(std::accumulate(v.begin(), v.end(), 0.0)).epsilon(1e-9));
  CpuBuffer<float> empty(0, s);
  CHECK(algo::reduce_sync(s, empty, 42.0f) == 42.0f);
  CpuBuffer<std::uint8_t> bytes(300, s);
  algo::fill(s, bytes, std::uint8_t{255});
  CHECK(algo::reduce_sync(s, bytes, std::int64_t{0}) == 300 * 255);  // accumulated in init's type
}

TEST_CASE("reduce with an accumulator that is not trivially copyable (Thrust's reduce as is)") {
  // A result type with a user-provided copy: the blocked fold needs a buffer of partial results, so
  // such types take Thrust's own reduce; the value is the same.
  struct Total {
    std::int64_t value = 0;
    Total() = default;
    Total(std::int64_t v) : value(v) {}  // NOLINT(google-explicit-constructor)
    Total(const Total& other) : value(other.value) {}
    Total& operator=(const Total& other) = default;
    operator std::int64_t() const { return value; }  // NOLINT(google-explicit-constructor)
  };
  static_assert(!std::is_trivially_copyable_v<Total>);
  struct AddTotal {
    Total operator()(const Total& a, const Total& b) const { return Total(a.value + b.value); }
  };
  accel::cpu::Stream s;
  for (std::size_t n : sizes) {
    CAPTURE(n);
    const auto v = random_values<std::int32_t>(n, 10);
    auto in = make_buffer(v, s);
    CpuBuffer<std::int64_t> out(1, s);
    algo::reduce(s, in, out, Total(7), AddTotal{});
    s.synchronize();
    CHECK(out.span()[0] == std::accumulate(v.begin(), v.end(), std::int64_t{7}));
  }
}

TEST_CASE("inclusive_scan equals std::inclusive_scan (+, in place, a custom operator)") {
  accel::cpu::Stream s;
  for (std::size_t n : sizes) {
    CAPTURE(n);
    auto v = random_values<std::int32_t>(n, 5);
    for (auto& x : v) x %= 1000;
    auto in = make_buffer(v, s);
    CpuBuffer<std::int64_t> out(n, s);
    CpuBuffer<std::int32_t> running_max(n, s);
    algo::inclusive_scan(s, in, out);
    algo::inclusive_scan(s, in, running_max, [](std::int32_t a, std::int32_t b) { return std::max(a, b); });
    algo::inclusive_scan(s, in, in);  // in place
    s.synchronize();
    std::vector<std::int64_t> expected(n);
    std::inclusive_scan(v.begin(), v.end(), expected.begin(), std::plus<>{}, std::int64_t{0});
    std::vector<std::int32_t> expected_max(n);
    std::inclusive_scan(v.begin(), v.end(), expected_max.begin(),
                        [](std::int32_t a, std::int32_t b) { return std::max(a, b); });
    std::vector<std::int32_t> expected_in_place(n);
    std::inclusive_scan(v.begin(), v.end(), expected_in_place.begin());
    CHECK(to_vector(out) == expected);
    CHECK(to_vector(running_max) == expected_max);
    CHECK(to_vector(in) == expected_in_place);
  }
}

TEST_CASE_TEMPLATE("sort of random keys equals std::sort", T, std::int32_t, std::uint32_t, std::int64_t,
                   std::uint64_t, float, double) {
  accel::cpu::Stream s;
  for (std::size_t n : sizes) {
    CAPTURE(n);
    const auto v = random_values<T>(n, 6);
    auto ascending = make_buffer(v, s);
    auto descending = make_buffer(v, s);
    algo::sort(s, ascending);
    algo::sort(s, descending, std::greater<>{});
    s.synchronize();
    auto expected = v;
    std::sort(expected.begin(), expected.end());
    CHECK(to_vector(ascending) == expected);
    std::sort(expected.begin(), expected.end(), std::greater<>{});
    CHECK(to_vector(descending) == expected);
  }
}

TEST_CASE("sort of int keys with Thrust's own comparators (CCCL 3.0's host radix sort of int is worked around)") {
  accel::cpu::Stream s;
  for (std::size_t n : sizes) {
    CAPTURE(n);
    const auto v = random_values<int>(n, 9);
    auto less = make_buffer(v, s);
    auto greater = make_buffer(v, s);
    algo::sort(s, less, thrust::less<int>{});
    algo::sort(s, greater, thrust::greater<int>{});
    s.synchronize();
    auto expected = v;
    std::sort(expected.begin(), expected.end());
    CHECK(to_vector(less) == expected);
    std::sort(expected.begin(), expected.end(), std::greater<>{});
    CHECK(to_vector(greater) == expected);
  }
}

TEST_CASE("sort of a subspan leaves the rest alone; duplicates") {
  accel::cpu::Stream s;
  std::vector<std::int32_t> v(1001);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>((v.size() - i) % 17);
  auto b = make_buffer(v, s);
  algo::sort(s, algo::DeviceSpan(b).subspan(100, 801));
  s.synchronize();
  auto expected = v;
  std::sort(expected.begin() + 100, expected.begin() + 901);
  CHECK(to_vector(b) == expected);
}

TEST_CASE("for_each_n visits the first n elements") {
  accel::cpu::Stream s;
  for (std::size_t n : sizes) {
    CAPTURE(n);
    CpuBuffer<std::int32_t> b(n + 5, s);
    algo::fill(s, b, 1);
    algo::for_each_n(s, b, n, [](std::int32_t& x) { x += 41; });
    std::atomic<std::int64_t> seen{0};
    const CpuBuffer<std::int32_t>& read_only = b;
    algo::for_each_n(s, read_only, n + 5, [&seen](const std::int32_t& x) { seen += x; });
    s.synchronize();
    for (std::size_t i = 0; i < n + 5; ++i) REQUIRE(b.span()[i] == (i < n ? 42 : 1));
    CHECK(seen.load() == static_cast<std::int64_t>(42 * n + 5));
  }
}

TEST_CASE("stream order: calls return at once; work enqueued before runs before, work after sees the result") {
  accel::cpu::Stream s;
  CpuBuffer<std::int32_t> b(1000003, s);
  std::fill(b.span().begin(), b.span().end(), 0);
  Gate gate(s);
  // The producer below runs only after the gate opens; the algorithms must wait for it.
  s.enqueue([p = b.data(), n = b.size()] {
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::int32_t>((i * 7919) % 1000003);
  });
  algo::sort(s, b);
  algo::transform(s, b, b, [](std::int32_t x) { return x + 1; });
  auto total = algo::reduce(s, b, std::int64_t{0});
  std::int64_t seen_in_stream = -1;
  s.enqueue([&seen_in_stream, &total] { seen_in_stream = total.data()[0]; });
  // Nothing has run yet: every call above returned without waiting.
  CHECK_FALSE(s.query());
  CHECK(b.span()[1] == 0);
  gate.open();
  s.synchronize();
  const std::int64_t n = 1000003;
  CHECK(seen_in_stream == n * (n + 1) / 2);  // sort then +1 of a permutation of 0 .. n-1
  for (std::size_t i = 0; i < b.size(); ++i) REQUIRE(b.span()[i] == static_cast<std::int32_t>(i + 1));
}

TEST_CASE("streams run their algorithms independently; an event orders them") {
  accel::cpu::Stream a;
  accel::cpu::Stream c;
  const auto v = random_values<std::int32_t>(200001, 7);
  auto x = make_buffer(v, a);
  auto y = make_buffer(v, c);
  algo::sort(a, x);
  algo::sort(c, y, std::greater<>{});
  accel::cpu::Event done;
  done.record(a);
  c.wait(done);
  CpuBuffer<std::int32_t> z(v.size(), c);
  algo::transform(c, x, y, z, [](std::int32_t p, std::int32_t q) { return p < q ? p : q; });  // reads a's result
  x.record_stream(c);
  c.synchronize();
  auto expected = v;
  std::sort(expected.begin(), expected.end());
  for (std::size_t i = 0; i < v.size(); ++i) {
    REQUIRE(z.span()[i] == std::min(expected[i], expected[v.size() - 1 - i]));
  }
}

TEST_CASE("temporaries Thrust allocates through the policy come from the stream's caching allocator") {
  accel::cpu::Stream s;
#if defined(_OPENMP)
  // Four OpenMP threads on this stream's worker (a per-thread setting), so Thrust's OpenMP sort merges
  // four sorted chunks; the merges take their buffers from the policy's allocator. (Each chunk's own
  // sequential sort uses thrust::seq, whose scratch memory is Thrust's, not the policy's.) Without
  // OpenMP, Thrust's sequential radix sort takes its double buffer from the policy's allocator.
  s.enqueue([] { omp_set_num_threads(4); });
#endif
  const auto v = random_values<std::int64_t>(1 << 20, 8);
  auto b = make_buffer(v, s);
  s.synchronize();
  const int dev = s.device_index();
  const auto before = cpu.memory_stats(dev).flat();
  cpu.reset_peak_memory_stats(dev);
  algo::sort(s, b);
  s.synchronize();
  const auto after = cpu.memory_stats(dev).flat();
  CHECK(after.at("allocation.all.allocated") > before.at("allocation.all.allocated"));         // Thrust asked accel
  CHECK(after.at("allocated_bytes.all.current") == before.at("allocated_bytes.all.current"));  // and gave it back
  CHECK(after.at("allocated_bytes.all.peak") > static_cast<std::int64_t>(b.bytes()));
  CHECK(std::is_sorted(b.span().begin(), b.span().end()));
}

TEST_CASE("bad arguments are InvalidArgumentErrors naming what is wrong, word for word, and enqueue nothing") {
  accel::cpu::Stream s;
  const std::string at = "(cpu:" + std::to_string(s.device_index()) + "): ";
  CpuBuffer<float> ten(10, s);
  CpuBuffer<float> five(5, s);
  CpuBuffer<float> one(1, s);
  CpuBuffer<float> none(0, s);
  algo::fill(s, ten, 1.0f);
  algo::fill(s, five, 2.0f);
  s.synchronize();
  const auto identity = [](float x) { return x; };
  const auto add = [](float x, float y) { return x + y; };
  const std::string in_place_only = " (only the exact in-place case, the same address and element size, is allowed)";

  // Sizes: too small an output, mismatched inputs (either way round), one element said as such.
  CHECK(message_of([&] { algo::transform(s, ten, five, identity); }) ==
        "accel::algo::transform " + at + "out is too small: it holds 5 elements but in has 10");
  CHECK(message_of([&] { algo::transform(s, one, none, identity); }) ==
        "accel::algo::transform " + at + "out is too small: it holds 0 elements but in has 1");
  CHECK(message_of([&] { algo::transform(s, ten, five, ten, add); }) ==
        "accel::algo::transform " + at + "mismatched sizes: in1 has 10 elements and in2 has 5 elements");
  CHECK(message_of([&] { algo::transform(s, five, ten, ten, add); }) ==
        "accel::algo::transform " + at + "mismatched sizes: in1 has 5 elements and in2 has 10 elements");
  CHECK(message_of([&] { algo::transform(s, ten, ten, five, add); }) ==
        "accel::algo::transform " + at + "out is too small: it holds 5 elements but in1 has 10");
  CHECK(message_of([&] { algo::inclusive_scan(s, ten, five); }) ==
        "accel::algo::inclusive_scan " + at + "out is too small: it holds 5 elements but in has 10");
  CHECK(message_of([&] { algo::reduce(s, ten, none); }) ==
        "accel::algo::reduce " + at + "out is empty: the result needs 1 element");
  CHECK(message_of([&] { algo::for_each_n(s, five, 6, [](float&) {}); }) ==
        "accel::algo::for_each_n " + at + "n = 6 but data holds 5 elements");
  CHECK(message_of([&] { algo::for_each_n(s, one, 2, [](float&) {}); }) ==
        "accel::algo::for_each_n " + at + "n = 2 but data holds 1 element");
  CHECK(message_of([&] { (void)algo::DeviceSpan<float, CpuBackend>(nullptr, 3); }) ==
        "accel::algo::DeviceSpan: a null pointer with 3 elements");
  CHECK(message_of([&] { (void)algo::DeviceSpan(ten).subspan(8, 3); }) ==
        "accel::algo::DeviceSpan::subspan(8, 3): outside a span of 10 elements");
  // Overlaps: in place is fine, a shifted output is not; each input of a binary transform is checked
  // against the output; reduce's output may not lie in its input, not even as its first element.
  const algo::DeviceSpan<float, CpuBackend> all(ten);
  CHECK(message_of([&] { algo::transform(s, all.subspan(0, 9), all.subspan(1, 9), identity); }) ==
        "accel::algo::transform " + at + "out overlaps in" + in_place_only);
  CHECK(message_of([&] { algo::inclusive_scan(s, all.subspan(1, 9), all.subspan(0, 9)); }) ==
        "accel::algo::inclusive_scan " + at + "out overlaps in" + in_place_only);
  CHECK(message_of([&] { algo::transform(s, all.subspan(1, 4), algo::DeviceSpan(five).first(4), all.first(4), add); }) ==
        "accel::algo::transform " + at + "out overlaps in1" + in_place_only);
  CHECK(message_of([&] { algo::transform(s, five, all.subspan(1, 5), all.first(5), add); }) ==
        "accel::algo::transform " + at + "out overlaps in2" + in_place_only);
  CHECK(message_of([&] { algo::reduce(s, ten, all.subspan(9, 1)); }) == "accel::algo::reduce " + at + "out overlaps in");
  CHECK(message_of([&] { algo::reduce(s, ten, all.first(1)); }) == "accel::algo::reduce " + at + "out overlaps in");
  CHECK(message_of([&] { algo::transform(s, ten, ten, identity); }) == "(no InvalidArgumentError)");
  // A null span with no elements is an empty range.
  algo::fill(s, algo::DeviceSpan<float, CpuBackend>(nullptr, 0), 3.0f);
  s.synchronize();
  CHECK(std::all_of(ten.span().begin(), ten.span().end(), [](float x) { return x == 1.0f; }));  // nothing else ran
  CHECK(std::all_of(five.span().begin(), five.span().end(), [](float x) { return x == 2.0f; }));
}

TEST_CASE("the overlap check's edges: adjacent ranges, an empty range inside another, element sizes in bytes") {
  accel::cpu::Stream s;
  CpuBuffer<float> b(10, s);
  for (std::size_t i = 0; i < 10; ++i) b.span()[i] = static_cast<float>(i);
  const algo::DeviceSpan<float, CpuBackend> all(b);
  const auto plus_100 = [](float x) { return x + 100; };
  // Adjacent, either way round: no byte shared.
  algo::transform(s, all.first(5), all.subspan(5, 5), plus_100);  // out starts where in ends
  s.synchronize();
  for (std::size_t i = 0; i < 10; ++i) CHECK(b.span()[i] == (i < 5 ? i : i - 5 + 100.0f));
  algo::transform(s, all.subspan(5, 5), all.first(5), plus_100);  // in starts where out ends
  s.synchronize();
  for (std::size_t i = 0; i < 10; ++i) CHECK(b.span()[i] == (i < 5 ? i + 200.0f : i - 5 + 100.0f));
  // The binary form's second input in place.
  CpuBuffer<float> ones(10, s);
  algo::fill(s, ones, 1.0f);
  algo::transform(s, ones, b, b, [](float x, float y) { return x + y; });
  s.synchronize();
  CHECK(b.span()[0] == 201.0f);
  CHECK(b.span()[9] == 105.0f);
  // An empty range shares no memory, wherever it points.
  CHECK(message_of([&] { algo::transform(s, all.subspan(5, 0), all, plus_100); }) == "(no InvalidArgumentError)");
  CHECK(message_of([&] { algo::inclusive_scan(s, all.subspan(3, 0), all.subspan(2, 4)); }) == "(no InvalidArgumentError)");
  // ... even an empty input pointing inside the output's element (other element sizes: a byte span).
  CpuBuffer<std::int64_t> total(1, s);
  const algo::DeviceSpan<const std::uint8_t, CpuBackend> nothing(reinterpret_cast<const std::uint8_t*>(total.data()) + 1, 0);
  algo::reduce(s, nothing, total, std::int64_t{7});
  s.synchronize();
  CHECK(total.span()[0] == 7);
  // reduce writes out[0] alone: the rest of `out` may be the input.
  CpuBuffer<float> r(10, s);
  algo::fill(s, r, 2.0f);
  const algo::DeviceSpan<float, CpuBackend> rs(r);
  algo::reduce(s, rs.subspan(1, 9), rs);
  s.synchronize();
  CHECK(r.span()[0] == 18.0f);
  CHECK(r.span()[1] == 2.0f);
  // Element sizes count in bytes: doubles over floats at the same address are not "in place", and a
  // range of doubles reaches twice as far as as many floats.
  auto* base = b.data();
  const algo::DeviceSpan<double, CpuBackend> doubles_at_0(reinterpret_cast<double*>(base), 2);  // bytes 0-15
  const algo::DeviceSpan<double, CpuBackend> doubles_at_8(reinterpret_cast<double*>(base + 2), 4);  // bytes 8-39
  const std::string overlap = "accel::algo::transform (cpu:" + std::to_string(s.device_index()) + "): out overlaps in";
  const auto widen = [](float x) { return double{x}; };
  CHECK(contains(message_of([&] { algo::transform(s, all.first(2), doubles_at_0, widen); }), overlap));
  // floats at bytes 8-15 lie in the doubles' bytes 0-15
  CHECK(contains(message_of([&] { algo::transform(s, all.subspan(2, 2), doubles_at_0, widen); }), overlap));
  // doubles from byte 8 start inside the floats' bytes 0-15
  CHECK(contains(message_of([&] { algo::transform(s, all.first(4), doubles_at_8, widen); }), overlap));
  CHECK(message_of([&] { algo::transform(s, all.first(2), doubles_at_8, widen); }) == "(no InvalidArgumentError)");
  s.synchronize();
}

TEST_CASE("reduce_sync blocks: it waits for earlier work and reports an earlier task failure") {
  accel::cpu::Stream s;
  CpuBuffer<std::int32_t> b(1000, s);
  s.enqueue([p = b.data()] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::fill(p, p + 1000, 3);
  });
  CHECK(algo::reduce_sync(s, b) == 3000);
  s.enqueue([] { throw std::runtime_error("earlier task"); });
  CHECK_THROWS_AS((void)algo::reduce_sync(s, b), accel::TaskError);
  CHECK(algo::reduce_sync(s, b) == 3000);  // the failure was reported once; the stream is usable
}

TEST_CASE("ThrustAllocator: raw_alloc / raw_delete on its stream") {
  accel::cpu::Stream s;
  algo::ThrustAllocator<CpuBackend> alloc(s);
  CHECK(alloc.stream() == s.ref());
  char* p = alloc.allocate(4096);
  REQUIRE(p != nullptr);
  CHECK(cpu.on_accelerator(p));
  alloc.deallocate(p, 4096);
  CHECK(alloc == algo::ThrustAllocator<CpuBackend>(s));
  accel::cpu::Stream other;
  CHECK_FALSE(alloc == algo::ThrustAllocator<CpuBackend>(other));  // Thrust may not free one's memory through the other
}
