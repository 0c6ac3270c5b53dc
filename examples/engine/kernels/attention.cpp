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
inline v16 splat(float x) { return v16{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }  // a broadcast (0 + x is an add)
// Horizontal sum: halves added four times (constant two-input shuffles), not sixteen extractions.
inline float hsum(v16 v) {
  typedef int v16i_ __attribute__((vector_size(64)));
  v += __builtin_shuffle(v, v16i_{8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7});
  v += __builtin_shuffle(v, v16i_{4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11});
  v += __builtin_shuffle(v, v16i_{2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13});
  v += __builtin_shuffle(v, v16i_{1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14});
  return v[0];
}

typedef int v16i __attribute__((vector_size(64)));

// e^x on 16 lanes: Cephes' expf polynomial (as kernels/cpu/nn_ops.cpp), n = round(x / ln 2) by the
// 1.5 * 2^23 trick, whose low bits then hold n.
inline v16 exp_v(v16 x) {
  x = x < splat(88.3762626647949f) ? x : splat(88.3762626647949f);
  x = x > splat(-87.3365447505531f) ? x : splat(-87.3365447505531f);
  const v16 t = x * 1.44269504088896341f + 12582912.0f;
  const v16 n = t - 12582912.0f;
  v16 r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  v16 p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const v16 y = (p * (r * r) + r) + 1.0f;
  const v16i e = ((v16i)t - 0x4B400000 + 127) << 23;
  return y * (v16)e;
}

inline v16i lane_index(long long j0) {
  return v16i{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15} + static_cast<int>(j0);
}

constexpr int R = 4;  // rows per register block

// Local tiles are Tp x Tp (Tp: T rounded up to 16), zero beyond each row's diagonal and in the rows
// past T, so the products below run over whole 16-float vectors without masks.

// out[i*ldo + j] = scale * sum_d a[i*lda + d] * bt[d*Tp + j] for rows i < T and the 16-column blocks
// that reach the diagonal (values past it are computed too; the caller masks them).
// a: T rows of hs floats (global); bt: hs x Tp (local, transposed operand).
void lower_products(const float* a, long long lda, const float* bt, long long hs, long long T, long long Tp,
                    float* out, long long ldo, float scale) {
  for (long long i0 = 0; i0 < T; i0 += R) {
    const int rows = static_cast<int>(T - i0 < R ? T - i0 : R);
    const long long jend = i0 + rows;  // columns needed by the block's last row
    const float* ar[R];
    for (int r = 0; r < R; ++r) ar[r] = a + (r < rows ? i0 + r : i0) * lda;
    for (long long j0 = 0; j0 < jend; j0 += 32) {
      v16 acc[R][2] = {};
      if (j0 + 16 < jend) {
        for (long long d = 0; d < hs; ++d) {
          const v16 b0 = load(bt + d * Tp + j0), b1 = load(bt + d * Tp + j0 + 16);
          for (int r = 0; r < R; ++r) {
            const v16 x = splat(ar[r][d]);
            acc[r][0] += x * b0;
            acc[r][1] += x * b1;
          }
        }
        for (int r = 0; r < rows; ++r) {
          store(out + (i0 + r) * ldo + j0, acc[r][0] * scale);
          store(out + (i0 + r) * ldo + j0 + 16, acc[r][1] * scale);
        }
      } else {
        for (long long d = 0; d < hs; ++d) {
          const v16 b0 = load(bt + d * Tp + j0);
          for (int r = 0; r < R; ++r) acc[r][0] += splat(ar[r][d]) * b0;
        }
        for (int r = 0; r < rows; ++r) store(out + (i0 + r) * ldo + j0, acc[r][0] * scale);
      }
    }
  }
}

// out[i*ldo + v] = scale * sum_{j <= i} p[i*ldp + j] * b[j*ldb + v] (v < hs = 16 NV), rows [0, T);
// p: a local tile (zero past the diagonal and in the padding rows); b: T rows (global).
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
        const v16 x = splat(p[(i0 + r) * ldp + j]);
        for (int v = 0; v < NV; ++v) acc[r][v] += x * bv[v];
      }
    }
    for (int r = 0; r < rows; ++r) {
      for (int v = 0; v < NV; ++v) store(out + (i0 + r) * ldo + 16 * v, acc[r][v] * scale);
    }
  }
}

// out[j*ldo + v] = scale * sum_{i >= j} m[i*ldm + j] * b[i*ldb + v]: the transposed product over the
// lower triangle (m: a local tile, zero past the diagonal; b: T rows, global).
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
        const v16 x = splat(mi[r]);
        for (int v = 0; v < NV; ++v) acc[r][v] += x * bv[v];
      }
    }
    for (int r = 0; r < rows; ++r) {
      for (int v = 0; v < NV; ++v) store(out + (j0 + r) * ldo + 16 * v, acc[r][v] * scale);
    }
  }
}

