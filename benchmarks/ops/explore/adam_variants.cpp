// adam_variants.cpp — exploration, not part of accel: CPU Adam kernel variants and ceiling kernels
// that benchmarks/RESULTS.md's "Kernel variants tried" figures come from, run by adam_variants.py
// beside DeepSpeed and accel on the same tensors. Each variant is one memory order / unrolling /
// prefetch choice of the same per-element arithmetic as kernels/cpu/fused_adam.cpp (AdamW, fp32).
// Build (adam_variants.py does it): c++ -O3 -march=native -fopenmp -ffp-contract=off -fno-math-errno
//   -mprefer-vector-width=512 -shared -fPIC adam_variants.cpp -o adam_variants.so  (needs AVX-512)
#include <immintrin.h>
#include <cstdint>
#include <omp.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <string>
#include <functional>
#include <algorithm>
#include <chrono>
struct C { float b1, omb1, b2, omb2, eps, l2, decay, neg_step, ibc2, sign; };
static void rng(long long n, int t, int T, long long* b, long long* e) {
  long long blocks = (n + 63) / 64; long long b0 = blocks * t / T, b1 = blocks * (t + 1) / T;
  *b = std::min(b0 * 64, n); *e = std::min(b1 * 64, n);
}
// current accel kernel
static void adam_ref(const C c, float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, long long n) {
#pragma omp simd
  for (long long i = 0; i < n; ++i) {
    float gi = g[i] * c.sign; const float pi = p[i]; gi = fmaf(c.l2, pi, gi);
    const float mi = fmaf(c.b1, m[i], c.omb1 * gi);
    const float vi = fmaf(c.b2, v[i], (c.omb2 * gi) * gi);
    const float denom = fmaf(sqrtf(vi), c.ibc2, c.eps);
    p[i] = fmaf(c.neg_step, mi / denom, pi * c.decay); m[i] = mi; v[i] = vi;
  }
}
template <int U, bool NT, int PF>
static void adam_avx(const C c, float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, long long n) {
  const __m512 b1 = _mm512_set1_ps(c.b1), omb1 = _mm512_set1_ps(c.omb1), b2 = _mm512_set1_ps(c.b2), omb2 = _mm512_set1_ps(c.omb2),
               eps = _mm512_set1_ps(c.eps), l2 = _mm512_set1_ps(c.l2), dec = _mm512_set1_ps(c.decay), ns = _mm512_set1_ps(c.neg_step),
               ib = _mm512_set1_ps(c.ibc2), sg = _mm512_set1_ps(c.sign);
  long long i = 0;
  const long long step = 16 * U;
  for (; i + step <= n; i += step) {
    if (PF) {
      _mm_prefetch((const char*)(p + i + PF), _MM_HINT_T0); _mm_prefetch((const char*)(g + i + PF), _MM_HINT_T0);
      _mm_prefetch((const char*)(m + i + PF), _MM_HINT_T0); _mm_prefetch((const char*)(v + i + PF), _MM_HINT_T0);
    }
#pragma GCC unroll 16
    for (int u = 0; u < U; ++u) {
      const long long k = i + 16 * u;
      __m512 gi = _mm512_mul_ps(_mm512_loadu_ps(g + k), sg);
      const __m512 pi = _mm512_loadu_ps(p + k);
      gi = _mm512_fmadd_ps(l2, pi, gi);
      const __m512 mi = _mm512_fmadd_ps(b1, _mm512_loadu_ps(m + k), _mm512_mul_ps(omb1, gi));
      const __m512 vi = _mm512_fmadd_ps(b2, _mm512_loadu_ps(v + k), _mm512_mul_ps(_mm512_mul_ps(omb2, gi), gi));
      const __m512 den = _mm512_fmadd_ps(_mm512_sqrt_ps(vi), ib, eps);
      const __m512 pn = _mm512_fmadd_ps(ns, _mm512_div_ps(mi, den), _mm512_mul_ps(pi, dec));
      if (NT) { _mm512_stream_ps(p + k, pn); _mm512_stream_ps(m + k, mi); _mm512_stream_ps(v + k, vi); }
      else { _mm512_storeu_ps(p + k, pn); _mm512_storeu_ps(m + k, mi); _mm512_storeu_ps(v + k, vi); }
    }
  }
  adam_ref(c, p + i, g + i, m + i, v + i, n - i);
}

