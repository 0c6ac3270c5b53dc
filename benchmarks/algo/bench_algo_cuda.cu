// accel/algo on CudaBackend against raw Thrust on the same stream, measured in the same run (GPU
// time: each iteration enqueues the call and synchronizes the stream):
//   thrust        thrust::cuda::par.on(stream) (temporaries: cudaMallocAsync / cudaFreeAsync on the
//                 stream; reduce returns the value, synchronizing)
//   thrust_nosync thrust::cuda::par_nosync.on(stream), the same temporaries
//   accel         accel::algo (par_nosync, temporaries from accel's caching allocator; reduce: CUB into
//                 a device buffer, then reduce_sync's copy to the host)
// Sort (float, uint32 keys), reduce (float sum), inclusive_scan (float) of 2^16 .. 2^26 elements. Each
// sort iteration first copies the same unsorted keys (device to device) in every variant. The summary
// prints ratios raw / accel (> 1: accel faster). Without a CUDA device it says why and exits 0.
// Inputs are generated once per (type, size) and shared by every variant and repetition (generating
// 2^26 values on the host at each of Google Benchmark's calls took most of the run). Default
// --benchmark_min_time=0.05 (about 20-30 s for the whole run on an H100); the command line overrides it.
#include <accel/algo/algo.hpp>
#include <accel/cuda/backend.hpp>

#include "../bench_support.hpp"

#include <benchmark/benchmark.h>

#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sort.h>
#include <thrust/system/cuda/execution_policy.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

using accel::CudaBackend;
namespace algo = accel::algo;
constexpr CudaBackend gpu{};

std::optional<accel::cuda::Stream> stream;  // created in main once a device is known

enum class Impl { thrust, thrust_nosync, accel };
const char* impl_name(Impl i) {
  switch (i) {
    case Impl::thrust: return "thrust";
    case Impl::thrust_nosync: return "thrust_nosync";
    case Impl::accel: return "accel";
  }
  return "?";
}

template <class T>
accel::Buffer<T, CudaBackend> make_random_device_values(std::size_t n) {
  std::mt19937_64 gen(42);
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> d(-1e6, 1e6);
    for (auto& x : v) x = d(gen);
  } else {
    for (auto& x : v) x = static_cast<T>(gen());
  }
  accel::Buffer<T, CudaBackend> b(n, *stream);
  gpu.copy_async(*stream, b.data(), v.data(), b.bytes());
  stream->synchronize();
  return b;
}

// The inputs, made once per (type, size): the same values as before for every variant and call.
template <class T>
std::map<std::size_t, accel::Buffer<T, CudaBackend>>& input_cache() {
  static std::map<std::size_t, accel::Buffer<T, CudaBackend>> cache;
  return cache;
}
template <class T>
const accel::Buffer<T, CudaBackend>& random_device_values(std::size_t n) {
  auto& cache = input_cache<T>();
  auto it = cache.find(n);
  if (it == cache.end()) it = cache.emplace(n, make_random_device_values<T>(n)).first;
  return it->second;
}
void release_inputs() {  // before the stream goes
  input_cache<float>().clear();
  input_cache<std::uint32_t>().clear();
}

template <class T>
void bench_sort(benchmark::State& state, Impl impl) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& keys = random_device_values<T>(n);
  accel::Buffer<T, CudaBackend> b(n, *stream);
  const cudaStream_t s = stream->get();
  for (auto _ : state) {
    gpu.copy_async(*stream, b.data(), keys.data(), b.bytes());
    switch (impl) {
      case Impl::thrust: thrust::sort(thrust::cuda::par.on(s), b.data(), b.data() + n); break;
      case Impl::thrust_nosync: thrust::sort(thrust::cuda::par_nosync.on(s), b.data(), b.data() + n); break;
      case Impl::accel: algo::sort(*stream, b); break;
    }
    stream->synchronize();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

void bench_reduce(benchmark::State& state, Impl impl) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& values = random_device_values<float>(n);
  const cudaStream_t s = stream->get();
  for (auto _ : state) {
    float r = 0;
    switch (impl) {
      case Impl::thrust: r = thrust::reduce(thrust::cuda::par.on(s), values.data(), values.data() + n, 0.0f); break;
      case Impl::thrust_nosync:
        r = thrust::reduce(thrust::cuda::par_nosync.on(s), values.data(), values.data() + n, 0.0f);
        break;
      case Impl::accel: r = algo::reduce_sync(*stream, values, 0.0f); break;
    }
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float)));
}

