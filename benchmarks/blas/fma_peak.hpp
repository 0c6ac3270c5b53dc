// benchmarks/blas/fma_peak.hpp — the machine's single-precision FMA peak, measured: each thread runs
// 12 independent chains of AVX-512 fused multiply-adds (more than FMA latency x pipes, so the loop is
// throughput-bound), kept in registers and summed at the end so that nothing is folded away. Without
// AVX-512 the same with 256-bit vectors. Returns GFLOP/s (2 per lane per FMA), all threads together,
// each thread's rate taken over its own CPU time, so that time it was not running (a VM shared with
// other work) does not lower the peak.
#pragma once

#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include <time.h>

namespace accel_bench {

#if defined(__AVX512F__)
using fma_vec = __m512;
#define ACCEL_FMA_SET1 _mm512_set1_ps
#define ACCEL_FMA_OP _mm512_fmadd_ps
#define ACCEL_FMA_ADD _mm512_add_ps
inline float accel_fma_sum512(__m512 v) {  // not _mm512_reduce_add_ps: GCC 12 warns inside it (-Wuninitialized)
  alignas(64) float f[16];
  _mm512_store_ps(f, v);
  float sum = 0;
  for (float x : f) sum += x;
  return sum;
}
#define ACCEL_FMA_SUM accel_fma_sum512
#else
using fma_vec = __m256;
#define ACCEL_FMA_SET1 _mm256_set1_ps
#define ACCEL_FMA_OP _mm256_fmadd_ps
#define ACCEL_FMA_ADD _mm256_add_ps
inline float accel_fma_sum256(__m256 v) {
  alignas(32) float f[8];
  _mm256_store_ps(f, v);
  return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
#define ACCEL_FMA_SUM accel_fma_sum256
#endif
inline constexpr int fma_lanes = sizeof(fma_vec) / sizeof(float);

inline double fma_peak_one_thread(double seconds) {
  using clock = std::chrono::steady_clock;
  const fma_vec x = ACCEL_FMA_SET1(0.999999f), y = ACCEL_FMA_SET1(1e-7f);
  fma_vec a[12];
  for (int i = 0; i < 12; ++i) a[i] = ACCEL_FMA_SET1(1.0f + float(i) * 1e-3f);
  fma_vec a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], a4 = a[4], a5 = a[5];
  fma_vec a6 = a[6], a7 = a[7], a8 = a[8], a9 = a[9], a10 = a[10], a11 = a[11];
  const auto thread_seconds = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
  };
  std::int64_t iterations = 0;
  const auto start = clock::now();
  const double cpu_start = thread_seconds();
  double elapsed = 0;
  do {
    for (int r = 0; r < 4096; ++r) {
#define ACCEL_FMA(v) v = ACCEL_FMA_OP(v, x, y);
      ACCEL_FMA(a0) ACCEL_FMA(a1) ACCEL_FMA(a2) ACCEL_FMA(a3) ACCEL_FMA(a4) ACCEL_FMA(a5)
      ACCEL_FMA(a6) ACCEL_FMA(a7) ACCEL_FMA(a8) ACCEL_FMA(a9) ACCEL_FMA(a10) ACCEL_FMA(a11)
#undef ACCEL_FMA
    }
    iterations += 4096;
    elapsed = std::chrono::duration<double>(clock::now() - start).count();
  } while (elapsed < seconds);
  fma_vec sum = ACCEL_FMA_ADD(ACCEL_FMA_ADD(ACCEL_FMA_ADD(a0, a1), ACCEL_FMA_ADD(a2, a3)),
                              ACCEL_FMA_ADD(ACCEL_FMA_ADD(a4, a5), ACCEL_FMA_ADD(a6, a7)));
  sum = ACCEL_FMA_ADD(sum, ACCEL_FMA_ADD(ACCEL_FMA_ADD(a8, a9), ACCEL_FMA_ADD(a10, a11)));
  if (ACCEL_FMA_SUM(sum) == 12345.0f) std::puts("");
  return double(iterations) * 12 * fma_lanes * 2 / (thread_seconds() - cpu_start) / 1e9;
}

/// The peak of `threads` threads running at once (0.3 s each); take the best of a few calls.
inline double fma_peak_gflops(int threads) {
  std::vector<double> each(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back([&each, t] { each[std::size_t(t)] = fma_peak_one_thread(0.3); });
  for (auto& p : pool) p.join();
  double total = 0;
  for (double g : each) total += g;
  return total;
}

}  // namespace accel_bench