template <int B, int PF = 0, bool NT = false>
static void adam_burst(const C c, float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, long long n) {
  const __m512 b1 = _mm512_set1_ps(c.b1), omb1 = _mm512_set1_ps(c.omb1), b2 = _mm512_set1_ps(c.b2), omb2 = _mm512_set1_ps(c.omb2),
               eps = _mm512_set1_ps(c.eps), l2 = _mm512_set1_ps(c.l2), dec = _mm512_set1_ps(c.decay), ns = _mm512_set1_ps(c.neg_step),
               ib = _mm512_set1_ps(c.ibc2), sg = _mm512_set1_ps(c.sign);
  long long i = 0;
  for (; i + 16 * B <= n; i += 16 * B) {
    __m512 G[B], P[B], M[B], V[B];
    if (PF) {
#pragma GCC unroll 32
      for (int u = 0; u < B; ++u) { const long long k = i + 16 * B * PF + 16 * u;
        _mm_prefetch((const char*)(g + k), _MM_HINT_T0); _mm_prefetch((const char*)(m + k), _MM_HINT_T0);
        _mm_prefetch((const char*)(v + k), _MM_HINT_T0); _mm_prefetch((const char*)(p + k), _MM_HINT_T0); }
    }
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) G[u] = _mm512_loadu_ps(g + i + 16 * u);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) M[u] = _mm512_loadu_ps(m + i + 16 * u);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) V[u] = _mm512_loadu_ps(v + i + 16 * u);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) P[u] = _mm512_loadu_ps(p + i + 16 * u);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) {
      __m512 gi = _mm512_fmadd_ps(l2, P[u], _mm512_mul_ps(G[u], sg));
      M[u] = _mm512_fmadd_ps(b1, M[u], _mm512_mul_ps(omb1, gi));
      V[u] = _mm512_fmadd_ps(b2, V[u], _mm512_mul_ps(_mm512_mul_ps(omb2, gi), gi));
      const __m512 den = _mm512_fmadd_ps(_mm512_sqrt_ps(V[u]), ib, eps);
      P[u] = _mm512_fmadd_ps(ns, _mm512_div_ps(M[u], den), _mm512_mul_ps(P[u], dec));
    }
    if (NT) {
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) _mm512_stream_ps(p + i + 16 * u, P[u]);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) _mm512_stream_ps(m + i + 16 * u, M[u]);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) _mm512_stream_ps(v + i + 16 * u, V[u]);
    } else {
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(p + i + 16 * u, P[u]);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(m + i + 16 * u, M[u]);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(v + i + 16 * u, V[u]);
    }
  }
  if (NT) _mm_sfence();
  adam_ref(c, p + i, g + i, m + i, v + i, n - i);
}
// ceiling: same access pattern, trivial math
static void rmw7(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, long long n, float s) {
#pragma omp simd
  for (long long i = 0; i < n; ++i) { const float gi = g[i]; p[i] = fmaf(s, gi, p[i]); m[i] = fmaf(s, gi, m[i]); v[i] = fmaf(s, gi, v[i]); }
}
template <int B>
static void rmw_burst(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, long long n, float s) {
  const __m512 S = _mm512_set1_ps(s); long long i = 0;
  for (; i + 16 * B <= n; i += 16 * B) {
    __m512 G[B], P[B], M[B], V[B];
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) G[u] = _mm512_loadu_ps(g + i + 16 * u);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) M[u] = _mm512_loadu_ps(m + i + 16 * u);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) V[u] = _mm512_loadu_ps(v + i + 16 * u);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) P[u] = _mm512_loadu_ps(p + i + 16 * u);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) { P[u] = _mm512_fmadd_ps(S, G[u], P[u]); M[u] = _mm512_fmadd_ps(S, G[u], M[u]); V[u] = _mm512_fmadd_ps(S, G[u], V[u]); }
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(p + i + 16 * u, P[u]);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(m + i + 16 * u, M[u]);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(v + i + 16 * u, V[u]);
  }
  rmw7(p + i, g + i, m + i, v + i, n - i, s);
}