// bt[d*Tp + j] = rows[j*ld + d] for j < T, zero for j in [T, Tp): each row read once, contiguously.
void transpose_in(const float* rows, long long ld, long long T, long long hs, long long Tp, float* bt) {
  for (long long j = 0; j < T; ++j) {
    const float* r = rows + j * ld;
    for (long long d = 0; d < hs; ++d) bt[d * Tp + j] = r[d];
  }
  for (long long d = 0; d < hs; ++d) {
    for (long long j = T; j < Tp; ++j) bt[d * Tp + j] = 0;
  }
}

// The dropout factors of row i (bits >= threshold ? scale : 0) for one 16-column block.
inline v16 mask_v(const gpt_attention_args& a, const std::uint32_t* bits_row, long long j0, long long T) {
  v16 m;
  for (int l = 0; l < 16; ++l) {
    const long long j = j0 + l;
    m[l] = j < T && bits_row[j] >= a.threshold ? a.scale : 0.0f;
  }
  return m;
}

template <int NV>
void head_forward(const gpt_attention_args& a, long long b, long long h, float* work) {
  const long long T = a.T, C = a.C, hs = C / a.NH, Tp = (T + 15) / 16 * 16, ld = 3 * C;
  const float* q = static_cast<const float*>(a.qkv) + b * T * ld + h * hs;
  const float* k = q + C;
  const float* v = q + 2 * C;
  float* kt = work;          // hs x Tp
  float* pd = kt + hs * Tp;  // Tp x Tp: P with dropout (with dropout only)
  const long long bh = b * a.NH + h;
  float* s = a.att + bh * Tp * Tp;  // this head's tile: scores, then P (zero past the diagonal)
  transpose_in(k, ld, T, hs, Tp, kt);
  lower_products(q, ld, kt, hs, T, Tp, s, Tp, 1.0f / std::sqrt(static_cast<float>(hs)));
  const v16 neg = splat(-3.0e38f);
  for (long long i = 0; i < T; ++i) {
    float* si = s + i * Tp;
    const long long blocks = i / 16 + 1;  // the 16-column blocks holding columns 0..i
    const v16i diag = v16i{} + static_cast<int>(i);
    v16 mx = neg;
    for (long long c = 0; c < blocks; ++c) {
      const v16 x = load(si + 16 * c);
      const v16 xm = lane_index(16 * c) <= diag ? x : neg;
      mx = mx > xm ? mx : xm;
    }
    float m = mx[0];
    for (int l = 1; l < 16; ++l) m = mx[l] > m ? mx[l] : m;
    v16 sum = {};
    for (long long c = 0; c < blocks; ++c) {
      const v16 e = exp_v(load(si + 16 * c) - m);
      const v16 em = lane_index(16 * c) <= diag ? e : v16{};
      store(si + 16 * c, em);
      sum += em;
    }
    const float inv = 1.0f / hsum(sum);
    for (long long c = 0; c < blocks; ++c) store(si + 16 * c, load(si + 16 * c) * inv);
    for (long long c = blocks; c < Tp / 16; ++c) store(si + 16 * c, v16{});
    if (a.bits != nullptr) {
      const std::uint32_t* bits_row = a.bits + (bh * T + i) * T;
      float* pdi = pd + i * Tp;
      for (long long c = 0; c < Tp / 16; ++c) store(pdi + 16 * c, load(si + 16 * c) * mask_v(a, bits_row, 16 * c, T));
    }
  }
  for (long long i = T; i < Tp; ++i) {  // padding rows (read by the backward pass's full-block loops)
    std::memset(s + i * Tp, 0, static_cast<std::size_t>(Tp) * sizeof(float));
    if (a.bits != nullptr) std::memset(pd + i * Tp, 0, static_cast<std::size_t>(Tp) * sizeof(float));
  }
  float* y = static_cast<float*>(a.y) + b * T * C + h * hs;
  lower_times<NV>(a.bits != nullptr ? pd : s, Tp, v, ld, T, y, C, 1.0f);
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
  const float* att = a.att + bh * Tp * Tp;  // P, zero past the diagonal and in the padding rows
  float* vt = work;          // hs x Tp
  float* ds = vt + hs * Tp;  // Tp x Tp: dPd, then dS (zero past the diagonal)
  float* pd = ds + Tp * Tp;  // Tp x Tp: Pd = P x dropout (with dropout only)
  transpose_in(v, ld, T, hs, Tp, vt);
  lower_products(dy, C, vt, hs, T, Tp, ds, Tp, 1.0f);  // dPd[i][j] = dy_i . v_j
  const float sc = 1.0f / std::sqrt(static_cast<float>(hs));
  for (long long i = 0; i < T; ++i) {
    float* dsi = ds + i * Tp;
    const float* pi = att + i * Tp;
    float* pdi = pd + i * Tp;
    const long long blocks = i / 16 + 1;
    const std::uint32_t* bits_row = a.bits != nullptr ? a.bits + (bh * T + i) * T : nullptr;
    v16 dsum = {};
    for (long long c = 0; c < blocks; ++c) {
      v16 dp = load(dsi + 16 * c);
      if (bits_row != nullptr) dp = dp * mask_v(a, bits_row, 16 * c, T);
      store(dsi + 16 * c, dp);        // dP
      dsum += load(pi + 16 * c) * dp;  // P is 0 past the diagonal
    }
    const float dsum_s = hsum(dsum);
    for (long long c = 0; c < blocks; ++c) {
      const v16 p = load(pi + 16 * c);
      store(dsi + 16 * c, p * (load(dsi + 16 * c) - dsum_s));
      if (bits_row != nullptr) store(pdi + 16 * c, p * mask_v(a, bits_row, 16 * c, T));
    }
    for (long long c = blocks; c < Tp / 16; ++c) {
      store(dsi + 16 * c, v16{});
      if (bits_row != nullptr) store(pdi + 16 * c, v16{});
    }
  }
  for (long long i = T; i < Tp; ++i) {
    std::memset(ds + i * Tp, 0, static_cast<std::size_t>(Tp) * sizeof(float));
    if (a.bits != nullptr) std::memset(pd + i * Tp, 0, static_cast<std::size_t>(Tp) * sizeof(float));
  }
  lower_times<NV>(ds, Tp, k, ld, T, dq, ld, sc);    // dq_i = sc sum_j dS_ij k_j
  upper_times<NV>(ds, Tp, q, ld, T, dk, ld, sc);    // dk_j = sc sum_i dS_ij q_i
  upper_times<NV>(a.bits != nullptr ? pd : att, Tp, dy, C, T, dv, ld, 1.0f);  // dv_j = sum_i Pd_ij dy_i
}

