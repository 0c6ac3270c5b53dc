// fused_adam.cpp — multi-tensor fused Adam / AdamW for the CPU (DeepSpeed's CPUAdam, torch's
// Adam(fused=True) on CPU), built by accel's "fused_adam"/"cpu_adam" op builders.
//
// One pass over each tensor: read param, grad, exp_avg, exp_avg_sq (and max_exp_avg_sq), write param,
// exp_avg, exp_avg_sq (and max_exp_avg_sq, and a float16/bfloat16 model copy of the param). Each
// dtype combination has its own vectorised loop with the conversions inline (bf16 params/states,
// fp16/bf16 grads, an fp16/bf16 model copy), computing in fp32 with the same operations as the
// all-fp32 loop, so an element's bits do not depend on the combination's loop. The elements of all tensors together are split statically among the OpenMP threads (see
// cpu_common.h), so the result is bit-identical for any thread count.
//
// Memory order (fp32, AVX-512): blocks of 8 vectors (128 elements, 512 B of each array): the block's 8
// cache lines of g, then of m, v, p are loaded, the block is computed in registers, then its lines of
// p, m, v are stored — each array is read and written in runs of 8 lines, as DeepSpeed's CPUAdam does,
// rather than one line of each array in turn. On the 2-core EPYC VM this order moved the same bytes up
// to ~10 % faster than the element loop (benchmarks/RESULTS.md); the arithmetic is the same per element
// (IEEE mul/fma/sqrt/div), so vector body and scalar tail give the same bits.
//
// Per element (torch's formula; step_size, inv_bc2_sqrt and 1-beta come from the host, computed in double):
//   g  = maximize ? -grad : grad;          if (!adamw) g = fmaf(wd, p, g)
//   p  = p * decay_factor                  (AdamW: 1 - lr*wd; else 1)
//   m  = fmaf(beta1, m, (1-beta1) * g)
//   v  = fmaf(beta2, v, ((1-beta2) * g) * g)
//   vm = amsgrad ? max(vm, v) : v
//   p  = fmaf(-step_size, m / fmaf(sqrt(vm), inv_bc2_sqrt, eps), p)
#include "cpu_common.h"

#if defined(__AVX512F__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace {

using namespace accel_kernels;

struct Coefs {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, l2, decay, neg_step, inv_bc2_sqrt, sign;
};

template <bool Amsgrad>
void adam_f32(const Coefs c, float* __restrict p, const float* __restrict g, float* __restrict m,
              float* __restrict v, float* __restrict vmax, long long n) {
#pragma omp simd
  for (long long i = 0; i < n; ++i) {
    float gi = g[i] * c.sign;
    const float pi = p[i];
    gi = fmaf(c.l2, pi, gi);
    const float mi = fmaf(c.beta1, m[i], c.one_minus_beta1 * gi);
    const float vi = fmaf(c.beta2, v[i], (c.one_minus_beta2 * gi) * gi);
    float vu = vi;
    if constexpr (Amsgrad) {
      const float old = vmax[i];
      vu = vi > old ? vi : old;
      vmax[i] = vu;
    }
    const float denom = fmaf(sqrtf(vu), c.inv_bc2_sqrt, c.eps);
    p[i] = fmaf(c.neg_step, mi / denom, pi * c.decay);
    m[i] = mi;
    v[i] = vi;
  }
}

#if defined(__AVX512F__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which -Wall reports as maybe uninitialised.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Software prefetch of each block's lines into L1, Prefetch blocks ahead (0: none), by vendor: on the Xeon
// VM (family 6, model 207) one thread's hardware prefetchers left the block loop ~6 % short of the
// STREAM-like ceiling and 2 blocks ahead closed most of it (1.03-1.06x); on the EPYC VM (family 25, model
// 17: Zen 4) the same prefetch cost one thread 9-15 % (0.85-0.87 of the ceiling against 0.95-1.00
// without; benchmarks/RESULTS.md). The CPU's vendor string, read once.
inline bool intel_cpu() {
  static const bool intel = [] {
    unsigned int a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0, &a, &b, &c, &d) == 0) return false;
    return b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;  // "Genu" "ineI" "ntel"
  }();
  return intel;
}