void bench_scan(benchmark::State& state, Impl impl) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& values = random_device_values<float>(n);
  accel::Buffer<float, CudaBackend> out(n, *stream);
  const cudaStream_t s = stream->get();
  for (auto _ : state) {
    switch (impl) {
      case Impl::thrust:
        thrust::inclusive_scan(thrust::cuda::par.on(s), values.data(), values.data() + n, out.data());
        break;
      case Impl::thrust_nosync:
        thrust::inclusive_scan(thrust::cuda::par_nosync.on(s), values.data(), values.data() + n, out.data());
        break;
      case Impl::accel: algo::inclusive_scan(*stream, values, out); break;
    }
    stream->synchronize();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float) * 2));
}

}  // namespace

int main(int argc, char** argv) {
  if (!gpu.is_available()) {
    std::printf("bench_algo_cuda: no CUDA device (%s); nothing to measure\n", gpu.availability().reason.c_str());
    return 0;
  }
  accel_bench::Report report("algo_cuda", argc, argv);
  const int rounds = accel_bench::take_rounds(argc, argv, 3);
  // A short default minimum time (the command line, --smoke included, comes after it and wins).
  const bool smoke = accel_bench::initialize(argc, argv, {"--benchmark_min_time=0.05"});
  report.set_device(gpu.product_name(0));
  report.print_header(gpu.product_name(0));
  stream.emplace();

  const std::vector<std::int64_t> sizes{1 << 16, 1 << 20, 1 << 24, 1 << 26};
  const std::vector<std::string> algorithms{"sort_float", "sort_uint32", "reduce_float", "scan_float"};
  const auto reg = [&](const std::string& name, auto fn) {
    for (const auto n : sizes) {
      for (const Impl impl : {Impl::thrust, Impl::thrust_nosync, Impl::accel}) {
        benchmark::RegisterBenchmark((name + "/" + impl_name(impl)).c_str(), fn, impl)
            ->Arg(n)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  };
  reg("sort_float", bench_sort<float>);
  reg("sort_uint32", bench_sort<std::uint32_t>);
  reg("reduce_float", bench_reduce);
  reg("scan_float", bench_scan);

  accel_bench::Recorder reporter;
  report.set_rounds(accel_bench::run_rounds(reporter, smoke ? 1 : rounds));

  std::printf("\nwall us per call + stream synchronize (median of the interleaved rounds) on %s; "
              "ratio = raw / accel (> 1: accel faster)\n",
              gpu.product_name(stream->device_index()).c_str());
  std::printf("%-13s %9s %11s %14s %11s %14s %16s\n", "algorithm", "n", "thrust us", "nosync us", "accel us",
              "thrust/accel", "nosync/accel");
  for (const auto& a : algorithms) {
    for (const auto n : sizes) {
      const auto key = [&](Impl i) { return a + "/" + impl_name(i) + "/" + std::to_string(n); };
      const auto get = [&](Impl i) { return reporter.real_ns(key(i)).median * 1e-3; };
      for (const Impl i : {Impl::thrust, Impl::thrust_nosync}) {
        if (reporter.has(key(i)) && reporter.has(key(Impl::accel))) {
          report.ratio("accel", impl_name(i), a, double(n),
                       accel_bench::ratio_per_round(reporter.values(key(i), "real_ns"),
                                                    reporter.values(key(Impl::accel), "real_ns")));
        }
      }
      const double t = get(Impl::thrust), u = get(Impl::thrust_nosync), x = get(Impl::accel);
      if (x <= 0) continue;
      std::printf("%-13s %9lld %11.1f %14.1f %11.1f %13.2fx %15.2fx\n", a.c_str(), static_cast<long long>(n), t, u, x,
                  t / x, u / x);
    }
  }
  report.write();
  release_inputs();
  stream.reset();
  benchmark::Shutdown();
  return 0;
}