template <int NV>
void run(const gpt_attention_args& a, bool forward, int threads) {
  const long long T = a.T, hs = a.C / a.NH, Tp = (T + 15) / 16 * 16;
  const long long pairs = a.B * a.NH;
  const std::size_t work_floats = static_cast<std::size_t>(hs * Tp + 2 * Tp * Tp);
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

// ---- the GEMM path's kernels (attention.h): plain loops, split over the rows ----

namespace {

inline float mask_at(const gpt_softmax_args& a, long long idx) {
  return a.bits == nullptr ? 1.0f : (a.bits[idx] >= a.threshold ? a.scale : 0.0f);
}

}  // namespace

GPT_EXPORT int gpt_head_permute_f32(const void* p, int num_threads) {
  const auto& a = *static_cast<const gpt_permute_args*>(p);
  if (a.B < 0 || a.T <= 0 || a.NH <= 0 || a.C % a.NH != 0 || (a.parts != 1 && a.parts != 3)) return 1;
  const long long hs = a.C / a.NH, rows = a.B * a.T, width = a.parts * a.C;
  float* tokens = static_cast<float*>(a.tokens);
  const int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long long r = 0; r < rows; ++r) {
    const long long b = r / a.T, t = r % a.T;
    for (int part = 0; part < a.parts; ++part) {
      float* heads = static_cast<float*>(a.heads[part]);
      for (long long h = 0; h < a.NH; ++h) {
        float* hp = heads + ((b * a.NH + h) * a.T + t) * hs;
        float* tp = tokens + r * width + part * a.C + h * hs;
        if (a.to_tokens != 0) {
          std::memcpy(tp, hp, static_cast<std::size_t>(hs) * sizeof(float));
        } else {
          std::memcpy(hp, tp, static_cast<std::size_t>(hs) * sizeof(float));
        }
      }
    }
  }
  return 0;
}

GPT_EXPORT int gpt_softmax_forward_f32(const void* p, int num_threads) {
  const auto& a = *static_cast<const gpt_softmax_args*>(p);
  if (a.heads < 0 || a.T <= 0) return 1;
  const long long T = a.T, rows = a.heads * T;
  const int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long long r = 0; r < rows; ++r) {
    const long long i = r % T;
    float* s = static_cast<float*>(a.att) + r * T;
    float mx = s[0];
    for (long long j = 1; j <= i; ++j) mx = s[j] > mx ? s[j] : mx;
    float sum = 0;
    for (long long j = 0; j <= i; ++j) sum += (s[j] = std::exp(s[j] - mx));
    const float inv = 1.0f / sum;
    for (long long j = 0; j < T; ++j) s[j] = j <= i ? s[j] * inv : 0.0f;
    if (a.bits != nullptr) {
      float* pd = static_cast<float*>(a.pd) + r * T;
      for (long long j = 0; j < T; ++j) pd[j] = s[j] * mask_at(a, r * T + j);
    }
  }
  return 0;
}

GPT_EXPORT int gpt_softmax_backward_f32(const void* p, int num_threads) {
  const auto& a = *static_cast<const gpt_softmax_args*>(p);
  if (a.heads < 0 || a.T <= 0) return 1;
  const long long T = a.T, rows = a.heads * T;
  const int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long long r = 0; r < rows; ++r) {
    const long long i = r % T;
    const float* pr = static_cast<const float*>(a.att) + r * T;
    float* d = static_cast<float*>(a.datt) + r * T;
    float dsum = 0;
    for (long long j = 0; j <= i; ++j) {
      d[j] *= mask_at(a, r * T + j);
      dsum += pr[j] * d[j];
    }
    for (long long j = 0; j < T; ++j) d[j] = j <= i ? pr[j] * (d[j] - dsum) * a.scale_qk : 0.0f;
  }
  return 0;
}
