// adam_ceiling.cpp — see adam_ceiling.h. Compiled with -O3 -march=native -fopenmp (CMakeLists.txt).
#include "adam_ceiling.h"

#include <omp.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace {

void range(long long n, int t, int T, long long* begin, long long* end) {
  const long long blocks = (n + 63) / 64;
  const long long b0 = blocks * t / T, b1 = blocks * (t + 1) / T;
  *begin = b0 * 64 < n ? b0 * 64 : n;
  *end = b1 * 64 < n ? b1 * 64 : n;
}

void pass(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, long long n,
          float s) {
  long long i = 0;
#if defined(__AVX512F__)
  // The memory order of accel's (and DeepSpeed's) Adam: per block of 128 elements, 8 lines of g, m, v,
  // p read, then 8 lines of p, m, v written. On the 2-core EPYC VM this order moves the same bytes
  // faster than the element loop below, so it is the ceiling; the loop takes the rest.
  constexpr int B = 8;
  const __m512 S = _mm512_set1_ps(s);
  for (; i + 16 * B <= n; i += 16 * B) {
    __m512 G[B], M[B], V[B], P[B];
#pragma GCC unroll 8
    for (int u = 0; u < B; ++u) G[u] = _mm512_loadu_ps(g + i + 16 * u);
#pragma GCC unroll 8
    for (int u = 0; u < B; ++u) M[u] = _mm512_fmadd_ps(S, G[u], _mm512_loadu_ps(m + i + 16 * u));
#pragma GCC unroll 8
    for (int u = 0; u < B; ++u) V[u] = _mm512_fmadd_ps(S, G[u], _mm512_loadu_ps(v + i + 16 * u));
#pragma GCC unroll 8
    for (int u = 0; u < B; ++u) P[u] = _mm512_fmadd_ps(S, G[u], _mm512_loadu_ps(p + i + 16 * u));
#pragma GCC unroll 8
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(p + i + 16 * u, P[u]);
#pragma GCC unroll 8
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(m + i + 16 * u, M[u]);
#pragma GCC unroll 8
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(v + i + 16 * u, V[u]);
  }
#endif
#pragma omp simd
  for (long long j = i; j < n; ++j) {
    const float gj = g[j];
    p[j] = p[j] + s * gj;
    m[j] = m[j] + s * gj;
    v[j] = v[j] + s * gj;
  }
}

}  // namespace

extern "C" void accel_bench_adam_ceiling(float* p, const float* g, float* m, float* v, long long n, int threads,
                                         float s) {
  const int T = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel num_threads(T)
  {
    long long b, e;
    range(n, omp_get_thread_num(), omp_get_num_threads(), &b, &e);
    pass(p + b, g + b, m + b, v + b, e - b, s);
  }
}
