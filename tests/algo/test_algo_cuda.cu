// accel/algo on CudaBackend, in a translation unit compiled by nvcc: every algorithm against the
// standard library on a GPU (sizes 0, 1, odd, ~1e6), asynchrony and stream order, temporaries from the
// caching allocator. Without a GPU every CUDA case says SKIPPED; the CpuBackend case still runs (in an
// nvcc translation unit without -Xcompiler -fopenmp the CPU path is Thrust's sequential system).
#include <accel/algo/algo.hpp>
#include <accel/cuda/backend.hpp>

#include <doctest/doctest.h>

#include <cuda/functional>
#include <cuda/std/functional>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

namespace {

using accel::CudaBackend;
namespace algo = accel::algo;
template <class T>
using GpuBuffer = accel::Buffer<T, CudaBackend>;

constexpr CudaBackend gpu{};
const std::vector<std::size_t> sizes{0, 1, 1001, 1000003};

#define SKIP_WITHOUT_GPU()                                                \
  do {                                                                    \
    if (!gpu.is_available()) {                                           \
      MESSAGE("SKIPPED: no CUDA device: " << gpu.availability().reason); \
      return;                                                             \
    }                                                                     \
  } while (false)

template <class T>
GpuBuffer<T> upload(const std::vector<T>& v, accel::cuda::StreamRef s) {
  GpuBuffer<T> b(v.size(), s);
  gpu.copy_async(s, b.data(), v.data(), b.bytes());
  s.synchronize();  // v is pageable: keep it alive until the copy ran
  return b;
}

template <class T>
std::vector<T> download(const GpuBuffer<T>& b, accel::cuda::StreamRef s) {
  std::vector<T> v(b.size());
  gpu.copy_async(s, v.data(), b.data(), b.bytes());
  s.synchronize();
  return v;
}

std::vector<std::int32_t> random_ints(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::int32_t> dist(-1000000, 1000000);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

struct Square {
  __host__ __device__ float operator()(std::int32_t x) const { return static_cast<float>(x) * static_cast<float>(x); }
};

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

TEST_CASE("CpuBackend algorithms compile and run in an nvcc translation unit") {
  accel::cpu::Stream s;
  auto v = random_ints(10001, 1);
  accel::Buffer<std::int32_t, accel::CpuBackend> b(v.size(), s);
  std::copy(v.begin(), v.end(), b.span().begin());
  algo::sort(s, b);
  const auto total = algo::reduce_sync(s, b, std::int64_t{0});
  std::sort(v.begin(), v.end());
  CHECK(std::equal(v.begin(), v.end(), b.span().begin()));
  CHECK(total == std::accumulate(v.begin(), v.end(), std::int64_t{0}));
}

TEST_CASE("fill, transform, for_each_n on the GPU") {
  SKIP_WITHOUT_GPU();
  CudaBackend::Stream s;
  for (std::size_t n : sizes) {
    CAPTURE(n);
    const auto v = random_ints(n, 2);
    auto in = upload(v, s);
    GpuBuffer<float> squares(n, s);
    GpuBuffer<std::int32_t> filled(n, s);
    GpuBuffer<std::int32_t> diff(n, s);
    algo::transform(s, in, squares, Square{});
    algo::fill(s, filled, 7);
    algo::transform(s, in, filled, diff, ::cuda::std::minus<>{});
    algo::for_each_n(s, filled, n / 2, [] __device__(std::int32_t & x) { x *= 3; });
    const auto sq = download(squares, s);
    const auto fi = download(filled, s);
    const auto di = download(diff, s);
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(sq[i] == static_cast<float>(v[i]) * static_cast<float>(v[i]));
      REQUIRE(fi[i] == (i < n / 2 ? 21 : 7));
      REQUIRE(di[i] == v[i] - 7);
    }
  }
}

TEST_CASE("reduce (asynchronous into a buffer, returned buffer) and reduce_sync on the GPU") {
  SKIP_WITHOUT_GPU();
  CudaBackend::Stream s;
  for (std::size_t n : sizes) {
    CAPTURE(n);
    const auto v = random_ints(n, 3);
    auto in = upload(v, s);
    const std::int64_t expected = std::accumulate(v.begin(), v.end(), std::int64_t{11});
    GpuBuffer<std::int64_t> out(1, s);
    algo::reduce(s, in, out, std::int64_t{11});
    auto returned = algo::reduce(s, in, std::int64_t{11});
    CHECK(download(out, s)[0] == expected);
    CHECK(download(returned, s)[0] == expected);
    CHECK(algo::reduce_sync(s, in, std::int64_t{11}) == expected);
    const std::int32_t max = algo::reduce_sync(s, in, INT32_MIN, ::cuda::maximum<>{});
    CHECK(max == (n == 0 ? INT32_MIN : *std::max_element(v.begin(), v.end())));
  }
}

TEST_CASE("inclusive_scan and sort on the GPU equal the standard library") {
  SKIP_WITHOUT_GPU();
  CudaBackend::Stream s;
  for (std::size_t n : sizes) {
    CAPTURE(n);
    auto v = random_ints(n, 4);
    auto in = upload(v, s);
    GpuBuffer<std::int32_t> scanned(n, s);
    algo::inclusive_scan(s, in, scanned, ::cuda::maximum<>{});
    auto keys = upload(v, s);
    algo::sort(s, keys);
    std::vector<float> f(v.begin(), v.end());
    auto fkeys = upload(f, s);
    algo::sort(s, fkeys, ::cuda::std::greater<>{});
    std::vector<std::int32_t> expected_scan(n);
    std::inclusive_scan(v.begin(), v.end(), expected_scan.begin(),
                        [](std::int32_t a, std::int32_t b) { return std::max(a, b); });
    CHECK(download(scanned, s) == expected_scan);
    std::sort(v.begin(), v.end());
    CHECK(download(keys, s) == v);
    std::sort(f.begin(), f.end(), std::greater<>{});
    CHECK(download(fkeys, s) == f);
  }
}

TEST_CASE("asynchronous and stream-ordered: calls return while the stream is busy; temporaries are cached") {
  SKIP_WITHOUT_GPU();
  CudaBackend::Stream s;
  auto v = random_ints(1 << 20, 5);
  for (auto& x : v) x %= 1000;  // prefix sums stay within int32
  auto keys = upload(v, s);
  algo::sort(s, keys);  // warm the allocator's cache
  s.synchronize();
  const int dev = s.device_index();
  const auto before = gpu.memory_stats(dev).flat();
  auto shuffled = upload(v, s);
  spin<<<1, 1, 0, s.get()>>>(2'000'000'000LL);  // ~1 s of a busy GPU ahead of the algorithms
  algo::sort(s, shuffled);
  auto total = algo::reduce(s, shuffled, std::int64_t{0});
  algo::inclusive_scan(s, shuffled, shuffled);
  CHECK_FALSE(s.query());  // nothing waited for the spinning kernel
  s.synchronize();
  const auto after = gpu.memory_stats(dev).flat();
  CHECK(after.at("allocation.all.allocated") > before.at("allocation.all.allocated"));  // temporaries: accel's
  CHECK(after.at("num_alloc_retries") == before.at("num_alloc_retries"));
  auto sorted = v;
  std::sort(sorted.begin(), sorted.end());
  CHECK(download(total, s)[0] == std::accumulate(v.begin(), v.end(), std::int64_t{0}));
  std::inclusive_scan(sorted.begin(), sorted.end(), sorted.begin());
  CHECK(download(shuffled, s) == sorted);
}

TEST_CASE("a DeviceSpan's first() and subspan() on the GPU: only those elements change") {
  SKIP_WITHOUT_GPU();
  CudaBackend::Stream s;
  const auto v = random_ints(1000, 5);
  auto b = upload(v, s);
  const algo::DeviceSpan all(b);
  algo::sort(s, all.first(600));
  algo::fill(s, all.subspan(600, 400).first(100), 9);
  const auto got = download(b, s);
  auto expected = v;
  std::sort(expected.begin(), expected.begin() + 600);
  std::fill(expected.begin() + 600, expected.begin() + 700, 9);
  CHECK(got == expected);
  CHECK_THROWS_AS((void)all.first(1001), accel::InvalidArgumentError);
}

TEST_CASE("bad arguments on CudaBackend are InvalidArgumentErrors") {
  SKIP_WITHOUT_GPU();
  CudaBackend::Stream s;
  GpuBuffer<float> ten(10, s);
  GpuBuffer<float> five(5, s);
  CHECK_THROWS_AS(algo::transform(s, ten, five, ::cuda::std::negate<>{}), accel::InvalidArgumentError);
  CHECK_THROWS_AS(algo::transform(s, ten, five, ten, ::cuda::std::plus<>{}), accel::InvalidArgumentError);
  CHECK_THROWS_AS(algo::for_each_n(s, five, 6, ::cuda::std::negate<>{}), accel::InvalidArgumentError);
}
