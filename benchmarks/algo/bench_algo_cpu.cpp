// accel/algo on CpuBackend against the code it replaces, measured in the same run (wall-clock time,
// the work is multi-threaded):
//   std::      the sequential standard algorithm (std::sort, std::reduce, std::inclusive_scan)
//   thrust     the raw Thrust call on thrust::omp::par (temporaries from malloc)
//   accel      accel::algo on the device's default stream (runs inline: the call returns when done)
//   accel+sync accel::algo on a worker stream, then stream.synchronize() (enqueue, wake-up, wait)
// Each sort iteration first copies the same unsorted keys into the buffer (in every variant).
// Keys: float, uint32 and int32. For int32 CCCL 3.0's host radix sort is wrong (NVIDIA/cccl#4919) and
// accel sorts sign-flipped unsigned keys instead; the raw Thrust figure is then a wrong result's time.
// The summary prints each figure in ms and as ratios (> 1: accel faster).
#include <accel/algo/algo.hpp>
#include <accel/cpu/backend.hpp>

#include "../bench_support.hpp"

#include <benchmark/benchmark.h>

#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sort.h>
#include <thrust/system/omp/execution_policy.h>

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

using accel::CpuBackend;
namespace algo = accel::algo;

std::optional<accel::cpu::Stream> worker;  // created in main

enum class Impl { std_, thrust, accel, accel_worker };
constexpr Impl impls[] = {Impl::std_, Impl::thrust, Impl::accel, Impl::accel_worker};
const char* impl_name(Impl i) {
  switch (i) {
    case Impl::std_: return "std";
    case Impl::thrust: return "thrust";
    case Impl::accel: return "accel";
    case Impl::accel_worker: return "accel+sync";
  }
  return "?";
}

template <class T>
std::vector<T> random_keys(std::size_t n) {
  std::mt19937_64 gen(42);
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> d(-1e6, 1e6);
    for (auto& x : v) x = d(gen);
  } else {
    std::uniform_int_distribution<T> d(std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
    for (auto& x : v) x = d(gen);
  }
  return v;
}

accel::cpu::StreamRef stream_of(Impl impl) {
  return impl == Impl::accel_worker ? worker->ref() : CpuBackend::default_stream();
}

// Every variant works on the same memory: buffers from the caching allocator (large blocks are 2 MiB
// aligned, which costs some streaming loops a few per cent against malloc'd vectors; measuring all
// variants on the same memory keeps that out of the ratios).

template <class T>
void bench_sort(benchmark::State& state, Impl impl) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto keys = random_keys<T>(n);
  const accel::cpu::StreamRef s = stream_of(impl);
  accel::Buffer<T, CpuBackend> b(n, s);
  T* const p = b.data();
  for (auto _ : state) {
    std::copy(keys.begin(), keys.end(), p);
    switch (impl) {
      case Impl::std_: std::sort(p, p + n); break;
      case Impl::thrust: thrust::sort(thrust::omp::par, p, p + n); break;
      case Impl::accel:
      case Impl::accel_worker:
        algo::sort(s, b);
        s.synchronize();
        break;
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

void bench_reduce(benchmark::State& state, Impl impl) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto values = random_keys<float>(n);
  const accel::cpu::StreamRef s = stream_of(impl);
  accel::Buffer<float, CpuBackend> b(n, s);
  const float* const p = b.data();
  std::copy(values.begin(), values.end(), b.data());
  for (auto _ : state) {
    float r = 0;
    switch (impl) {
      case Impl::std_: r = std::reduce(p, p + n, 0.0f); break;
      case Impl::thrust: r = thrust::reduce(thrust::omp::par, p, p + n, 0.0f); break;
      case Impl::accel:
      case Impl::accel_worker: r = algo::reduce_sync(s, b, 0.0f); break;
    }
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float)));
}

