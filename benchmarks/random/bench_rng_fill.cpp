// Uniform float fill throughput on the host: accel::rng::fill_uniform against cuRAND's host
// generator (curandGenerateUniform, same numbers), std::mt19937 + std::uniform_real_distribution
// (one engine per thread), and the write bandwidth of std::fill and memset over the same buffer,
// all in one run at 1 and 2 OpenMP threads. GB/s counts bytes written. The ratios printed at the
// end compare accel with each baseline at the same thread count, best repetition of each.
//
//   bench_rng_fill [--smoke] [google benchmark flags]
// --smoke: a 256 KiB buffer and short runs; checks that everything runs, says nothing about speed.
#include "bench_support.hpp"

#include <accel/random/fill.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#if defined(ACCEL_BENCH_HAS_CURAND)
#include <curand.h>
#endif
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace {

std::size_t g_count = std::size_t{1} << 24;  // 64 MiB of floats: twice the L3 of the dev VM

// One buffer for every benchmark, first touched here so no run pays for page faults.
std::span<float> buffer() {
  static std::vector<float> data(g_count, 1.0f);
  return data;
}

bool use_threads(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
#if defined(_OPENMP)
  omp_set_num_threads(threads);
  return true;
#else
  if (threads == 1) return true;
  state.SkipWithError("built without OpenMP");
  return false;
#endif
}

void finish(benchmark::State& state, std::span<float> out) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(out.size_bytes()));
}

void accel_fill_uniform(benchmark::State& state) {
  if (!use_threads(state)) return;
  const std::span<float> out = buffer();
  std::uint64_t offset = 0;
  for (auto _ : state) {
    accel::rng::fill_uniform(out, 42, offset);
    offset += out.size();
    benchmark::ClobberMemory();
  }
  finish(state, out);
}

#if defined(ACCEL_BENCH_HAS_CURAND)
// cuRAND's host generator uses its own threads (if any); the OpenMP setting does not reach it.
void curand_host_uniform(benchmark::State& state) {
  if (!use_threads(state)) return;
  const std::span<float> out = buffer();
  curandGenerator_t gen{};
  if (curandCreateGeneratorHost(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10) != CURAND_STATUS_SUCCESS ||
      curandSetPseudoRandomGeneratorSeed(gen, 42) != CURAND_STATUS_SUCCESS) {
    state.SkipWithError("curandCreateGeneratorHost failed");
    return;
  }
  for (auto _ : state) {
    if (curandGenerateUniform(gen, out.data(), out.size()) != CURAND_STATUS_SUCCESS) {
      state.SkipWithError("curandGenerateUniform failed");
      break;
    }
    benchmark::ClobberMemory();
  }
  curandDestroyGenerator(gen);
  finish(state, out);
}
#endif

// The usual C++ way, given every thread: one engine per thread over a contiguous share.
void mt19937_uniform(benchmark::State& state) {
  if (!use_threads(state)) return;
  const std::span<float> out = buffer();
  const auto threads = static_cast<std::size_t>(state.range(0));
  std::vector<std::mt19937> engines;
  for (std::size_t t = 0; t < threads; ++t) engines.emplace_back(static_cast<std::uint32_t>(42 + t));
  const std::int64_t parts = static_cast<std::int64_t>(threads);
  for (auto _ : state) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(static, 1)
#endif
    for (std::int64_t t = 0; t < parts; ++t) {
      const std::size_t begin = out.size() * static_cast<std::size_t>(t) / threads;
      const std::size_t end = out.size() * static_cast<std::size_t>(t + 1) / threads;
      std::uniform_real_distribution<float> dist(0.0f, 1.0f);
      auto& engine = engines[static_cast<std::size_t>(t)];
      for (std::size_t i = begin; i < end; ++i) out[i] = dist(engine);
    }
    benchmark::ClobberMemory();
  }
  finish(state, out);
}

