// attention.cpp — the engine's causal multi-head self-attention on the CPU: forward and backward, one
// launch each (accel/ops/launch.hpp: int entry(const void* args, int num_threads)). Arguments and the
// computation: attention.h.
//
// The (batch, head) pairs are split statically over the OpenMP threads; each pair is computed whole by
// one thread, so results do not depend on the thread count. Within a pair the products are small
// matrix products (T x T x hs) written as register-blocked loops over the machine's vectors (GCC vector
// extensions with -march=native: AVX-512 registers of 16 floats, else AVX2 ones of 8), the softmax over
// 16-float blocks; only the causal lower triangle is computed. Compiled with -ffp-contract=fast (the op's flag) so a*b+c becomes an FMA.
//
// Storage float32 (_f32), bfloat16 (_bf16) or float16 (_f16) for qkv, y, dy and dqkv; P (att) and all
// arithmetic float32. With 16-bit storage each (batch, head) pair's q, k, v (and dy) are converted
// into float32 rows in the thread's work area, the float32 code runs on them, and y (dqkv) is rounded
// once into the tensor: the same values the float32 kernel computes from the rounded inputs.
#include "attention.h"

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cpu_convert.h"  // accel's kernels/cpu: bfloat16 / float16 loads and stores

#define GPT_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using accel_kernels::elem_size;
using accel_kernels::ld;  // element i of a tensor stored as D (ACCEL_DTYPE_*), as float; st: its store, rounded
using accel_kernels::st;
constexpr int F32 = ACCEL_DTYPE_F32;

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4)));  // unaligned loads and stores