template <int B, bool Spec, int Order, bool Align>
static void adam_b(const C c, float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, long long n) {
  long long i = 0;
  if (Align) {
    long long mis = ((reinterpret_cast<uintptr_t>(g) & 511) / 4);
    long long peel = mis ? (128 - mis) : 0; if (peel > n) peel = n;
    adam_ref(c, p, g, m, v, peel); i = peel;
  }
  const __m512 b1 = _mm512_set1_ps(c.b1), omb1 = _mm512_set1_ps(c.omb1), b2 = _mm512_set1_ps(c.b2), omb2 = _mm512_set1_ps(c.omb2),
               eps = _mm512_set1_ps(c.eps), l2 = _mm512_set1_ps(c.l2), dec = _mm512_set1_ps(c.decay), ns = _mm512_set1_ps(c.neg_step),
               ib = _mm512_set1_ps(c.ibc2), sg = _mm512_set1_ps(c.sign);
  for (; i + 16 * B <= n; i += 16 * B) {
    __m512 G[B], P[B], M[B], V[B];
    if (Order == 0) {
#pragma GCC unroll 32
      for (int u = 0; u < B; ++u) G[u] = _mm512_loadu_ps(g + i + 16 * u);
#pragma GCC unroll 32
      for (int u = 0; u < B; ++u) M[u] = _mm512_loadu_ps(m + i + 16 * u);
#pragma GCC unroll 32
      for (int u = 0; u < B; ++u) V[u] = _mm512_loadu_ps(v + i + 16 * u);
#pragma GCC unroll 32
      for (int u = 0; u < B; ++u) P[u] = _mm512_loadu_ps(p + i + 16 * u);
    } else {
#pragma GCC unroll 32
      for (int u = 0; u < B; ++u) P[u] = _mm512_loadu_ps(p + i + 16 * u);
#pragma GCC unroll 32
      for (int u = 0; u < B; ++u) G[u] = _mm512_loadu_ps(g + i + 16 * u);
#pragma GCC unroll 32
      for (int u = 0; u < B; ++u) M[u] = _mm512_loadu_ps(m + i + 16 * u);
#pragma GCC unroll 32
      for (int u = 0; u < B; ++u) V[u] = _mm512_loadu_ps(v + i + 16 * u);
    }
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) {
      __m512 gi = Spec ? G[u] : _mm512_fmadd_ps(l2, P[u], _mm512_mul_ps(G[u], sg));
      M[u] = _mm512_fmadd_ps(b1, M[u], _mm512_mul_ps(omb1, gi));
      V[u] = _mm512_fmadd_ps(b2, V[u], _mm512_mul_ps(_mm512_mul_ps(omb2, gi), gi));
      const __m512 den = _mm512_fmadd_ps(_mm512_sqrt_ps(V[u]), ib, eps);
      P[u] = _mm512_fmadd_ps(ns, _mm512_div_ps(M[u], den), _mm512_mul_ps(P[u], dec));
    }
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(p + i + 16 * u, P[u]);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(m + i + 16 * u, M[u]);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(v + i + 16 * u, V[u]);
  }
  adam_ref(c, p + i, g + i, m + i, v + i, n - i);
}

// The burst8 loop with `prefetch(i)` called at the top of each 128-element block (the variants below).
template <class Prefetch>
static void adam_burst8_prefetching(const C c, float* __restrict p, const float* __restrict g, float* __restrict m,
                                    float* __restrict v, long long n, Prefetch prefetch) {
  constexpr int B = 8;
  const __m512 b1 = _mm512_set1_ps(c.b1), omb1 = _mm512_set1_ps(c.omb1), b2 = _mm512_set1_ps(c.b2), omb2 = _mm512_set1_ps(c.omb2),
               eps = _mm512_set1_ps(c.eps), l2 = _mm512_set1_ps(c.l2), dec = _mm512_set1_ps(c.decay), ns = _mm512_set1_ps(c.neg_step),
               ib = _mm512_set1_ps(c.ibc2), sg = _mm512_set1_ps(c.sign);
  long long i = 0;
  for (; i + 16 * B <= n; i += 16 * B) {
    __m512 G[B], P[B], M[B], V[B];
    prefetch(i);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) G[u] = _mm512_loadu_ps(g + i + 16 * u);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) M[u] = _mm512_loadu_ps(m + i + 16 * u);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) V[u] = _mm512_loadu_ps(v + i + 16 * u);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) P[u] = _mm512_loadu_ps(p + i + 16 * u);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) {
      __m512 gi = _mm512_fmadd_ps(l2, P[u], _mm512_mul_ps(G[u], sg));
      M[u] = _mm512_fmadd_ps(b1, M[u], _mm512_mul_ps(omb1, gi));
      V[u] = _mm512_fmadd_ps(b2, V[u], _mm512_mul_ps(_mm512_mul_ps(omb2, gi), gi));
      const __m512 den = _mm512_fmadd_ps(_mm512_sqrt_ps(V[u]), ib, eps);
      P[u] = _mm512_fmadd_ps(ns, _mm512_div_ps(M[u], den), _mm512_mul_ps(P[u], dec));
    }
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(p + i + 16 * u, P[u]);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(m + i + 16 * u, M[u]);
#pragma GCC unroll 32
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(v + i + 16 * u, V[u]);
  }
  adam_ref(c, p + i, g + i, m + i, v + i, n - i);
}