// adam_f32 over blocks of B vectors in the memory order described at the top; the rest by adam_f32.
template <bool Amsgrad, long long Prefetch, int B = 8>
void adam_f32_blocks(const Coefs c, float* __restrict p, const float* __restrict g, float* __restrict m,
                     float* __restrict v, float* __restrict vmax, long long n) {
  const __m512 b1 = _mm512_set1_ps(c.beta1), omb1 = _mm512_set1_ps(c.one_minus_beta1);
  const __m512 b2 = _mm512_set1_ps(c.beta2), omb2 = _mm512_set1_ps(c.one_minus_beta2);
  const __m512 eps = _mm512_set1_ps(c.eps), l2 = _mm512_set1_ps(c.l2), decay = _mm512_set1_ps(c.decay);
  const __m512 neg_step = _mm512_set1_ps(c.neg_step), ibc2 = _mm512_set1_ps(c.inv_bc2_sqrt);
  const __m512 sign = _mm512_set1_ps(c.sign);
  constexpr long long block = 16LL * B;
  long long i = 0;
  for (; i + block <= n; i += block) {
    __m512 G[B], M[B], V[B], P[B], X[B];
    if (const long long k = i + Prefetch * block; Prefetch > 0 && k + block <= n) {
#pragma GCC unroll 16
      for (int u = 0; u < B; ++u) {
        _mm_prefetch(reinterpret_cast<const char*>(g + k + 16 * u), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(m + k + 16 * u), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(v + k + 16 * u), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(p + k + 16 * u), _MM_HINT_T0);
        if constexpr (Amsgrad) _mm_prefetch(reinterpret_cast<const char*>(vmax + k + 16 * u), _MM_HINT_T0);
      }
    }
#pragma GCC unroll 16
    for (int u = 0; u < B; ++u) G[u] = _mm512_loadu_ps(g + i + 16 * u);
#pragma GCC unroll 16
    for (int u = 0; u < B; ++u) M[u] = _mm512_loadu_ps(m + i + 16 * u);
#pragma GCC unroll 16
    for (int u = 0; u < B; ++u) V[u] = _mm512_loadu_ps(v + i + 16 * u);
#pragma GCC unroll 16
    for (int u = 0; u < B; ++u) P[u] = _mm512_loadu_ps(p + i + 16 * u);
    if constexpr (Amsgrad) {
#pragma GCC unroll 16
      for (int u = 0; u < B; ++u) X[u] = _mm512_loadu_ps(vmax + i + 16 * u);
    }
#pragma GCC unroll 16
    for (int u = 0; u < B; ++u) {
      const __m512 gi = _mm512_fmadd_ps(l2, P[u], _mm512_mul_ps(G[u], sign));
      M[u] = _mm512_fmadd_ps(b1, M[u], _mm512_mul_ps(omb1, gi));
      V[u] = _mm512_fmadd_ps(b2, V[u], _mm512_mul_ps(_mm512_mul_ps(omb2, gi), gi));
      __m512 vu = V[u];
      if constexpr (Amsgrad) {
        vu = _mm512_max_ps(V[u], X[u]);  // V > X ? V : X, as the scalar loop
        X[u] = vu;
      }
      const __m512 denom = _mm512_fmadd_ps(_mm512_sqrt_ps(vu), ibc2, eps);
      P[u] = _mm512_fmadd_ps(neg_step, _mm512_div_ps(M[u], denom), _mm512_mul_ps(P[u], decay));
    }
#pragma GCC unroll 16
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(p + i + 16 * u, P[u]);
#pragma GCC unroll 16
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(m + i + 16 * u, M[u]);
#pragma GCC unroll 16
    for (int u = 0; u < B; ++u) _mm512_storeu_ps(v + i + 16 * u, V[u]);
    if constexpr (Amsgrad) {
#pragma GCC unroll 16
      for (int u = 0; u < B; ++u) _mm512_storeu_ps(vmax + i + 16 * u, X[u]);
    }
  }
  adam_f32<Amsgrad>(c, p + i, g + i, m + i, v + i, Amsgrad ? vmax + i : nullptr, n - i);
}
#pragma GCC diagnostic pop
#endif

// The same per-element operations as adam_f32 (so the bits match), for any dtype combination.
template <int P, int G, int C, bool Amsgrad>
void adam_mixed(const Coefs c, void* __restrict pp, const void* __restrict gp, void* __restrict mp,
                void* __restrict vp, void* __restrict xp, void* __restrict cp, long long begin, long long end) {
#pragma omp simd
  for (long long i = begin; i < end; ++i) {
    float gi = ld<G>(gp, i) * c.sign;
    const float pi = ld<P>(pp, i);
    gi = fmaf(c.l2, pi, gi);
    const float mi = fmaf(c.beta1, ld<P>(mp, i), c.one_minus_beta1 * gi);
    const float vi = fmaf(c.beta2, ld<P>(vp, i), (c.one_minus_beta2 * gi) * gi);
    float vu = vi;
    if constexpr (Amsgrad) {
      const float old = ld<P>(xp, i);
      vu = vi > old ? vi : old;
      st<P>(xp, i, vu);
    }
    const float denom = fmaf(sqrtf(vu), c.inv_bc2_sqrt, c.eps);
    const float pn = fmaf(c.neg_step, mi / denom, pi * c.decay);
    st<P>(pp, i, pn);
    st<P>(mp, i, mi);
    st<P>(vp, i, vi);
    if constexpr (C != ACCEL_DTYPE_NONE) st<C>(cp, i, pn);
  }
}

using RangeFn = void (*)(const Coefs, void*, const void*, void*, void*, void*, void*, long long, long long);

