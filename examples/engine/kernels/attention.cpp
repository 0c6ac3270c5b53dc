// attention.cpp — the engine's causal multi-head self-attention on the CPU: forward and backward, one
// launch each (accel/ops/launch.hpp: int entry(const void* args, int num_threads)). Arguments and the
// computation: attention.h.
//
// The (batch, head) pairs are split statically over the OpenMP threads; each pair is computed whole by
// one thread, so results do not depend on the thread count. Within a pair the products are small
// matrix products (T x T x hs) written as register-blocked loops over 16-float vectors (GCC vector
// extensions: AVX-512 registers with -march=native, two AVX2 ones elsewhere); only the causal lower
// triangle is computed. Compiled with -ffp-contract=fast (the op's flag) so a*b+c becomes an FMA.
#include "attention.h"

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#define GPT_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4)));  // unaligned loads and stores

inline v16 load(const float* p) { return *reinterpret_cast<const v16u*>(p); }
inline void store(float* p, v16 v) { *reinterpret_cast<v16u*>(p) = v; }
inline v16 splat(float x) { return v16{} + x; }
inline float hsum(v16 v) {
  float s = 0;
  for (int i = 0; i < 16; ++i) s += v[i];
  return s;
}

inline std::uint32_t fbits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsf(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// e^x, Cephes' expf polynomial (as kernels/cpu/nn_ops.cpp), vectorisable.
inline float exp_f(float x) {
  x = x < 88.3762626647949f ? x : 88.3762626647949f;
  x = x > -87.3365447505531f ? x : -87.3365447505531f;
  const float t = x * 1.44269504088896341f + 12582912.0f;  // round(x / ln 2) in t's low bits
  const float n = t - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = (p * (r * r) + r) + 1.0f;
  return y * bitsf((fbits(t) - 0x4B400000u + 127u) << 23);
}

constexpr int R = 4;  // rows per register block

struct Head {
  long long T, C, hs, Tp;  // Tp: T rounded up to 16 (row stride of the local T x T tiles)
  long long row;           // 3C: stride between tokens in qkv and dqkv
  const float* q;          // this (b, h)'s first query row in qkv; keys at +C, values at +2C
  float scale_qk;          // 1 / sqrt(hs)
};

// out[i][j] = sum_d a[i*lda + d] * bt[d*Tp + j] for j < jmax(i) = i + 1 (causal), rows i in [0, T),
// written to out[i*ldo + j] for j <= i only. a: rows of hs floats; bt: hs x Tp (transposed operand).
void lower_products(const float* a, long long lda, const float* bt, long long hs, long long T, long long Tp,
                    float* out, long long ldo, float scale) {
  for (long long i0 = 0; i0 < T; i0 += R) {
    const int rows = static_cast<int>(T - i0 < R ? T - i0 : R);
    const long long jend = i0 + rows;  // columns needed by the block's last row
    for (long long j0 = 0; j0 < jend; j0 += 32) {
      v16 acc[R][2] = {};
      const bool two = j0 + 16 < jend;
      for (long long d = 0; d < hs; ++d) {
        const v16 b0 = load(bt + d * Tp + j0);
        const v16 b1 = two ? load(bt + d * Tp + j0 + 16) : v16{};
        for (int r = 0; r < R; ++r) {
          const v16 x = splat(r < rows ? a[(i0 + r) * lda + d] : 0.0f);
          acc[r][0] += x * b0;
          acc[r][1] += x * b1;
        }
      }
      for (int r = 0; r < rows; ++r) {
        const long long i = i0 + r;
        float* o = out + i * ldo;
        for (long long j = j0; j < j0 + 32 && j <= i; ++j) o[j] = acc[r][(j - j0) / 16][(j - j0) % 16] * scale;
      }
    }
  }
}

// out[i*ldo + v] = scale * sum_{j <= jmax} p[i*ldp + j] * b[j*ldb + v] (v < hs = 16 NV), rows [0, T);
// p is zero or unused beyond the diagonal: the sum runs over j <= i.
template <int NV>
void lower_times(const float* p, long long ldp, const float* b, long long ldb, long long T, float* out, long long ldo,
                 float scale) {
  for (long long i0 = 0; i0 < T; i0 += R) {
    const int rows = static_cast<int>(T - i0 < R ? T - i0 : R);
    v16 acc[R][NV] = {};
    for (long long j = 0; j < i0 + rows; ++j) {
      v16 bv[NV];
      for (int v = 0; v < NV; ++v) bv[v] = load(b + j * ldb + 16 * v);
      for (int r = 0; r < R; ++r) {
        const long long i = i0 + r;
        const v16 x = splat(r < rows && j <= i ? p[i * ldp + j] : 0.0f);
        for (int v = 0; v < NV; ++v) acc[r][v] += x * bv[v];
      }
    }
    for (int r = 0; r < rows; ++r) {
      for (int v = 0; v < NV; ++v) store(out + (i0 + r) * ldo + 16 * v, acc[r][v] * scale);
    }
  }
}

// out[j*ldo + v] = scale * sum_{i >= j} m[i*ldm + j] * b[i*ldb + v]: the transposed product over the
// lower triangle (m is a local T x Tp tile, zero above the diagonal).
template <int NV>
void upper_times(const float* m, long long ldm, const float* b, long long ldb, long long T, float* out, long long ldo,
                 float scale) {
  for (long long j0 = 0; j0 < T; j0 += R) {
    const int rows = static_cast<int>(T - j0 < R ? T - j0 : R);
    v16 acc[R][NV] = {};
    for (long long i = j0; i < T; ++i) {
      v16 bv[NV];
      for (int v = 0; v < NV; ++v) bv[v] = load(b + i * ldb + 16 * v);
      const float* mi = m + i * ldm + j0;
      for (int r = 0; r < R; ++r) {
        const v16 x = splat(r < rows ? mi[r] : 0.0f);
        for (int v = 0; v < NV; ++v) acc[r][v] += x * bv[v];
      }
    }
    for (int r = 0; r < rows; ++r) {
      for (int v = 0; v < NV; ++v) store(out + (j0 + r) * ldo + 16 * v, acc[r][v] * scale);
    }
  }
}

// bt[d*Tp + j] = rows[j*ld + d] for j < T, zero for j in [T, Tp).
void transpose_in(const float* rows, long long ld, long long T, long long hs, long long Tp, float* bt) {
  for (long long d = 0; d < hs; ++d) {
    float* o = bt + d * Tp;
    for (long long j = 0; j < T; ++j) o[j] = rows[j * ld + d];
    for (long long j = T; j < Tp; ++j) o[j] = 0;
  }
}

inline float mask_scale(const gpt_attention_args& a, long long idx) {
  return a.bits == nullptr ? 1.0f : (a.bits[idx] >= a.threshold ? a.scale : 0.0f);
}

template <int NV>
void head_forward(const gpt_attention_args& a, long long b, long long h, float* work) {
  const long long T = a.T, C = a.C, hs = C / a.NH, Tp = (T + 15) / 16 * 16, ld = 3 * C;
  const float* q = static_cast<const float*>(a.qkv) + b * T * ld + h * hs;
  const float* k = q + C;
  const float* v = q + 2 * C;
  float* kt = work;          // hs x Tp
  float* pd = kt + hs * Tp;  // T x Tp: P with dropout applied (only with dropout)
  const long long bh = b * a.NH + h;
  float* att = a.att + bh * T * T;
  transpose_in(k, ld, T, hs, Tp, kt);
  lower_products(q, ld, kt, hs, T, Tp, att, T, 1.0f / std::sqrt(static_cast<float>(hs)));
  for (long long i = 0; i < T; ++i) {
    float* s = att + i * T;
    float mx = s[0];
    for (long long j = 1; j <= i; ++j) mx = s[j] > mx ? s[j] : mx;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (long long j = 0; j <= i; ++j) {
      const float e = exp_f(s[j] - mx);
      s[j] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (long long j = 0; j <= i; ++j) s[j] *= inv;
    if (a.bits != nullptr) {
      for (long long j = 0; j <= i; ++j) pd[i * Tp + j] = s[j] * mask_scale(a, (bh * T + i) * T + j);
    }
  }
  float* y = static_cast<float*>(a.y) + b * T * C + h * hs;
  if (a.bits != nullptr) {
    lower_times<NV>(pd, Tp, v, ld, T, y, C, 1.0f);
  } else {
    lower_times<NV>(att, T, v, ld, T, y, C, 1.0f);
  }
}

template <int NV>
void head_backward(const gpt_attention_args& a, long long b, long long h, float* work) {
  const long long T = a.T, C = a.C, hs = C / a.NH, Tp = (T + 15) / 16 * 16, ld = 3 * C;
  const float* q = static_cast<const float*>(a.qkv) + b * T * ld + h * hs;
  const float* k = q + C;
  const float* v = q + 2 * C;
  const float* dy = static_cast<const float*>(a.dy) + b * T * C + h * hs;
  float* dq = static_cast<float*>(a.dqkv) + b * T * ld + h * hs;
  float* dk = dq + C;
  float* dv = dq + 2 * C;
  const long long bh = b * a.NH + h;
  const float* att = a.att + bh * T * T;
  float* vt = work;          // hs x Tp
  float* ds = vt + hs * Tp;  // T x Tp: dPd, then dS (zero above the diagonal)
  float* pd = ds + T * Tp;   // T x Tp: Pd (zero above the diagonal)
  transpose_in(v, ld, T, hs, Tp, vt);
  lower_products(dy, C, vt, hs, T, Tp, ds, Tp, 1.0f);  // dPd[i][j] = dy_i . v_j
  const float sc = 1.0f / std::sqrt(static_cast<float>(hs));
  for (long long i = 0; i < T; ++i) {
    const float* p = att + i * T;
    float* dsi = ds + i * Tp;
    float* pdi = pd + i * Tp;
    float dsum = 0;
    for (long long j = 0; j <= i; ++j) {
      const float m = mask_scale(a, (bh * T + i) * T + j);
      pdi[j] = p[j] * m;
      dsi[j] *= m;  // dP
      dsum += p[j] * dsi[j];
    }
#pragma omp simd
    for (long long j = 0; j <= i; ++j) dsi[j] = p[j] * (dsi[j] - dsum);
    for (long long j = i + 1; j < Tp; ++j) {
      dsi[j] = 0;
      pdi[j] = 0;
    }
  }
  lower_times<NV>(ds, Tp, k, ld, T, dq, ld, sc);  // dq_i = sc sum_j dS_ij k_j
  upper_times<NV>(ds, Tp, q, ld, T, dk, ld, sc);  // dk_j = sc sum_i dS_ij q_i
  upper_times<NV>(pd, Tp, dy, C, T, dv, ld, 1.0f);  // dv_j = sum_i Pd_ij dy_i
}

template <int NV>
void run(const gpt_attention_args& a, bool forward, int threads) {
  const long long T = a.T, hs = a.C / a.NH, Tp = (T + 15) / 16 * 16;
  const long long pairs = a.B * a.NH;
  const std::size_t work_floats = static_cast<std::size_t>(hs * Tp + 2 * T * Tp);
#pragma omp parallel num_threads(threads)
  {
    // Kept per thread across launches: a fresh allocation this size would be mmap'ed and its pages
    // zeroed by the kernel on every call.
    thread_local std::vector<float> work;
    if (work.size() < work_floats) work.resize(work_floats);
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const long long p0 = pairs * t / nt, p1 = pairs * (t + 1) / nt;
    for (long long p = p0; p < p1; ++p) {
      if (forward) {
        head_forward<NV>(a, p / a.NH, p % a.NH, work.data());
      } else {
        head_backward<NV>(a, p / a.NH, p % a.NH, work.data());
      }
    }
  }
}

int dispatch(const void* p, int num_threads, bool forward) {
  const auto& a = *static_cast<const gpt_attention_args*>(p);
  if (a.B < 0 || a.T <= 0 || a.NH <= 0 || a.C <= 0 || a.C % a.NH != 0) return 1;
  const long long hs = a.C / a.NH;
  const int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
  switch (hs) {  // head sizes the vector loops cover; others are refused (code 4)
    case 16: run<1>(a, forward, threads); return 0;
    case 32: run<2>(a, forward, threads); return 0;
    case 48: run<3>(a, forward, threads); return 0;
    case 64: run<4>(a, forward, threads); return 0;
    case 80: run<5>(a, forward, threads); return 0;
    case 96: run<6>(a, forward, threads); return 0;
    case 128: run<8>(a, forward, threads); return 0;
    default: return 4;
  }
}

}  // namespace

GPT_EXPORT int gpt_attention_forward_f32(const void* args, int num_threads) { return dispatch(args, num_threads, true); }
GPT_EXPORT int gpt_attention_backward_f32(const void* args, int num_threads) {
  return dispatch(args, num_threads, false);
}