// Every STRIDE-th line of the block DIST blocks ahead, with hint HINT.
template <int DIST, int HINT, int STRIDE>
static void adam_pf(const C c, float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, long long n) {
  adam_burst8_prefetching(c, p, g, m, v, n, [=](long long i) {
    const long long k0 = i + 128LL * DIST;
    if (k0 + 128 > n) return;
#pragma GCC unroll 8
    for (int u = 0; u < 8; u += STRIDE) {
      const long long k = k0 + 16 * u;
      _mm_prefetch((const char*)(g + k), (_mm_hint)HINT);
      _mm_prefetch((const char*)(m + k), (_mm_hint)HINT);
      _mm_prefetch((const char*)(v + k), (_mm_hint)HINT);
      _mm_prefetch((const char*)(p + k), (_mm_hint)HINT);
    }
  });
}

// One prefetch per array per 4 KiB, AHEAD floats ahead: a touch of the page the hardware prefetchers
// (which stop at 4 KiB boundaries) will enter next, so its TLB walk and first lines start early.
// AHEAD = 1024: the same offset one page on.
template <long long AHEAD, int HINT>
static void adam_pg(const C c, float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, long long n) {
  adam_burst8_prefetching(c, p, g, m, v, n, [=](long long i) {
    if ((i & 1023) != 0 || i + AHEAD >= n) return;
    _mm_prefetch((const char*)(g + i + AHEAD), (_mm_hint)HINT);
    _mm_prefetch((const char*)(m + i + AHEAD), (_mm_hint)HINT);
    _mm_prefetch((const char*)(v + i + AHEAD), (_mm_hint)HINT);
    _mm_prefetch((const char*)(p + i + AHEAD), (_mm_hint)HINT);
  });
}
extern "C" void run_kernel(int which, float* p, const float* g, float* m, float* v, long long n, int T) {
  C c{0.9f, 0.1f, 0.999f, 0.001f, 1e-8f, 0.0f, 1 - 1e-5f, -1e-3f, 1.0f, 1.0f};
#pragma omp parallel num_threads(T)
  { long long b, e; rng(n, omp_get_thread_num(), omp_get_num_threads(), &b, &e);
    switch (which) {
      case 0: adam_ref(c, p + b, g + b, m + b, v + b, e - b); break;
      case 1: adam_avx<8, false, 0>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 2: rmw7(p + b, g + b, m + b, v + b, e - b, 1e-9f); break;
      case 3: adam_burst<4>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 4: adam_burst<8>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 5: adam_burst<16>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 6: rmw_burst<8>(p + b, g + b, m + b, v + b, e - b, 1e-9f); break;
      case 7: rmw_burst<16>(p + b, g + b, m + b, v + b, e - b, 1e-9f); break;
      case 8: rmw_burst<4>(p + b, g + b, m + b, v + b, e - b, 1e-9f); break;
      case 9: adam_burst<8, 2>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 10: adam_burst<8, 8>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 11: adam_burst<6>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 12: adam_burst<4, 4>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 13: adam_burst<8, 0, true>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 14: adam_b<8, true, 0, false>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 15: adam_b<8, false, 0, true>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 16: adam_b<8, false, 1, false>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 17: adam_b<8, false, 0, false>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 18: adam_burst<8, 1>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 19: adam_pf<8, _MM_HINT_T1, 1>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 20: adam_pf<16, _MM_HINT_T1, 1>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 21: adam_pf<16, _MM_HINT_T2, 2>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 22: adam_pf<32, _MM_HINT_T1, 2>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 23: adam_pf<4, _MM_HINT_T0, 1>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 24: adam_pg<1024, _MM_HINT_T0>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 25: adam_pg<2048, _MM_HINT_T0>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 26: adam_pg<1024, _MM_HINT_T2>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 27: adam_pg<4096, _MM_HINT_T2>(c, p + b, g + b, m + b, v + b, e - b); break;
      case 28: adam_pg<512, _MM_HINT_T0>(c, p + b, g + b, m + b, v + b, e - b); break;
    } }
}
