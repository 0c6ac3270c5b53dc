// nn_ops.cpp — accel's neural-network kernels for the CPU (the "nn_ops" op): embedding, LayerNorm
// with the residual add fused in (and on its own), GELU (tanh), softmax cross-entropy with its gradient
// in one pass, dropout and clipping. Arguments: kernels/common/accel_nn_abi.h; launched through
// accel/ops/launch.hpp as int entry(const void* args, int num_threads).
//
// Storage float32 (_f32), bfloat16 (_bf16) or float16 (_f16) for activations and weights, arithmetic in
// float32 always: each kernel is one template over the storage dtype whose loads and stores convert
// inline (cpu_convert.h's ld<D> / st<D>: integer code, vectorised with the rest of each loop). Where a
// value is accumulated into a 16-bit tensor (embedding and LayerNorm weight gradients) the sum is taken
// in float32 and added to the stored value once, as the CUDA kernels do, so both backends round the
// same sums once.
//
// Rows are split statically over the OpenMP threads; reductions across rows (LayerNorm's weight and
// bias gradients, the embedding gradients) run in a fixed order that does not depend on the thread
// count. exp is a vectorisable form (Cephes' expf polynomial: under 2 ulp), inlined into
// `omp simd` loops: libm's scalar calls would cost more than the rest of these kernels together.
#include "cpu_common.h"

#include "accel_nn_abi.h"

#include <cstdlib>
#include <vector>

