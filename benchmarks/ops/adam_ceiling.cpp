// adam_ceiling.cpp — see adam_ceiling.h. Compiled with -O3 -march=native -fopenmp (CMakeLists.txt).
#include "adam_ceiling.h"

#include <omp.h>

namespace {

void range(long long n, int t, int T, long long* begin, long long* end) {
  const long long blocks = (n + 63) / 64;
  const long long b0 = blocks * t / T, b1 = blocks * (t + 1) / T;
  *begin = b0 * 64 < n ? b0 * 64 : n;
  *end = b1 * 64 < n ? b1 * 64 : n;
}

void pass(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, long long n,
          float s) {
#pragma omp simd
  for (long long i = 0; i < n; ++i) {
    const float gi = g[i];
    p[i] = p[i] + s * gi;
    m[i] = m[i] + s * gi;
    v[i] = v[i] + s * gi;
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