inline v16 load(const float* p) { return *reinterpret_cast<const v16u*>(p); }
// A load kept in a register: GCC would otherwise fold it into each FMA that uses it, and an
// R-row block would read the same 64 bytes R times (the loads, not the FMAs, then bound the loop).
inline v16 load_reg(const float* p) {
  v16 v = load(p);
#if defined(__AVX512F__)
  __asm__("" : "+v"(v));  // one zmm register (without AVX-512 the vector is two, and GCC splits it anyway)
#endif
  return v;
}
inline void store(float* p, v16 v) { *reinterpret_cast<v16u*>(p) = v; }
inline v16 splat(float x) { return v16{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }  // a broadcast (0 + x is an add)
typedef int v16i __attribute__((vector_size(64)));

inline v16 vmax(v16 a, v16 b) { return a > b ? a : b; }
// Horizontal sum and maximum: halves combined four times (constant two-input shuffles), not sixteen
// extractions.
template <class Op>
inline float reduce(v16 v, Op op) {
  v = op(v, __builtin_shuffle(v, v16i{8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7}));
  v = op(v, __builtin_shuffle(v, v16i{4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11}));
  v = op(v, __builtin_shuffle(v, v16i{2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13}));
  v = op(v, __builtin_shuffle(v, v16i{1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14}));
  return v[0];
}
inline float hsum(v16 v) {
  return reduce(v, [](v16 a, v16 b) { return a + b; });
}
inline float hmax(v16 v) { return reduce(v, vmax); }

// e^x on 16 lanes for x <= 0 (a softmax's x - max): Cephes' expf polynomial (as kernels/cpu/nn_ops.cpp),
// n = round(x / ln 2) by the 1.5 * 2^23 trick, whose low bits then hold n. x is clamped at -87.3, where
// the result is ~1e-38, never a subnormal.
inline v16 exp_neg(v16 x) {
  x = vmax(x, splat(-87.3365447505531f));
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

// A 16 x 16 transpose in registers: stage S (1, 2, 4, 8) swaps bit S of the row index with bit S of the
// lane index, between rows r and r + S ((r & S) == 0), by two two-input shuffles.
template <int S>
inline void transpose_stage(v16 (&x)[16]) {
  const v16i lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const v16i lo = (lane & S) == 0 ? lane : lane + (16 - S);
  const v16i hi = (lane & S) == 0 ? lane + S : lane + 16;
  for (int r = 0; r < 16; ++r) {
    if ((r & S) != 0) continue;
    const v16 a = x[r], b = x[r + S];
    x[r] = __builtin_shuffle(a, b, lo);
    x[r + S] = __builtin_shuffle(a, b, hi);
  }
}
inline void transpose16(v16 (&x)[16]) {
  transpose_stage<1>(x);
  transpose_stage<2>(x);
  transpose_stage<4>(x);
  transpose_stage<8>(x);
}

inline v16i lane_index(long long j0) {
  return v16i{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15} + static_cast<int>(j0);
}

// ---- the products: register-blocked loops over the machine's own vectors ----
//
// The softmax and the transposes work on 16-float blocks (v16) everywhere; the products, where the time
// goes, are written for the widest native vector (vn: W floats, one register): 16 with AVX-512, 8
// otherwise. (A v16 there is two AVX2 registers, and blocks of v16 accumulators outgrew the 16
// registers: the stack traffic made the AVX2 build 7x slower than the AVX-512 one, not 2x.) A block is
// RB output rows x G vectors of W columns, sized to keep its RB G accumulators, G operand vectors and a
// broadcast in registers: each operand vector loaded then feeds RB FMAs. Every output element still
// adds its terms in ascending order, whatever the blocking: the same bits on every path.
#if defined(__AVX512F__)
constexpr int W = 16;
#else
constexpr int W = 8;
#endif
typedef float vn __attribute__((vector_size(W * 4)));
typedef float vnu __attribute__((vector_size(W * 4), aligned(4)));

inline vn load_n(const float* p) {  // kept in a register (see load_reg)
  vn v = *reinterpret_cast<const vnu*>(p);
  __asm__("" : "+v"(v));
  return v;
}
inline void store_n(float* p, vn v) { *reinterpret_cast<vnu*>(p) = v; }
inline vn splat_n(float x) {  // a broadcast (vn{} + x would be an add)
#if defined(__AVX512F__)
  return splat(x);
#else
  return vn{x, x, x, x, x, x, x, x};
#endif
}

// Output rows and vectors per block of the P-times-b products (lower_times, upper_times) with hs = 16 NV:
// with AVX-512 all NV vectors of a row and as many rows as keep the accumulators within 24 of the 32
// registers, up to 8 (1.1-1.25x over 4 rows at T = 256, hs = 64); with AVX2 4 rows of 2 vectors (8 of
// the 16 registers), the 2 NV vectors of a row covered in passes.
#if defined(__AVX512F__)
template <int NV>
inline constexpr int block_rows = 24 / NV < 8 ? 24 / NV : 8;
template <int NV>
inline constexpr int block_vectors = NV;
#else
template <int NV>
inline constexpr int block_rows = 4;
template <int NV>
inline constexpr int block_vectors = 2;
#endif

// Local tiles are Tp x Tp (Tp: T rounded up to 16), zero beyond each row's diagonal and in the rows
// past T, so the products below run over whole 16-float vectors without masks.

// out[i*ldo + j] = scale * sum_d a[i*lda + d] * b[j][d] for rows i < T and the 16-column blocks
// that reach the diagonal (values past it are computed too; the caller masks them).
// a: T rows of hs = 16 NV floats (global); bt: b transposed in 32-column panels (transpose_in), so that
// the hs x 32 floats one register block reads are contiguous (rows of a whole Tp-wide transpose, 1 KB
// apart at T = 256, share a few L1 sets and evict each other). A block is R rows x a panel (32 / W
// vectors; the last panel of a row block may hold only 16 columns).
template <int NV>
void lower_products(const float* a, long long lda, const float* bt, long long T, float* out, long long ldo, float scale) {
  constexpr int hs = 16 * NV;  // a compile-time trip count: the loops over d unroll whole
  constexpr int P = 32 / W;    // vectors per panel
  constexpr int R = W == 16 ? 8 : 2;
  for (long long i0 = 0; i0 < T; i0 += R) {
    const int rows = static_cast<int>(T - i0 < R ? T - i0 : R);
    const long long jend = i0 + rows;  // columns needed by the block's last row
    const float* ar[R];
    for (int r = 0; r < R; ++r) ar[r] = a + (r < rows ? i0 + r : i0) * lda;
    for (long long j0 = 0; j0 < jend; j0 += 32) {
      const float* btj = bt + j0 * hs;  // columns [j0, j0 + 32): hs rows of 32
      const auto panel = [&](auto vectors) {  // the panel's first `vectors` vectors
        constexpr int V = decltype(vectors)::value;
        vn acc[R][V] = {};
        for (int d = 0; d < hs; ++d) {
          vn b[V];
          for (int v = 0; v < V; ++v) b[v] = load_n(btj + d * 32 + W * v);
          for (int r = 0; r < R; ++r) {
            const vn x = splat_n(ar[r][d]);
            for (int v = 0; v < V; ++v) acc[r][v] += x * b[v];
          }
        }
        for (int r = 0; r < rows; ++r) {
          for (int v = 0; v < V; ++v) store_n(out + (i0 + r) * ldo + j0 + W * v, acc[r][v] * scale);
        }
      };
      if (j0 + 16 < jend) {
        panel(std::integral_constant<int, P>{});
      } else {
        panel(std::integral_constant<int, P / 2>{});
      }
    }
  }
}

// Rows [i0, i0 + RB) of out = scale * P b over the lower triangle (lower_times below), in passes of
// block_vectors<NV> vectors.
template <int NV, int RB>
inline void lower_block(const float* p, long long ldp, const float* b, long long ldb, long long i0, float* out,
                        long long ldo, float scale) {
  constexpr int N = 16 * NV / W, G = block_vectors<NV>;  // vectors per row, per pass
  static_assert(N % G == 0, "a pass covers whole vectors");
  for (int g = 0; g < N; g += G) {
    vn acc[RB][G] = {};
    for (long long j = 0; j < i0 + RB; ++j) {
      vn bv[G];
      for (int v = 0; v < G; ++v) bv[v] = load_n(b + j * ldb + W * (g + v));
      for (int r = 0; r < RB; ++r) {
        const vn x = splat_n(p[(i0 + r) * ldp + j]);
        for (int v = 0; v < G; ++v) acc[r][v] += x * bv[v];
      }
    }
    for (int r = 0; r < RB; ++r) {
      for (int v = 0; v < G; ++v) store_n(out + (i0 + r) * ldo + W * (g + v), acc[r][v] * scale);
    }
  }
}

// Rows [j0, j0 + RB) of out = scale * M^T b over the lower triangle (upper_times below).
template <int NV, int RB>
inline void upper_block(const float* m, long long ldm, const float* b, long long ldb, long long T, long long j0,
                        float* out, long long ldo, float scale) {
  constexpr int N = 16 * NV / W, G = block_vectors<NV>;  // vectors per row, per pass
  static_assert(N % G == 0, "a pass covers whole vectors");
  for (int g = 0; g < N; g += G) {
    vn acc[RB][G] = {};
    for (long long i = j0; i < T; ++i) {
      vn bv[G];
      for (int v = 0; v < G; ++v) bv[v] = load_n(b + i * ldb + W * (g + v));
      const float* mi = m + i * ldm + j0;
      for (int r = 0; r < RB; ++r) {
        const vn x = splat_n(mi[r]);
        for (int v = 0; v < G; ++v) acc[r][v] += x * bv[v];
      }
    }
    for (int r = 0; r < RB; ++r) {
      for (int v = 0; v < G; ++v) store_n(out + (j0 + r) * ldo + W * (g + v), acc[r][v] * scale);
    }
  }
}

// The last block, of `rows` < block_rows<NV> rows: f(std::integral_constant<int, rows>{}), so that no
// row past T is read or written.
template <int NV, int RB = 1, class F>
void tail_block(int rows, F&& f) {
  if constexpr (RB < block_rows<NV>) {
    if (rows == RB) {
      f(std::integral_constant<int, RB>{});
    } else {
      tail_block<NV, RB + 1>(rows, f);
    }
  }
}

// out[i*ldo + v] = scale * sum_{j <= i} p[i*ldp + j] * b[j*ldb + v] (v < hs = 16 NV), rows [0, T);
// p: a local tile (zero past the diagonal and in the padding rows); b: T rows (global).
template <int NV>
void lower_times(const float* p, long long ldp, const float* b, long long ldb, long long T, float* out, long long ldo,
                 float scale) {
  constexpr int R = block_rows<NV>;
  long long i0 = 0;
  for (; i0 + R <= T; i0 += R) lower_block<NV, R>(p, ldp, b, ldb, i0, out, ldo, scale);
  tail_block<NV>(static_cast<int>(T - i0),
                 [&](auto rb) { lower_block<NV, decltype(rb)::value>(p, ldp, b, ldb, i0, out, ldo, scale); });
}

// out[j*ldo + v] = scale * sum_{i >= j} m[i*ldm + j] * b[i*ldb + v]: the transposed product over the
// lower triangle (m: a local tile, zero past the diagonal; b: T rows, global).
template <int NV>
void upper_times(const float* m, long long ldm, const float* b, long long ldb, long long T, float* out, long long ldo,
                 float scale) {
  constexpr int R = block_rows<NV>;
  long long j0 = 0;
  for (; j0 + R <= T; j0 += R) upper_block<NV, R>(m, ldm, b, ldb, T, j0, out, ldo, scale);
  tail_block<NV>(static_cast<int>(T - j0),
                 [&](auto rb) { upper_block<NV, decltype(rb)::value>(m, ldm, b, ldb, T, j0, out, ldo, scale); });
}

// bt = rows transposed in panels of 32 columns: element (d, j) at (j / 32) 32 hs + 32 d + j % 32, for
// j < T (zero for j in [T, Tp); a last panel of 16 has its other half unused); hs x Tb floats
// (Tb: Tp rounded up to 32). 16 x 16 blocks transposed in registers.
void transpose_in(const float* rows, long long ld, long long T, long long hs, long long Tp, float* bt) {
  for (long long j0 = 0; j0 < Tp; j0 += 16) {
    for (long long d0 = 0; d0 < hs; d0 += 16) {
      v16 x[16];
      for (int l = 0; l < 16; ++l) x[l] = j0 + l < T ? load(rows + (j0 + l) * ld + d0) : v16{};
      transpose16(x);
      for (int l = 0; l < 16; ++l) store(bt + (j0 / 32 * 32) * hs + (d0 + l) * 32 + j0 % 32, x[l]);
    }
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

// One (batch, head) pair, bh = b NH + h: q, k, v are T rows (row stride ld) of hs floats; y gets T
// rows (stride ldy).
template <int NV>
void head_forward(const gpt_attention_args& a, long long bh, const float* q, const float* k, const float* v,
                  long long ld, float* y, long long ldy, float* work) {
  const long long T = a.T, hs = a.C / a.NH, Tp = (T + 15) / 16 * 16, Tb = (Tp + 31) / 32 * 32;
  float* kt = work;          // hs x Tb (transpose_in's panels)
  float* pd = kt + hs * Tb;  // Tp x Tp: P with dropout (with dropout only)
  float* s = a.att + bh * Tp * Tp;  // this head's tile: scores, then P (zero past the diagonal)
  transpose_in(k, ld, T, hs, Tp, kt);
  lower_products<NV>(q, ld, kt, T, s, Tp, 1.0f / std::sqrt(static_cast<float>(hs)));
  const v16 neg = splat(-3.0e38f);
  for (long long i = 0; i < T; ++i) {
    float* si = s + i * Tp;
    // Blocks before `last` lie wholly at or below the diagonal; only the diagonal's block is masked.
    const long long last = i / 16;
    const v16i below = lane_index(16 * last) <= (v16i{} + static_cast<int>(i));
    v16 mx = below ? load(si + 16 * last) : neg;
    for (long long c = 0; c < last; ++c) mx = vmax(mx, load(si + 16 * c));
    const float m = hmax(mx);
    v16 sum = {};
    for (long long c = 0; c < last; ++c) {
      const v16 e = exp_neg(load(si + 16 * c) - m);
      store(si + 16 * c, e);
      sum += e;
    }
    const v16 el = below ? exp_neg(load(si + 16 * last) - m) : v16{};
    store(si + 16 * last, el);
    sum += el;
    const float inv = 1.0f / hsum(sum);
    for (long long c = 0; c <= last; ++c) store(si + 16 * c, load(si + 16 * c) * inv);
    for (long long c = last + 1; c < Tp / 16; ++c) store(si + 16 * c, v16{});
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
  lower_times<NV>(a.bits != nullptr ? pd : s, Tp, v, ld, T, y, ldy, 1.0f);
}

// One pair's backward: q, k, v and dq, dk, dv are T rows of stride ld, dy T rows of stride lddy.
template <int NV>
void head_backward(const gpt_attention_args& a, long long bh, const float* q, const float* k, const float* v,
                   long long ld, const float* dy, long long lddy, float* dq, float* dk, float* dv, float* work) {
  const long long T = a.T, hs = a.C / a.NH, Tp = (T + 15) / 16 * 16, Tb = (Tp + 31) / 32 * 32;
  const float* att = a.att + bh * Tp * Tp;  // P, zero past the diagonal and in the padding rows
  float* vt = work;          // hs x Tb (transpose_in's panels)
  float* ds = vt + hs * Tb;  // Tp x Tp: dPd, then dS (zero past the diagonal)
  float* pd = ds + Tp * Tp;  // Tp x Tp: Pd = P x dropout (with dropout only)
  transpose_in(v, ld, T, hs, Tp, vt);
  lower_products<NV>(dy, lddy, vt, T, ds, Tp, 1.0f);  // dPd[i][j] = dy_i . v_j
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
      if (bits_row != nullptr) {
        dp = dp * mask_v(a, bits_row, 16 * c, T);
        store(dsi + 16 * c, dp);  // dP
      }
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
  upper_times<NV>(a.bits != nullptr ? pd : att, Tp, dy, lddy, T, dv, ld, 1.0f);  // dv_j = sum_i Pd_ij dy_i
}

// `parts` column blocks of hs elements from T rows of a [.. x width] tensor stored as D (block p at
// column p C + h hs of row r0 + t) into float rows of parts x hs (to_rows), or back (rounded once).
template <int D>
void gather(float* rows, const void* t, long long r0, long long width, long long C, long long h, long long hs,
            long long T, int parts) {
  for (long long i = 0; i < T; ++i) {
    for (int p = 0; p < parts; ++p) {
      const long long src = (r0 + i) * width + p * C + h * hs;
      float* dst = rows + (i * parts + p) * hs;
      for (long long d = 0; d < hs; ++d) dst[d] = ld<D>(t, src + d);
    }
  }
}
template <int D>
void scatter(void* t, const float* rows, long long r0, long long width, long long C, long long h, long long hs,
             long long T, int parts) {
  for (long long i = 0; i < T; ++i) {
    for (int p = 0; p < parts; ++p) {
      const long long dst = (r0 + i) * width + p * C + h * hs;
      const float* src = rows + (i * parts + p) * hs;
      for (long long d = 0; d < hs; ++d) st<D>(t, dst + d, src[d]);
    }
  }
}

// Pair p = b NH + h of the launch, from and into tensors stored as D. io: the 16-bit storage's float
// rows (7 T hs floats).
template <int NV, int D>
void pair(const gpt_attention_args& a, long long p, bool forward, float* work, float* io) {
  const long long b = p / a.NH, h = p % a.NH, T = a.T, C = a.C, hs = C / a.NH, ld3 = 3 * C;
  if constexpr (D == F32) {
    const float* q = static_cast<const float*>(a.qkv) + b * T * ld3 + h * hs;
    if (forward) {
      head_forward<NV>(a, p, q, q + C, q + 2 * C, ld3, static_cast<float*>(a.y) + b * T * C + h * hs, C, work);
    } else {
      float* dq = static_cast<float*>(a.dqkv) + b * T * ld3 + h * hs;
      head_backward<NV>(a, p, q, q + C, q + 2 * C, ld3, static_cast<const float*>(a.dy) + b * T * C + h * hs, C, dq,
                        dq + C, dq + 2 * C, work);
    }
  } else {
    float* qkv = io;               // T x 3 hs
    float* y = qkv + 3 * T * hs;   // T x hs (y, or dy)
    float* dqkv = y + T * hs;      // T x 3 hs
    gather<D>(qkv, a.qkv, b * T, ld3, C, h, hs, T, 3);
    if (forward) {
      head_forward<NV>(a, p, qkv, qkv + hs, qkv + 2 * hs, 3 * hs, y, hs, work);
      scatter<D>(a.y, y, b * T, C, C, h, hs, T, 1);
    } else {
      gather<D>(y, a.dy, b * T, C, C, h, hs, T, 1);
      head_backward<NV>(a, p, qkv, qkv + hs, qkv + 2 * hs, 3 * hs, y, hs, dqkv, dqkv + hs, dqkv + 2 * hs, work);
      scatter<D>(a.dqkv, dqkv, b * T, ld3, C, h, hs, T, 3);
    }
  }
}

template <int NV, int D>
void run(const gpt_attention_args& a, bool forward, int threads) {
  const long long T = a.T, hs = a.C / a.NH, Tp = (T + 15) / 16 * 16;
  const long long pairs = a.B * a.NH;
  const long long io_floats = D == F32 ? 0 : 7 * T * hs;
  const long long Tb = (Tp + 31) / 32 * 32;
  const std::size_t work_floats = static_cast<std::size_t>(hs * Tb + 2 * Tp * Tp + io_floats);
#pragma omp parallel num_threads(threads)
  {
    // Kept per thread across launches: a fresh allocation this size would be mmap'ed and its pages
    // zeroed by the kernel on every call.
    thread_local std::vector<float> work;
    if (work.size() < work_floats) work.resize(work_floats);
    float* io = work.data() + (hs * Tb + 2 * Tp * Tp);
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const long long p0 = pairs * t / nt, p1 = pairs * (t + 1) / nt;
    for (long long p = p0; p < p1; ++p) pair<NV, D>(a, p, forward, work.data(), io);
  }
}

template <int D>
int dispatch(const void* p, int num_threads, bool forward) {
  const auto& a = *static_cast<const gpt_attention_args*>(p);
  if (a.B < 0 || a.T <= 0 || a.NH <= 0 || a.C <= 0 || a.C % a.NH != 0) return 1;
  const long long hs = a.C / a.NH;
  const int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
  switch (hs) {  // head sizes the vector loops cover; others are refused (code 4)
    case 16: run<1, D>(a, forward, threads); return 0;
    case 32: run<2, D>(a, forward, threads); return 0;
    case 48: run<3, D>(a, forward, threads); return 0;
    case 64: run<4, D>(a, forward, threads); return 0;
    case 80: run<5, D>(a, forward, threads); return 0;
    case 96: run<6, D>(a, forward, threads); return 0;
    case 128: run<8, D>(a, forward, threads); return 0;
    default: return 4;
  }
}

}  // namespace

// ---- the GEMM path's kernels (attention.h): plain loops, split over the rows ----

namespace {

inline float mask_at(const gpt_softmax_args& a, long long idx) {
  return a.bits == nullptr ? 1.0f : (a.bits[idx] >= a.threshold ? a.scale : 0.0f);
}

template <int D>
int head_permute(const void* p, int num_threads) {
  const auto& a = *static_cast<const gpt_permute_args*>(p);
  if (a.B < 0 || a.T <= 0 || a.NH <= 0 || a.C % a.NH != 0 || (a.parts != 1 && a.parts != 3)) return 1;
  const long long hs = a.C / a.NH, rows = a.B * a.T, width = a.parts * a.C, es = elem_size<D>();
  char* tokens = static_cast<char*>(a.tokens);
  const int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long long r = 0; r < rows; ++r) {
    const long long b = r / a.T, t = r % a.T;
    for (int part = 0; part < a.parts; ++part) {
      char* heads = static_cast<char*>(a.heads[part]);
      for (long long h = 0; h < a.NH; ++h) {
        char* hp = heads + ((b * a.NH + h) * a.T + t) * hs * es;
        char* tp = tokens + (r * width + part * a.C + h * hs) * es;
        if (a.to_tokens != 0) {
          std::memcpy(tp, hp, static_cast<std::size_t>(hs * es));
        } else {
          std::memcpy(hp, tp, static_cast<std::size_t>(hs * es));
        }
      }
    }
  }
  return 0;
}

// Row r = (head, i) of the heads x T matrices in att / datt for each r, split statically over the
// threads: f(s, i, base) with s a T-float row of the thread's own (kept across launches), base = r T.
template <class F>
int softmax_rows(const gpt_softmax_args& a, int num_threads, F&& f) {
  if (a.heads < 0 || a.T <= 0) return 1;
  const long long T = a.T, rows = a.heads * T;
  const int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
#pragma omp parallel num_threads(threads)
  {
    thread_local std::vector<float> row;
    if (row.size() < static_cast<std::size_t>(T)) row.resize(static_cast<std::size_t>(T));
#pragma omp for schedule(static)
    for (long long r = 0; r < rows; ++r) f(row.data(), r % T, r * T);
  }
  return 0;
}

template <int D>
int softmax_forward(const void* p, int num_threads) {
  const auto& a = *static_cast<const gpt_softmax_args*>(p);
  const long long T = a.T;
  return softmax_rows(a, num_threads, [&](float* s, long long i, long long base) {
    for (long long j = 0; j < T; ++j) s[j] = ld<D>(a.att, base + j);
    float mx = s[0];
    for (long long j = 1; j <= i; ++j) mx = s[j] > mx ? s[j] : mx;
    float sum = 0;
    for (long long j = 0; j <= i; ++j) sum += (s[j] = std::exp(s[j] - mx));
    const float inv = 1.0f / sum;
    for (long long j = 0; j < T; ++j) {
      s[j] = j <= i ? s[j] * inv : 0.0f;
      st<D>(a.att, base + j, s[j]);
    }
    if (a.bits != nullptr) {
      for (long long j = 0; j < T; ++j) st<D>(a.pd, base + j, s[j] * mask_at(a, base + j));
    }
  });
}

template <int D>
int softmax_backward(const void* p, int num_threads) {
  const auto& a = *static_cast<const gpt_softmax_args*>(p);
  const long long T = a.T;
  return softmax_rows(a, num_threads, [&](float* d, long long i, long long base) {
    float dsum = 0;
    for (long long j = 0; j <= i; ++j) {
      d[j] = ld<D>(a.datt, base + j) * mask_at(a, base + j);
      dsum += ld<D>(a.att, base + j) * d[j];
    }
    for (long long j = 0; j < T; ++j) st<D>(a.datt, base + j, j <= i ? ld<D>(a.att, base + j) * (d[j] - dsum) * a.scale_qk : 0.0f);
  });
}

}  // namespace

// The entry points, one per kernel and storage dtype.
#define GPT_CPU_KERNELS(suffix, D)                                                                         \
  GPT_EXPORT int gpt_attention_forward_##suffix(const void* a, int t) { return dispatch<D>(a, t, true); }   \
  GPT_EXPORT int gpt_attention_backward_##suffix(const void* a, int t) { return dispatch<D>(a, t, false); } \
  GPT_EXPORT int gpt_head_permute_##suffix(const void* a, int t) { return head_permute<D>(a, t); }          \
  GPT_EXPORT int gpt_softmax_forward_##suffix(const void* a, int t) { return softmax_forward<D>(a, t); }    \
  GPT_EXPORT int gpt_softmax_backward_##suffix(const void* a, int t) { return softmax_backward<D>(a, t); }

GPT_CPU_KERNELS(f32, ACCEL_DTYPE_F32)
GPT_CPU_KERNELS(bf16, ACCEL_DTYPE_BF16)
GPT_CPU_KERNELS(f16, ACCEL_DTYPE_F16)