void bench_scan(benchmark::State& state, Impl impl) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto values = random_keys<float>(n);
  const accel::cpu::StreamRef s = stream_of(impl);
  accel::Buffer<float, CpuBackend> in(n, s);
  accel::Buffer<float, CpuBackend> out(n, s);
  std::copy(values.begin(), values.end(), in.data());
  const float* const i = in.data();
  float* const o = out.data();
  for (auto _ : state) {
    switch (impl) {
      case Impl::std_: std::inclusive_scan(i, i + n, o); break;
      case Impl::thrust: thrust::inclusive_scan(thrust::omp::par, i, i + n, o); break;
      case Impl::accel:
      case Impl::accel_worker:
        algo::inclusive_scan(s, in, out);
        s.synchronize();
        break;
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float) * 2));
}

}  // namespace

int main(int argc, char** argv) {
  accel_bench::Report report("algo_cpu", argc, argv);
  const int rounds = accel_bench::take_rounds(argc, argv, 3);
  const bool smoke = accel_bench::initialize(argc, argv);
  report.print_header();
  worker.emplace();

  // --smoke (CI, where the benchmarks are built at -O0): the smallest size only — every path runs.
  const std::vector<std::int64_t> sizes =
      smoke ? std::vector<std::int64_t>{1 << 16} : std::vector<std::int64_t>{1 << 16, 1 << 20, 1 << 23};
  const std::vector<std::string> algorithms{"sort_float", "sort_uint32", "sort_int32", "reduce_float", "scan_float"};
  // Interleaved (each size of each algorithm runs its four variants one after the other), so that a
  // change in the machine's load affects the variants compared in one row alike.
  const auto reg = [&](const std::string& name, auto fn) {
    for (const auto n : sizes) {
      for (const Impl impl : impls) {
        benchmark::RegisterBenchmark((name + "/" + impl_name(impl)).c_str(), fn, impl)
            ->Arg(n)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  };
  reg("sort_float", bench_sort<float>);
  reg("sort_uint32", bench_sort<std::uint32_t>);
  reg("sort_int32", bench_sort<std::int32_t>);
  reg("reduce_float", bench_reduce);
  reg("scan_float", bench_scan);

  accel_bench::Recorder reporter;
  report.set_rounds(accel_bench::run_rounds(reporter, smoke ? 1 : rounds));

  std::printf("\nwall ms per call (median of %d interleaved rounds), %d OpenMP threads; "
              "ratio = baseline / accel (> 1: accel faster)\n",
              smoke ? 1 : rounds, omp_get_max_threads());
  std::printf("%-13s %9s %10s %10s %10s %11s %12s %12s %12s\n", "algorithm", "n", "std ms", "thrust ms", "accel ms",
              "accel+sync", "std/accel", "thrust/accel", "thrust/a+sync");
  for (const auto& a : algorithms) {
    for (const auto n : sizes) {
      const auto key = [&](Impl i) { return a + "/" + impl_name(i) + "/" + std::to_string(n); };
      const auto get = [&](Impl i) { return reporter.real_ns(key(i)).median * 1e-6; };
      for (const Impl i : impls) {
        if (reporter.has(key(i))) report.point(impl_name(i), a, double(n), "ms", accel_bench::scaled(reporter.real_ns(key(i)), 1e-6));
      }
      for (const Impl i : {Impl::std_, Impl::thrust}) {
        if (reporter.has(key(i)) && reporter.has(key(Impl::accel))) {
          report.ratio("accel", impl_name(i), a, double(n),
                       accel_bench::ratio_per_round(reporter.values(key(i), "real_ns"),
                                                    reporter.values(key(Impl::accel), "real_ns")));
        }
      }
      const double s = get(Impl::std_), t = get(Impl::thrust), x = get(Impl::accel), w = get(Impl::accel_worker);
      if (x <= 0) continue;
      std::printf("%-13s %9lld %10.3f %10.3f %10.3f %11.3f %11.2fx %11.2fx %11.2fx\n", a.c_str(),
                  static_cast<long long>(n), s, t, x, w, s / x, t / x, t / w);
    }
  }
  std::printf("(sort_int32: raw Thrust sorts int keys in the wrong order on CCCL < 3.1, NVIDIA/cccl#4919; "
              "accel does not)\n");
  report.write();
  worker.reset();
  benchmark::Shutdown();
  return 0;
}