namespace {

using namespace accel_kernels;

constexpr int F32 = ACCEL_DTYPE_F32;

// e^x for x in float's range (clamped below at -87.3: the result is then ~1e-38, not a subnormal).
inline float exp_f(float x) {
  x = x < 88.3762626647949f ? x : 88.3762626647949f;
  x = x > -87.3365447505531f ? x : -87.3365447505531f;
  // n = round(x / ln 2) by the 1.5 * 2^23 trick (vectorises without -fno-trapping-math, unlike floorf);
  // n's integer value is then in the low bits of t.
  const float t = fmaf(x, 1.44269504088896341f, 12582912.0f);
  const float n = t - 12582912.0f;
  float r = fmaf(n, -0.693359375f, x);
  r = fmaf(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  const float y = fmaf(p, r * r, r) + 1.0f;
  return y * bits_to_float((float_to_bits(t) - 0x4B400000u + 127u) << 23);
}

// GELU's tanh form: u = k (x + c x^3), k = sqrt(2 / pi). The kernels take -2u = x (-2k - 2kc x^2) and
// 2 u' = 2k + 6kc x^2 with the constants folded (in double, rounded once).
constexpr double gelu_k = 0.7978845608028654;
constexpr double gelu_c = 0.044715;
constexpr float gelu_m2k = static_cast<float>(-2 * gelu_k);
constexpr float gelu_m2kc = static_cast<float>(-2 * gelu_k * gelu_c);
constexpr float gelu_2k = static_cast<float>(2 * gelu_k);
constexpr float gelu_6kc = static_cast<float>(6 * gelu_k * gelu_c);

// Thread t's share [begin, end) of n rows split T ways (contiguous, sizes differing by at most one).
inline void row_range(long long n, int t, int T, long long* begin, long long* end) {
  *begin = n * t / T;
  *end = n * (t + 1) / T;
}

// Sums along a row: lane l (of 16) sums columns c = l mod 16 in order, and the lanes are added by halves
// (8 + 8, 4 + 4, 2 + 2, 1 + 1) — a fixed order for any row, written so that GCC keeps the lanes in a
// vector register (its `omp simd reduction` had the backward's two sums loaded by gathers).
constexpr int lanes = 16;
inline float lane_sum(const float* p) {
  float h[8];
  for (int l = 0; l < 8; ++l) h[l] = p[l] + p[l + 8];
  for (int l = 0; l < 4; ++l) h[l] += h[l + 4];
  return (h[0] + h[2]) + (h[1] + h[3]);
}
// f(c, l) for c in [0, C) with l = c mod 16: whole 16-column groups as one vector step each, then the tail.
template <class F>
inline void by_lanes(long long C, F&& f) {
  long long c0 = 0;
  for (; c0 + lanes <= C; c0 += lanes) {
#pragma omp simd
    for (int l = 0; l < lanes; ++l) f(c0 + l, l);
  }
  for (int l = 0; c0 + l < C; ++l) f(c0 + l, l);
}

}  // namespace

namespace {

template <int D>
int embedding_forward(const void* p, int num_threads) {
  const auto& a = *static_cast<const accel_nn_embedding_forward_args*>(p);
  if (a.N < 0 || a.T <= 0 || a.C <= 0 || a.V <= 0) return 1;
  for (long long n = 0; n < a.N; ++n) {
    if (a.tokens[n] < 0 || a.tokens[n] >= a.V) return 2;
  }
  const long long C = a.C;
#pragma omp parallel num_threads(thread_count(num_threads))
  {
    long long begin, end;
    row_range(a.N, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
    for (long long n = begin; n < end; ++n) {
      const long long te = a.tokens[n] * C, pe = (n % a.T) * C, o = n * C;
#pragma omp simd
      for (long long c = 0; c < C; ++c) st<D>(a.out, o + c, ld<D>(a.wte, te + c) + ld<D>(a.wpe, pe + c));
    }
  }
  return 0;
}

template <int D>
int embedding_backward(const void* p, int num_threads) {
  const auto& a = *static_cast<const accel_nn_embedding_backward_args*>(p);
  if (a.N < 0 || a.T <= 0 || a.C <= 0 || a.V <= 0) return 1;
  for (long long n = 0; n < a.N; ++n) {
    if (a.tokens[n] < 0 || a.tokens[n] >= a.V) return 2;
  }
  const long long C = a.C;
  // Columns are split over the threads; each thread walks every row in order, so each element's sum
  // has the same order whatever the thread count.
#pragma omp parallel num_threads(thread_count(num_threads))
  {
    long long c0, c1;
    static_range(C, omp_get_thread_num(), omp_get_num_threads(), &c0, &c1);
    if constexpr (D == F32) {
      float* dwte = static_cast<float*>(a.dwte);
      float* dwpe = static_cast<float*>(a.dwpe);
      const float* dout = static_cast<const float*>(a.dout);
      if (c0 < c1) {
        for (long long n = 0; n < a.N; ++n) {
          const float* d = dout + n * C;
          float* te = dwte + a.tokens[n] * C;
          float* pe = dwpe + (n % a.T) * C;
#pragma omp simd
          for (long long c = c0; c < c1; ++c) {
            te[c] += d[c];
            pe[c] += d[c];
          }
        }
      }
    } else if (c0 < c1) {
      // 16-bit gradients: each row's sum in float32 (from 0, rows in order), added to the stored value once.
      const long long w = c1 - c0, rows = a.V + a.T;
      std::vector<float> acc(static_cast<std::size_t>(rows * w), 0.0f);
      for (long long n = 0; n < a.N; ++n) {
        float* te = acc.data() + a.tokens[n] * w;
        float* pe = acc.data() + (a.V + n % a.T) * w;
        const long long d = n * C + c0;
#pragma omp simd
        for (long long c = 0; c < w; ++c) {
          const float x = ld<D>(a.dout, d + c);
          te[c] += x;
          pe[c] += x;
        }
      }
      for (long long r = 0; r < rows; ++r) {
        void* dst = r < a.V ? a.dwte : a.dwpe;
        const long long at = (r < a.V ? r : r - a.V) * C + c0;
        const float* s = acc.data() + r * w;
#pragma omp simd
        for (long long c = 0; c < w; ++c) st<D>(dst, at + c, ld<D>(dst, at + c) + s[c]);
      }
    }
  }
  return 0;
}

template <int D>
int layernorm_forward(const void* p, int num_threads) {
  const auto& a = *static_cast<const accel_nn_layernorm_forward_args*>(p);
  if (a.N < 0 || a.C <= 0) return 1;
  const long long C = a.C;
  const float inv_c = 1.0f / static_cast<float>(C);
  void* const out = a.out;
  const void* const weight = a.weight;
  const void* const bias = a.bias;
#pragma omp parallel num_threads(thread_count(num_threads))
  {
    long long begin, end;
    row_range(a.N, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
    for (long long n = begin; n < end; ++n) {
      const long long row = n * C;
      const void* x = a.inp;  // row `row` of x: the input, or the residual sum as stored (rounded)
      float ps[lanes] = {};
      if (a.residual != nullptr) {
        void* xo = a.residual_out;  // the host wrapper requires it with residual
        const void* res = a.residual;
        by_lanes(C, [&](long long c, int l) {  // the sum stored, and its stored value summed
          st<D>(xo, row + c, ld<D>(x, row + c) + ld<D>(res, row + c));
          ps[l] += ld<D>(xo, row + c);
        });
        x = xo;
      } else {
        if (a.residual_out != nullptr && a.residual_out != a.inp) {
          std::memcpy(static_cast<char*>(a.residual_out) + row * elem_size<D>(),
                      static_cast<const char*>(a.inp) + row * elem_size<D>(), static_cast<std::size_t>(C * elem_size<D>()));
        }
        by_lanes(C, [&](long long c, int l) { ps[l] += ld<D>(x, row + c); });
      }
      const float m = lane_sum(ps) * inv_c;
      float pv[lanes] = {};
      by_lanes(C, [&](long long c, int l) {
        const float d = ld<D>(x, row + c) - m;
        pv[l] = fmaf(d, d, pv[l]);
      });
      const float s = 1.0f / sqrtf(fmaf(lane_sum(pv), inv_c, a.eps));
#pragma omp simd
      for (long long c = 0; c < C; ++c) {
        st<D>(out, row + c, fmaf((ld<D>(x, row + c) - m) * s, ld<D>(weight, c), ld<D>(bias, c)));
      }
      a.mean[n] = m;
      a.rstd[n] = s;
    }
  }
  return 0;
}

template <int D>
int layernorm_backward(const void* p, int num_threads) {
  const auto& a = *static_cast<const accel_nn_layernorm_backward_args*>(p);
  if (a.N < 0 || a.C <= 0) return 1;
  const long long C = a.C;
  const long long chunks = (a.N + ACCEL_NN_LN_CHUNK - 1) / ACCEL_NN_LN_CHUNK;
  const float inv_c = 1.0f / static_cast<float>(C);
  const void* const inp = a.inp;
  const void* const dout = a.dout;
  const void* const weight = a.weight;
  void* const dinp = a.dinp;
#pragma omp parallel num_threads(thread_count(num_threads))
  {
    const int T = omp_get_num_threads(), t = omp_get_thread_num();
    long long k0, k1;
    row_range(chunks, t, T, &k0, &k1);
    for (long long k = k0; k < k1; ++k) {
      float* pw = a.scratch + k * 2 * C;  // this chunk's partial dweight, then dbias
      float* pb = pw + C;
#pragma omp simd
      for (long long c = 0; c < C; ++c) {
        pw[c] = 0;
        pb[c] = 0;
      }
      const long long n1 = (k + 1) * ACCEL_NN_LN_CHUNK < a.N ? (k + 1) * ACCEL_NN_LN_CHUNK : a.N;
      for (long long n = k * ACCEL_NN_LN_CHUNK; n < n1; ++n) {
        const long long row = n * C;
        const float m = a.mean[n], s = a.rstd[n];
        float pg[lanes] = {}, pgx[lanes] = {};  // sums of dnorm = dy * w and of dnorm * xhat
        by_lanes(C, [&](long long c, int l) {
          const float xhat = (ld<D>(inp, row + c) - m) * s;
          const float g = ld<D>(dout, row + c) * ld<D>(weight, c);
          pg[l] += g;
          pgx[l] = fmaf(g, xhat, pgx[l]);
        });
        const float mean_g = lane_sum(pg) * inv_c, mean_gx = lane_sum(pgx) * inv_c;
#pragma omp simd
        for (long long c = 0; c < C; ++c) {
          const float xhat = (ld<D>(inp, row + c) - m) * s;
          const float dy = ld<D>(dout, row + c);
          const float g = dy * ld<D>(weight, c);
          st<D>(dinp, row + c, ld<D>(dinp, row + c) + (g - mean_g - xhat * mean_gx) * s);
          pw[c] = fmaf(dy, xhat, pw[c]);
          pb[c] += dy;
        }
      }
    }
#pragma omp barrier
    long long c0, c1;
    static_range(C, t, T, &c0, &c1);
    if constexpr (D == F32) {
      float* dw = static_cast<float*>(a.dweight);
      float* db = static_cast<float*>(a.dbias);
      for (long long k = 0; k < chunks; ++k) {
        const float* pw = a.scratch + k * 2 * C;
        const float* pb = pw + C;
#pragma omp simd
        for (long long c = c0; c < c1; ++c) {
          dw[c] += pw[c];
          db[c] += pb[c];
        }
      }
    } else {
      // 16-bit: the chunks' sum in float32 (in chunk order), added to the stored value once.
      for (long long c = c0; c < c1; ++c) {
        float sw = 0, sb = 0;
        for (long long k = 0; k < chunks; ++k) {
          sw += a.scratch[k * 2 * C + c];
          sb += a.scratch[k * 2 * C + C + c];
        }
        st<D>(a.dweight, c, ld<D>(a.dweight, c) + sw);
        st<D>(a.dbias, c, ld<D>(a.dbias, c) + sb);
      }
    }
  }
  return 0;
}

// GELU's tanh form through a sigmoid: 0.5 (1 + tanh u) = 1 / (1 + e^{-2u}) — one exp and one division
// (tanh's sign handling and its second division fall away). Past |x| = 11 e^{-2u} is far outside float's
// range (exp_f clamps it) and GELU is 0 or x, GELU' 0 or 1, to float precision; but x / (1 + the clamped
// e^{-2u}) is -1.4 at -FLT_MAX, and GELU' grows as x^3 times the clamped 1e-38 (wrong past about 1e11, inf
// past 1e19). So those elements take 0 or 1, selected from x at the end (clamping x first, on the formulas'
// dependency chain, cost 1.4-1.6x); a NaN's compares are false, so it keeps the formula's NaN.
constexpr float gelu_saturated = 11.0f;

template <int D>
int gelu_forward(const void* p, int num_threads) {
  const auto& a = *static_cast<const accel_nn_gelu_forward_args*>(p);
  if (a.n < 0) return 1;
  const void* const inp = a.inp;
  void* const out = a.out;
#pragma omp parallel num_threads(thread_count(num_threads))
  {
    long long begin, end;
    static_range(a.n, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
#pragma omp simd
    for (long long i = begin; i < end; ++i) {
      const float xi = ld<D>(inp, i);
      const float y = xi / (1.0f + exp_f(xi * fmaf(gelu_m2kc, xi * xi, gelu_m2k)));
      st<D>(out, i, xi < -gelu_saturated ? 0.0f : y);
    }
  }
  return 0;
}

// d/dx: with s = 1 / (1 + e^{-2u}) (= 0.5 (1 + tanh u)), 0.5 (1 - tanh^2 u) = 2 s (1 - s), so
// gelu'(x) = s + 2 x s (1 - s) u'(x), u'(x) = k (1 + 3 c x^2); 1 - s is taken as e^{-2u} s.
template <int D>
int gelu_backward(const void* p, int num_threads) {
  const auto& a = *static_cast<const accel_nn_gelu_backward_args*>(p);
  if (a.n < 0) return 1;
  const void* const inp = a.inp;
  const void* const dout = a.dout;
  void* const dinp = a.dinp;
#pragma omp parallel num_threads(thread_count(num_threads))
  {
    long long begin, end;
    static_range(a.n, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
#pragma omp simd
    for (long long i = begin; i < end; ++i) {
      const float xi = ld<D>(inp, i);
      const float x2 = xi * xi;
      const float e = exp_f(xi * fmaf(gelu_m2kc, x2, gelu_m2k));
      const float s = 1.0f / (1.0f + e);
      const float du2 = fmaf(gelu_6kc, x2, gelu_2k);                 // 2 u'(x)
      const float grad = fmaf(xi * (e * s) * s, du2, s);  // 1 - s = e s, without cancellation
      st<D>(dinp, i, (xi > gelu_saturated ? 1.0f : xi < -gelu_saturated ? 0.0f : grad) * ld<D>(dout, i));
    }
  }
  return 0;
}

template <int D>
int cross_entropy(const void* p, int num_threads) {
  const auto& a = *static_cast<const accel_nn_cross_entropy_args*>(p);
  if (a.N < 0 || a.V <= 0 || a.Vp < a.V) return 1;
  for (long long n = 0; n < a.N; ++n) {
    if (a.targets[n] < 0 || a.targets[n] >= a.V) return 2;
  }
  const long long V = a.V, Vp = a.Vp;
#pragma omp parallel num_threads(thread_count(num_threads))
  {
    long long begin, end;
    row_range(a.N, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
    for (long long n = begin; n < end; ++n) {
      const long long row = n * Vp;
      float mx = ld<D>(a.logits, row);
#pragma omp simd reduction(max : mx)
      for (long long v = 0; v < V; ++v) {
        const float z = ld<D>(a.logits, row + v);
        mx = z > mx ? z : mx;
      }
      float sum = 0;
#pragma omp simd reduction(+ : sum)
      for (long long v = 0; v < V; ++v) sum += exp_f(ld<D>(a.logits, row + v) - mx);
      const int target = a.targets[n];
      a.losses[n] = logf(sum) + mx - ld<D>(a.logits, row + target);
      if (a.write_grad != 0) {
        const float scale = a.dloss / sum;
        if constexpr (D == F32) {
          float* z = static_cast<float*>(a.logits) + row;
#pragma omp simd
          for (long long v = 0; v < V; ++v) z[v] = exp_f(z[v] - mx) * scale;
          z[target] -= a.dloss;
        } else {
          // The target's gradient rounded once (softmax - dloss), as on CUDA.
#pragma omp simd
          for (long long v = 0; v < V; ++v) {
            const float g = exp_f(ld<D>(a.logits, row + v) - mx) * scale;
            st<D>(a.logits, row + v, v == target ? g - a.dloss : g);
          }
        }
        for (long long v = V; v < Vp; ++v) st<D>(a.logits, row + v, 0.0f);
      }
    }
  }
  return 0;
}

template <int D>
int add(const void* p, int num_threads) {
  const auto& a = *static_cast<const accel_nn_add_args*>(p);
  if (a.n < 0) return 1;
#pragma omp parallel num_threads(thread_count(num_threads))
  {
    long long begin, end;
    static_range(a.n, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
#pragma omp simd
    for (long long i = begin; i < end; ++i) st<D>(a.out, i, ld<D>(a.a, i) + ld<D>(a.b, i));
  }
  return 0;
}

template <int D>
int dropout(const void* p, int num_threads) {
  const auto& a = *static_cast<const accel_nn_dropout_args*>(p);
  if (a.n < 0) return 1;
  // Locals, and the input loaded whatever the mask says: with the load under the condition and the
  // arguments re-read after each store (out may alias them, as far as the compiler knows) the loop
  // stayed scalar and branchy. Dropped elements are still exactly 0.
  const void* const inp = a.inp;
  void* const out = a.out;
  const unsigned int* const bits = a.bits;
  const unsigned int threshold = a.threshold;
  const float scale = a.scale;
#pragma omp parallel num_threads(thread_count(num_threads))
  {
    long long begin, end;
    static_range(a.n, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
#pragma omp simd
    for (long long i = begin; i < end; ++i) {
      const float kept = ld<D>(inp, i) * scale;
      st<D>(out, i, bits[i] >= threshold ? kept : 0.0f);
    }
  }
  return 0;
}

template <int D>
int clip(const void* p, int num_threads) {
  const auto& a = *static_cast<const accel_nn_clip_args*>(p);
  if (a.n < 0) return 1;
  const float coef = a.max_norm / (*a.norm + 1e-6f);
  if (!(coef < 1.0f)) return 0;
#pragma omp parallel num_threads(thread_count(num_threads))
  {
    long long begin, end;
    static_range(a.n, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
#pragma omp simd
    for (long long i = begin; i < end; ++i) st<D>(a.data, i, ld<D>(a.data, i) * coef);
  }
  return 0;
}

}  // namespace

// The entry points: one per kernel and storage dtype (accel_nn_abi.h).
#define ACCEL_NN_CPU_KERNEL(name)                                                                              \
  ACCEL_EXPORT int accel_nn_##name##_f32(const void* p, int t) { return name<ACCEL_DTYPE_F32>(p, t); }        \
  ACCEL_EXPORT int accel_nn_##name##_bf16(const void* p, int t) { return name<ACCEL_DTYPE_BF16>(p, t); }      \
  ACCEL_EXPORT int accel_nn_##name##_f16(const void* p, int t) { return name<ACCEL_DTYPE_F16>(p, t); }

ACCEL_NN_CPU_KERNEL(embedding_forward)
ACCEL_NN_CPU_KERNEL(embedding_backward)
ACCEL_NN_CPU_KERNEL(layernorm_forward)
ACCEL_NN_CPU_KERNEL(layernorm_backward)
ACCEL_NN_CPU_KERNEL(gelu_forward)
ACCEL_NN_CPU_KERNEL(gelu_backward)
ACCEL_NN_CPU_KERNEL(cross_entropy)
ACCEL_NN_CPU_KERNEL(add)
ACCEL_NN_CPU_KERNEL(dropout)
ACCEL_NN_CPU_KERNEL(clip)