template <int P, int G, int C>
RangeFn pick_ams(bool amsgrad) {
  return amsgrad ? adam_mixed<P, G, C, true> : adam_mixed<P, G, C, false>;
}
template <int P, int G>
RangeFn pick_copy(int copy, bool amsgrad) {
  if constexpr (P == ACCEL_DTYPE_F32) {
    if (copy == ACCEL_DTYPE_BF16) return pick_ams<P, G, ACCEL_DTYPE_BF16>(amsgrad);
    if (copy == ACCEL_DTYPE_F16) return pick_ams<P, G, ACCEL_DTYPE_F16>(amsgrad);
  }
  return pick_ams<P, G, ACCEL_DTYPE_NONE>(amsgrad);
}
template <int P>
RangeFn pick_grad(int grad, int copy, bool amsgrad) {
  if (grad == ACCEL_DTYPE_BF16) return pick_copy<P, ACCEL_DTYPE_BF16>(copy, amsgrad);
  if (grad == ACCEL_DTYPE_F16) return pick_copy<P, ACCEL_DTYPE_F16>(copy, amsgrad);
  return pick_copy<P, ACCEL_DTYPE_F32>(copy, amsgrad);
}
// The loop for a dtype combination (a model copy only with float32 params).
RangeFn pick(const accel_adam_hparams& h, bool copy) {
  const int c = copy ? h.model_copy_dtype : ACCEL_DTYPE_NONE;
  if (h.param_dtype == ACCEL_DTYPE_BF16) return pick_grad<ACCEL_DTYPE_BF16>(h.grad_dtype, ACCEL_DTYPE_NONE, h.amsgrad != 0);
  return pick_grad<ACCEL_DTYPE_F32>(h.grad_dtype, c, h.amsgrad != 0);
}

template <bool Amsgrad>
void adam_range(const Coefs& c, const accel_adam_hparams& h, const accel_adam_tensor& t, long long begin,
                long long end) {
  const bool all_f32 = h.param_dtype == ACCEL_DTYPE_F32 && h.grad_dtype == ACCEL_DTYPE_F32;
  const bool copy = t.model_copy != nullptr && h.model_copy_dtype != ACCEL_DTYPE_NONE;
  if (all_f32 && !copy) {
#if defined(__AVX512F__)
    auto* const f32 = intel_cpu() ? &adam_f32_blocks<Amsgrad, 2> : &adam_f32_blocks<Amsgrad, 0>;
#else
    auto* const f32 = &adam_f32<Amsgrad>;
#endif
    f32(c, static_cast<float*>(t.param) + begin, static_cast<const float*>(t.grad) + begin,
        static_cast<float*>(t.exp_avg) + begin, static_cast<float*>(t.exp_avg_sq) + begin,
        Amsgrad ? static_cast<float*>(t.max_exp_avg_sq) + begin : nullptr, end - begin);
    return;
  }
  pick(h, copy)(c, t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.max_exp_avg_sq, t.model_copy, begin, end);
}

bool dtype_ok(int d, bool allow_f16) {
  return d == ACCEL_DTYPE_F32 || d == ACCEL_DTYPE_BF16 || (allow_f16 && d == ACCEL_DTYPE_F16);
}

}  // namespace

// Returns 0, or -1 for an unsupported dtype combination, -2 for a missing pointer.
ACCEL_EXPORT int accel_fused_adam(const accel_adam_hparams* h, const accel_adam_tensor* tensors, long long count,
                                  int num_threads) {
  if (!dtype_ok(h->param_dtype, false) || !dtype_ok(h->grad_dtype, true)) return -1;
  if (h->model_copy_dtype != ACCEL_DTYPE_NONE && h->model_copy_dtype != ACCEL_DTYPE_F16 &&
      h->model_copy_dtype != ACCEL_DTYPE_BF16) {
    return -1;
  }
  long long total = 0;
  for (long long i = 0; i < count; ++i) {
    const accel_adam_tensor& t = tensors[i];
    if (t.numel > 0 && (t.param == nullptr || t.grad == nullptr || t.exp_avg == nullptr || t.exp_avg_sq == nullptr ||
                        (h->amsgrad && t.max_exp_avg_sq == nullptr))) {
      return -2;
    }
    total += t.numel > 0 ? t.numel : 0;
  }
  Coefs c;
  c.beta1 = h->beta1;
  c.one_minus_beta1 = h->one_minus_beta1;
  c.beta2 = h->beta2;
  c.one_minus_beta2 = h->one_minus_beta2;
  c.eps = h->eps;
  c.l2 = h->adamw ? 0.0f : h->weight_decay;
  c.decay = h->adamw ? h->decay_factor : 1.0f;
  c.neg_step = -h->step_size;
  c.inv_bc2_sqrt = h->inv_bc2_sqrt;
  c.sign = h->maximize ? -1.0f : 1.0f;
  const int T = thread_count(num_threads);
#pragma omp parallel num_threads(T)
  {
    long long begin, end;
    static_range(total, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
    long long base = 0;  // first global element of tensor i
    for (long long i = 0; i < count && base < end; ++i) {
      const long long n = tensors[i].numel > 0 ? tensors[i].numel : 0;
      const long long lo = begin > base ? begin - base : 0;
      const long long hi = end < base + n ? end - base : n;
      if (lo < hi) {
        if (h->amsgrad) {
          adam_range<true>(c, *h, tensors[i], lo, hi);
        } else {
          adam_range<false>(c, *h, tensors[i], lo, hi);
        }
      }
      base += n;
    }
  }
  return 0;
}