// The write ceiling with ordinary stores, as the fill makes them.
void write_std_fill(benchmark::State& state) {
  if (!use_threads(state)) return;
  const std::span<float> out = buffer();
  const std::int64_t chunks = 64;
  float value = 0.0f;
  for (auto _ : state) {
    value += 1.0f;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::size_t begin = out.size() * static_cast<std::size_t>(c) / chunks;
      const std::size_t end = out.size() * static_cast<std::size_t>(c + 1) / chunks;
      std::fill(out.begin() + static_cast<std::ptrdiff_t>(begin), out.begin() + static_cast<std::ptrdiff_t>(end),
                value);
    }
    benchmark::ClobberMemory();
  }
  finish(state, out);
}

// glibc's memset, which switches to non-temporal stores for large sizes: the higher ceiling.
void write_memset(benchmark::State& state) {
  if (!use_threads(state)) return;
  const std::span<float> out = buffer();
  const std::int64_t chunks = 64;
  int byte = 0;
  for (auto _ : state) {
    byte = (byte + 1) & 0x7f;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::size_t begin = out.size() * static_cast<std::size_t>(c) / chunks;
      const std::size_t end = out.size() * static_cast<std::size_t>(c + 1) / chunks;
      std::memset(out.data() + begin, byte, (end - begin) * sizeof(float));
    }
    benchmark::ClobberMemory();
  }
  finish(state, out);
}

using bench_rng::RateRecorder;

void print_ratios(const RateRecorder& recorder) {
  const auto rate = [&](const std::string& name, const std::string& threads) { return recorder.rate(name, threads); };
  std::printf("\nuniform float fill, %zu floats (%.0f MiB), best of the repetitions; GB/s = 1e9 B/s (the table\n"
              "above shows GiB/s); the other columns are accel's rate over each baseline's\n",
              g_count, static_cast<double>(g_count * sizeof(float)) / (1 << 20));
  std::printf("%-10s %10s %14s %14s %16s %14s\n", "threads", "accel GB/s", "/curand-host", "/mt19937",
              "/write(std::fill)", "/write(memset)");
  for (const char* threads : {"threads:1", "threads:2"}) {
    const double accel = rate("accel_fill_uniform", threads);
    if (accel == 0.0) continue;
    const auto ratio = [&](const char* baseline) {
      const double b = rate(baseline, threads);
      return b == 0.0 ? 0.0 : accel / b;
    };
    std::printf("%-10s %10.2f %14.2f %14.2f %16.2f %14.2f\n", threads, accel / 1e9, ratio("curand_host_uniform"),
                ratio("mt19937_uniform"), ratio("write_std_fill"), ratio("write_memset"));
  }
  std::printf("(0.00: baseline not built or not run)\n");
}

}  // namespace

namespace {
// Threads 1 and 2, wall-clock time (OpenMP threads are not the benchmark's threads), and a "max"
// statistic so that repetitions report their best rate.
void configure(benchmark::internal::Benchmark* b) {
  b->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
  bench_rng::add_max_statistic(b);
}
}  // namespace

BENCHMARK(accel_fill_uniform)->Apply(configure);
#if defined(ACCEL_BENCH_HAS_CURAND)
BENCHMARK(curand_host_uniform)->Apply(configure);
#endif
BENCHMARK(mt19937_uniform)->Apply(configure);
BENCHMARK(write_std_fill)->Apply(configure);
BENCHMARK(write_memset)->Apply(configure);

int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  if (bench_rng::take_smoke_flag(args)) g_count = std::size_t{1} << 16;
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  benchmark::AddCustomContext("accel.simd",
#if defined(__AVX512F__)
                              "AVX-512"
#elif defined(__AVX2__)
                              "AVX2"
#elif defined(ACCEL_DETAIL_PHILOX_SIMD)
                              "SSE2"
#else
                              "portable loop"
#endif
  );
  (void)buffer();
  RateRecorder recorder;
  benchmark::RunSpecifiedBenchmarks(&recorder);
  print_ratios(recorder);
  benchmark::Shutdown();
  return 0;
}
