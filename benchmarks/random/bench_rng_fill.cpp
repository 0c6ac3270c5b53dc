// Uniform float fill throughput on the host: accel::rng::fill_uniform against cuRAND's host
// generator (curandGenerateUniform, same numbers), std::mt19937 + std::uniform_real_distribution
// (one engine per thread), and the write bandwidth of std::fill and memset over the same buffer,
// all in one run at 1 and 2 OpenMP threads. GB/s counts bytes written. The ratios printed at the
// end compare accel with each baseline at the same thread count: medians (min-max) of interleaved
// rounds, ratios taken round by round. Then each Philox kernel the CPU runs (portable loop, SSE2, AVX2,
// AVX-512) alone on one thread: the fills pick the widest at run time, in this build and in
// bench_rng_fill_native alike (which differs only in the transforms, compiled for -march=native).
//
//   bench_rng_fill [--rounds=N] [--json=FILE] [--smoke] [google benchmark flags]
// --smoke: a 256 KiB buffer and short runs; checks that everything runs, says nothing about speed.
#include "../bench_support.hpp"

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

// One Philox kernel alone (one thread, blocks into an L1-resident scratch, as a fill's batch does):
// what each instruction set gives, whichever the fills chose. Bytes = the 16 bytes of each block.
void philox_kernel(benchmark::State& state) {
  using accel::rng::fill_detail::PhiloxKernel;
  const auto k = static_cast<PhiloxKernel>(state.range(0));
  if (!accel::rng::fill_detail::philox_kernel_runs(k)) {
    state.SkipWithError("this CPU does not run the kernel");
    return;
  }
  constexpr std::size_t lanes = accel::rng::fill_detail::fill_batch_groups;
  std::vector<accel::rng::u32> scratch(4 * (lanes + accel::rng::fill_detail::fill_lane_slack));
  const std::size_t blocks = g_count / 4;
  accel::rng::U32x4 counter{0, 0, 0, 0};
  for (auto _ : state) {
    for (std::size_t done = 0; done < blocks; done += lanes) {
      accel::rng::fill_detail::philox_run_with(k, counter, {42, 0}, lanes, scratch.data(), 0, false);
      counter.z += static_cast<accel::rng::u32>(lanes);
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(blocks * 16));
  state.SetLabel(accel::rng::fill_detail::philox_kernel_name(k));
}

void print_kernels(const accel_bench::Recorder& r, accel_bench::Report& report) {
  using accel::rng::fill_detail::PhiloxKernel;
  const auto key = [](PhiloxKernel k) { return "philox_kernel/kernel:" + std::to_string(static_cast<int>(k)); };
  if (!r.has(key(PhiloxKernel::sse2))) return;
  std::printf("\nPhilox kernels alone, 1 thread, GB/s of blocks (the fills use %s); rate over SSE2's, round by round\n",
              accel::rng::fill_detail::philox_kernel_name(accel::rng::fill_detail::philox_kernel()));
  for (const PhiloxKernel k : {PhiloxKernel::portable, PhiloxKernel::sse2, PhiloxKernel::avx2, PhiloxKernel::avx512}) {
    if (!r.has(key(k))) continue;
    const char* name = accel::rng::fill_detail::philox_kernel_name(k);
    const auto gbps = accel_bench::scaled(r.counter(key(k), "bytes_per_second"), 1e-9);
    report.point(std::string("philox_") + name, "", 1, "GB/s", gbps);
    const auto x = accel_bench::ratio_per_round(r.values(key(k), "bytes_per_second"),
                                                r.values(key(PhiloxKernel::sse2), "bytes_per_second"));
    if (k != PhiloxKernel::sse2) report.ratio(std::string("philox_") + name, "philox_SSE2", "", 1, x);
    std::printf("  %-14s %s GB/s   / SSE2 %s\n", name, accel_bench::fmt(gbps).c_str(), accel_bench::fmt(x).c_str());
  }
}

const char* const fills[] = {"accel_fill_uniform", "curand_host_uniform", "mt19937_uniform", "write_std_fill",
                             "write_memset"};

void print_ratios(const accel_bench::Recorder& r, accel_bench::Report& report, int rounds) {
  std::printf("\nuniform float fill, %zu floats (%.0f MiB), median (min-max) of %d interleaved rounds; GB/s = 1e9 B/s\n"
              "(the table above shows GiB/s); accel's rate over each baseline's, round by round\n",
              g_count, static_cast<double>(g_count * sizeof(float)) / (1 << 20), rounds);
  for (const int threads : {1, 2}) {
    const std::string arg = "/threads:" + std::to_string(threads);
    const std::string accel = std::string("accel_fill_uniform") + arg;
    if (!r.has(accel)) continue;
    const auto gbps = accel_bench::scaled(r.counter(accel, "bytes_per_second"), 1e-9);
    std::printf("threads %d: accel %s GB/s\n", threads, accel_bench::fmt(gbps).c_str());
    for (const char* fill : fills) {
      const std::string key = fill + arg;
      if (!r.has(key)) continue;
      report.point(fill, "", threads, "GB/s", accel_bench::scaled(r.counter(key, "bytes_per_second"), 1e-9));
      if (key == accel) continue;
      const auto x = accel_bench::ratio_per_round(r.values(accel, "bytes_per_second"), r.values(key, "bytes_per_second"));
      report.ratio("accel_fill_uniform", fill, "", threads, x);
      std::printf("  / %-20s %s\n", fill, accel_bench::fmt(x).c_str());
    }
  }
}

}  // namespace

namespace {
// Threads 1 and 2, wall-clock time (OpenMP threads are not the benchmark's threads).
void configure(benchmark::internal::Benchmark* b) {
  b->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
}
}  // namespace

BENCHMARK(accel_fill_uniform)->Apply(configure);
#if defined(ACCEL_BENCH_HAS_CURAND)
BENCHMARK(curand_host_uniform)->Apply(configure);
#endif
BENCHMARK(mt19937_uniform)->Apply(configure);
BENCHMARK(write_std_fill)->Apply(configure);
BENCHMARK(write_memset)->Apply(configure);
BENCHMARK(philox_kernel)
    ->ArgName("kernel")
    ->DenseRange(0, 3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  // bench_rng_fill_native (-march=native) writes its own family.
#if defined(__AVX2__)
  accel_bench::Report report("rng_fill_native", argc, argv);
#else
  accel_bench::Report report("rng_fill", argc, argv);
#endif
  const int rounds = accel_bench::take_rounds(argc, argv, 5);
  const bool smoke = accel_bench::initialize(argc, argv, {"--benchmark_min_time=0.2"});
  if (smoke) g_count = std::size_t{1} << 16;
  report.print_header();
  benchmark::AddCustomContext("accel.simd",
accel::rng::fill_detail::philox_kernel_name(accel::rng::fill_detail::philox_kernel()));
  (void)buffer();
  accel_bench::Recorder recorder;
  report.set_rounds(accel_bench::run_rounds(recorder, smoke ? 1 : rounds));
  print_ratios(recorder, report, smoke ? 1 : rounds);
  print_kernels(recorder, report);
  report.note("simd", accel::rng::fill_detail::philox_kernel_name(accel::rng::fill_detail::philox_kernel()));
  report.write();
  benchmark::Shutdown();
  return 0;
}
