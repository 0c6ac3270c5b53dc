// attention.cpp — the engine's causal multi-head self-attention on the CPU: forward and backward, one
// launch each (accel/ops/launch.hpp: int entry(const void* args, int num_threads)). Arguments and the
// computation: attention.h.
//
// The (batch, head) pairs are split statically over the OpenMP threads; each pair is computed whole by
// one thread, so results do not depend on the thread count. Within a pair the products are small
// matrix products (T x T x hs) written as register-blocked loops over the machine's vectors (GCC vector
// extensions with -march=native: AVX-512 registers of 16 floats, else AVX2 ones of 8), the softmax over
// 16-float blocks of those vectors; only the causal lower triangle is computed. Compiled with -ffp-contract=fast (the op's flag) so a*b+c becomes an FMA.
//
// Storage float32 (_f32), bfloat16 (_bf16) or float16 (_f16) for qkv, y, dy and dqkv; P (att) and all
// arithmetic float32. With 16-bit storage each (batch, head) pair's q, k, v (and dy) are converted
// into float32 rows in the thread's work area, the float32 code runs on them, and y (dqkv) is rounded
// once into the tensor: the same values the float32 kernel computes from the rounded inputs.
#include "attention.h"

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cpu_convert.h"  // accel's kernels/cpu: bfloat16 / float16 loads and stores

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>  // fma_n
#endif

// AMX (Sapphire Rapids and later, with -march=native there): the bf16 products on the tile unit.
#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__) && defined(__linux__)
#define GPT_ATTENTION_AMX 1
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define GPT_ATTENTION_AMX 0
#endif

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

template <class V>
inline V vmax(V a, V b) {
  return a > b ? a : b;
}
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
inline float hmax(v16 v) { return reduce(v, vmax<v16>); }

// e^x for x <= 0 (a softmax's x - max), lane by lane on a vector V (VI: its int vector): Cephes' expf
// polynomial (as kernels/cpu/nn_ops.cpp), n = round(x / ln 2) by the 1.5 * 2^23 trick, whose low bits
// then hold n. x is clamped at -87.3, where the result is ~1e-38, never a subnormal.
template <class V, class VI>
inline V exp_neg_lanes(V x) {
  x = vmax(x, V{} - 87.3365447505531f);  // constants fold: no add is left
  const V t = x * 1.44269504088896341f + 12582912.0f;
  const V n = t - 12582912.0f;
  V r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  V p = V{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const V y = (p * (r * r) + r) + 1.0f;
  const VI e = ((VI)t - 0x4B400000 + 127) << 23;
  return y * (V)e;
}
inline v16 exp_neg(v16 x) { return exp_neg_lanes<v16, v16i>(x); }

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

// ---- the float32 path's softmax and transposes on the machine's own vectors ----
//
// A 16-float block (a v16 above) is B16 = 16 / W native vectors here. With AVX2 GCC lowered the v16
// form's masked selects, shuffles and reductions through the stack: the forward softmax took 3/4 of
// the forward kernel at tiny's shape (T 64, hs 32). The arithmetic is the v16 form's, lane for lane:
// lane l of a row's sum adds the columns 16 c + l in order; the block's B16 parts are added first (the
// v16 reduction's first stage), then the native vector's lanes by halves — the same bits on every path.
constexpr int B16 = 16 / W;
typedef int vni __attribute__((vector_size(W * 4)));
typedef unsigned vnu32 __attribute__((vector_size(W * 4), aligned(4)));

inline vn load_v(const float* p) { return *reinterpret_cast<const vnu*>(p); }
// a b + c as one FMA, explicitly: -ffp-contract=fast leaves it to GCC, which did not contract a
// product whose sum sat after a merge of two paths (one of the backward's two halves, with AVX2).
inline vn fma_n(vn a, vn b, vn c) {
#if defined(__AVX512F__)
  return (vn)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif defined(__FMA__)
  return (vn)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
  return a * b + c;
#endif
}
inline vni lanes_n() {
#if defined(__AVX512F__)
  return vni{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#else
  return vni{0, 1, 2, 3, 4, 5, 6, 7};
#endif
}
// v's lanes combined by halves (lane l with l + W/2, then l + W/4, ...), as reduce above.
template <class Op>
inline float reduce_n(vn v, Op op) {
#if defined(__AVX512F__)
  return reduce(v, op);
#else
  v = op(v, __builtin_shuffle(v, vni{4, 5, 6, 7, 0, 1, 2, 3}));
  v = op(v, __builtin_shuffle(v, vni{2, 3, 0, 1, 6, 7, 4, 5}));
  v = op(v, __builtin_shuffle(v, vni{1, 0, 3, 2, 5, 4, 7, 6}));
  return v[0];
#endif
}
inline float block_sum(const vn (&x)[B16]) {
  vn v = x[0];
  for (int h = 1; h < B16; ++h) v = v + x[h];
  return reduce_n(v, [](vn a, vn b) { return a + b; });
}
inline float block_max(const vn (&x)[B16]) {
  vn v = x[0];
  for (int h = 1; h < B16; ++h) v = vmax(v, x[h]);
  return reduce_n(v, vmax<vn>);
}

// A W x W transpose in registers (transpose_stage's scheme on W lanes).
template <int S>
inline void transpose_stage_n(vn (&x)[W]) {
  const vni lane = lanes_n();
  const vni lo = (lane & S) == 0 ? lane : lane + (W - S);
  const vni hi = (lane & S) == 0 ? lane + S : lane + W;
  for (int r = 0; r < W; ++r) {
    if ((r & S) != 0) continue;
    const vn a = x[r], b = x[r + S];
    x[r] = __builtin_shuffle(a, b, lo);
    x[r + S] = __builtin_shuffle(a, b, hi);
  }
}
inline void transpose_n(vn (&x)[W]) {
  transpose_stage_n<1>(x);
  transpose_stage_n<2>(x);
  transpose_stage_n<4>(x);
  if constexpr (W == 16) transpose_stage_n<8>(x);
}

// bt = rows transposed in panels of 32 columns: element (d, j) at (j / 32) 32 hs + 32 d + j % 32, for
// j < T (zero for j in [T, Tp); a last panel of 16 has its other half unused); hs x Tb floats
// (Tb: Tp rounded up to 32). W x W blocks transposed in registers.
void transpose_in(const float* rows, long long ld, long long T, long long hs, long long Tp, float* bt) {
  for (long long j0 = 0; j0 < Tp; j0 += W) {
    for (long long d0 = 0; d0 < hs; d0 += W) {
      vn x[W];
      for (int l = 0; l < W; ++l) x[l] = j0 + l < T ? load_v(rows + (j0 + l) * ld + d0) : vn{};
      transpose_n(x);
      for (int l = 0; l < W; ++l) store_n(bt + (j0 / 32 * 32) * hs + (d0 + l) * 32 + j0 % 32, x[l]);
    }
  }
}

// The dropout factors of row i (bits >= threshold ? scale : 0) for 16 (mask_v) or W (mask_n) columns
// from j0: one vector compare where they lie within T (a scalar loop with its conditional loads was
// 10 % of a bf16 step with dropout), element by element at the row's end.
typedef unsigned v16u32 __attribute__((vector_size(64), aligned(4)));
inline v16 mask_v(const gpt_attention_args& a, const std::uint32_t* bits_row, long long j0, long long T) {
  if (j0 + 16 <= T) {
    const v16u32 words = *reinterpret_cast<const v16u32*>(bits_row + j0);
    return words >= (v16u32{} + a.threshold) ? splat(a.scale) : v16{};
  }
  v16 m;
  for (int l = 0; l < 16; ++l) {
    const long long j = j0 + l;
    m[l] = j < T && bits_row[j] >= a.threshold ? a.scale : 0.0f;
  }
  return m;
}
inline vn mask_n(const gpt_attention_args& a, const std::uint32_t* bits_row, long long j0, long long T) {
  if (j0 + W <= T) {
    const vnu32 words = *reinterpret_cast<const vnu32*>(bits_row + j0);
    return words >= (vnu32{} + a.threshold) ? splat_n(a.scale) : vn{};
  }
  vn m;
  for (int l = 0; l < W; ++l) {
    const long long j = j0 + l;
    m[l] = j < T && bits_row[j] >= a.threshold ? a.scale : 0.0f;
  }
  return m;
}

// Row i of this head's tile s (rows T, stride Tp) becomes P[i] = softmax(S[i][0..i]), zero past the
// diagonal; rows [T, Tp) zero. With attention dropout pd gets P x the dropout factors.
void softmax_forward_tile(const gpt_attention_args& a, long long bh, float* s, float* pd) {
  const long long T = a.T, Tp = (T + 15) / 16 * 16;
  for (long long i = 0; i < T; ++i) {
    float* si = s + i * Tp;
    // Blocks before `last` lie wholly at or below the diagonal; only the diagonal's block is masked.
    const long long last = i / 16;
    float* sl = si + 16 * last;
    vni below[B16];
    for (int h = 0; h < B16; ++h) below[h] = lanes_n() + static_cast<int>(16 * last + W * h) <= static_cast<int>(i);
    vn mx[B16];
    for (int h = 0; h < B16; ++h) mx[h] = below[h] ? load_v(sl + W * h) : splat_n(-3.0e38f);
    for (long long c = 0; c < last; ++c) {
      for (int h = 0; h < B16; ++h) mx[h] = vmax(mx[h], load_v(si + 16 * c + W * h));
    }
    const float m = block_max(mx);
    vn sum[B16] = {};
    for (long long c = 0; c < last; ++c) {
      for (int h = 0; h < B16; ++h) {
        const vn e = exp_neg_lanes<vn, vni>(load_v(si + 16 * c + W * h) - m);
        store_n(si + 16 * c + W * h, e);
        sum[h] += e;
      }
    }
    for (int h = 0; h < B16; ++h) {
      const vn e = below[h] ? exp_neg_lanes<vn, vni>(load_v(sl + W * h) - m) : vn{};
      store_n(sl + W * h, e);
      sum[h] += e;
    }
    const float inv = 1.0f / block_sum(sum);
    for (long long c = 0; c < 16 * (last + 1); c += W) store_n(si + c, load_v(si + c) * inv);
    for (long long c = 16 * (last + 1); c < Tp; c += W) store_n(si + c, vn{});
    if (a.bits != nullptr) {
      const std::uint32_t* bits_row = a.bits + (bh * T + i) * T;
      float* pdi = pd + i * Tp;
      for (long long c = 0; c < Tp; c += W) store_n(pdi + c, load_v(si + c) * mask_n(a, bits_row, c, T));
    }
  }
  for (long long i = T; i < Tp; ++i) {  // padding rows (read by the backward pass's full-block loops)
    std::memset(s + i * Tp, 0, static_cast<std::size_t>(Tp) * sizeof(float));
    if (a.bits != nullptr) std::memset(pd + i * Tp, 0, static_cast<std::size_t>(Tp) * sizeof(float));
  }
}

// ds holds dPd = dy v^T (rows T, stride Tp); it becomes dS = P (dP - rowsum(P dP)), dP = dPd x the
// dropout factors, zero past the diagonal and in rows [T, Tp); with dropout pd gets Pd = P x them.
void softmax_backward_tile(const gpt_attention_args& a, long long bh, const float* att, float* ds, float* pd) {
  const long long T = a.T, Tp = (T + 15) / 16 * 16;
  for (long long i = 0; i < T; ++i) {
    float* dsi = ds + i * Tp;
    const float* pi = att + i * Tp;
    float* pdi = pd + i * Tp;
    const long long end = 16 * (i / 16 + 1);  // the blocks at or below the diagonal
    const std::uint32_t* bits_row = a.bits != nullptr ? a.bits + (bh * T + i) * T : nullptr;
    vn dsum[B16] = {};
    for (long long c = 0; c < end; c += 16) {
      for (int h = 0; h < B16; ++h) {
        const long long j = c + W * h;
        vn dp = load_v(dsi + j);
        if (bits_row != nullptr) {
          dp = dp * mask_n(a, bits_row, j, T);
          store_n(dsi + j, dp);  // dP
        }
        dsum[h] = fma_n(load_v(pi + j), dp, dsum[h]);  // P is 0 past the diagonal
      }
    }
    const float dsum_s = block_sum(dsum);
    for (long long j = 0; j < end; j += W) {
      const vn p = load_v(pi + j);
      store_n(dsi + j, p * (load_v(dsi + j) - dsum_s));
      if (bits_row != nullptr) store_n(pdi + j, p * mask_n(a, bits_row, j, T));
    }
    for (long long j = end; j < Tp; j += W) {
      store_n(dsi + j, vn{});
      if (bits_row != nullptr) store_n(pdi + j, vn{});
    }
  }
  for (long long i = T; i < Tp; ++i) {
    std::memset(ds + i * Tp, 0, static_cast<std::size_t>(Tp) * sizeof(float));
    if (a.bits != nullptr) std::memset(pd + i * Tp, 0, static_cast<std::size_t>(Tp) * sizeof(float));
  }
}

#if GPT_ATTENTION_AMX
// ---- bfloat16 storage on a CPU with AMX: the six products on the tile unit ----
//
// With bf16 q, k, v (and dy) and a head size of 32 or 64, the products run as AMX bf16 tile products
// (16 x 32 by 32 x 16, float32 sums): the scores S = q k^T and dPd = dy v^T from the stored bf16
// values, and y = Pd v, dq = dS k, dk = dS^T q, dv = Pd^T dy with P, Pd and dS rounded to bf16 first,
// as FlashAttention does on GPUs. The softmax and its backward compute in float32 in the thread's work
// area; the pair's att tile keeps P rounded to bf16 (rows of Tb: the tile's first Tp Tb / 2 floats),
// half the bytes the float32 P takes to memory and back. So the values are not the float32 kernel's
// bits but within bf16's precision of them (test_attention); the same bits for any thread count, as
// every pair is still one thread's. ENGINE_ATTENTION_AMX=0 in the environment turns this path off.
namespace amx {

typedef std::uint16_t bf16;

// Linux grants a process the tile registers' state only on request (arch_prctl), once.
inline bool permitted() {
  static const bool granted = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
  return granted;
}

// Every tile 16 rows of 64 bytes: A 16 x 32 bf16, B 16 pairs of rows x 16 columns, C 16 x 16 floats.
// Loaded by each thread at the start of a launch (oneDNN's kernels on the same thread load their own).
inline void configure() {
  struct alignas(64) {
    std::uint8_t palette, start_row, reserved[14];
    std::uint16_t colsb[16];
    std::uint8_t rows[16];
  } c{};
  c.palette = 1;
  for (int t = 0; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 16;
  _tile_loadconfig(&c);
}

inline void store_bf16(bf16* dst, v16 x) {  // 16 floats rounded to bf16 (to nearest even)
  const __m256bh h = _mm512_cvtneps_pbh(x);
  std::memcpy(dst, &h, 32);
}

// T rows of hs bf16 (row stride ld) into rows of hs, zero up to `rows`.
void copy_rows(const bf16* src, long long ld, long long T, long long rows, int hs, bf16* dst) {
  for (long long i = 0; i < T; ++i) std::memcpy(dst + i * hs, src + i * ld, static_cast<std::size_t>(hs) * 2);
  std::memset(dst + T * hs, 0, static_cast<std::size_t>((rows - T) * hs) * 2);
}

// B tiles of x y^T from y's rows (Tp of hs): tile (jb, dc) row r, 32-bit word c = the pair
// y[16 jb + c][32 dc + 2r, + 1]: 16 x 16 blocks of words transposed in registers.
void pairs_transposed(const bf16* y, int hs, long long Tp, bf16* out) {
  const int nc = hs / 32;
  for (long long jb = 0; jb < Tp / 16; ++jb) {
    for (int dc = 0; dc < nc; ++dc) {
      v16 x[16];
      for (int l = 0; l < 16; ++l) std::memcpy(&x[l], y + (16 * jb + l) * hs + 32 * dc, 64);
      transpose16(x);  // moves bits: no arithmetic on the words
      bf16* t = out + (jb * nc + dc) * 512;
      for (int r = 0; r < 16; ++r) std::memcpy(t + 32 * r, &x[r], 64);
    }
  }
}

// B tiles of P x from x's rows (Tb of hs): tile (kc, db) row r = x[32 kc + 2r][16 db + c] and
// x[32 kc + 2r + 1][16 db + c] interleaved, c < 16.
void pairs_interleaved(const bf16* x, int hs, long long Tb, bf16* out) {
  const int nb = hs / 16;
  alignas(64) std::int16_t index[32];
  for (int i = 0; i < 32; ++i) index[i] = static_cast<std::int16_t>(i % 2 == 0 ? i / 2 : 32 + i / 2);
  const __m512i idx = _mm512_load_si512(index);
  for (long long kc = 0; kc < Tb / 32; ++kc) {
    for (int db = 0; db < nb; ++db) {
      bf16* t = out + (kc * nb + db) * 512;
      for (int r = 0; r < 16; ++r) {
        const bf16* even = x + (32 * kc + 2 * r) * hs + 16 * db;
        const __m512i lo = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(even)));
        const __m512i hi = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(even + hs)));
        _mm512_storeu_si512(t + 32 * r, _mm512_permutex2var_epi16(lo, idx, hi));
      }
    }
  }
}

inline v16 widen(const bf16* p) {  // 16 bf16 as floats (exact)
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return reinterpret_cast<v16>(_mm512_slli_epi32(w, 16));
}

// A rows of M^T x: out[j][i] = M[i][j] rounded to bf16, rows j < Tp of Tb (zero for i >= Tp, and in
// the blocks above the diagonal, i < j); load_m(i, jb): M[i][16 jb, + 16).
template <class LoadM>
void transposed_bf16(LoadM&& load_m, long long Tp, long long Tb, bf16* out) {
  for (long long jb = 0; jb < Tp / 16; ++jb) {
    for (long long ib = 0; ib < Tb / 16; ++ib) {
      v16 x[16];
      if (ib < jb || ib >= Tp / 16) {
        for (auto& r : x) r = v16{};
      } else {
        for (int l = 0; l < 16; ++l) x[l] = load_m(16 * ib + l, jb);
        transpose16(x);
      }
      for (int r = 0; r < 16; ++r) store_bf16(out + (16 * jb + r) * Tb + 16 * ib, x[r]);
    }
  }
}

// The forward softmax on the raw scores s (rows T, stride Tp; scaled here), written as bf16 rows of
// Tb: P into p (kept for the backward pass) and, with attention dropout, Pd = P x the dropout factors
// into pd; zero past the diagonal and in rows [T, Tp). One pass for the maximum, one for e^x and its
// sum, one for the normalised, rounded rows.
void softmax_to_bf16(const gpt_attention_args& a, long long bh, float* s, float scale, bf16* p, bf16* pd) {
  const long long T = a.T, Tp = (T + 15) / 16 * 16, Tb = (Tp + 31) / 32 * 32;
  const v16 neg = splat(-3.0e38f), sc = splat(scale);
  for (long long i = 0; i < T; ++i) {
    float* si = s + i * Tp;
    bf16* pi = p + i * Tb;
    const long long last = i / 16;
    const v16i below = lane_index(16 * last) <= (v16i{} + static_cast<int>(i));
    v16 mx = below ? load(si + 16 * last) : neg;
    for (long long c = 0; c < last; ++c) mx = vmax(mx, load(si + 16 * c));
    const float m = hmax(mx) * scale;  // scale > 0
    v16 sum = {};
    for (long long c = 0; c < last; ++c) {
      const v16 e = exp_neg(load(si + 16 * c) * sc - m);
      store(si + 16 * c, e);
      sum += e;
    }
    const v16 el = below ? exp_neg(load(si + 16 * last) * sc - m) : v16{};
    store(si + 16 * last, el);
    sum += el;
    const v16 inv = splat(1.0f / hsum(sum));
    const std::uint32_t* bits_row = a.bits != nullptr ? a.bits + (bh * T + i) * T : nullptr;
    for (long long c = 0; c <= last; ++c) {
      const v16 pv = load(si + 16 * c) * inv;
      store_bf16(pi + 16 * c, pv);
      if (bits_row != nullptr) store_bf16(pd + i * Tb + 16 * c, pv * mask_v(a, bits_row, 16 * c, T));
    }
    const std::size_t rest = static_cast<std::size_t>(Tb - 16 * (last + 1)) * 2;
    std::memset(pi + 16 * (last + 1), 0, rest);
    if (bits_row != nullptr) std::memset(pd + i * Tb + 16 * (last + 1), 0, rest);
  }
  for (long long i = T; i < Tp; ++i) {
    std::memset(p + i * Tb, 0, static_cast<std::size_t>(Tb) * 2);
    if (a.bits != nullptr) std::memset(pd + i * Tb, 0, static_cast<std::size_t>(Tb) * 2);
  }
}

// The backward softmax: ds holds dPd = dy v^T (rows T, stride Tp); ds_rows gets dS = P (dP - rowsum(P
// dP)) with dP = dPd x the dropout factors, as bf16 rows of Tb, zero past the diagonal and in rows
// [T, Tp). P from the forward pass's bf16 rows p.
void softmax_backward_to_bf16(const gpt_attention_args& a, long long bh, const bf16* p, const float* ds,
                              bf16* ds_rows) {
  const long long T = a.T, Tp = (T + 15) / 16 * 16, Tb = (Tp + 31) / 32 * 32;
  for (long long i = 0; i < T; ++i) {
    const float* dsi = ds + i * Tp;
    const bf16* pi = p + i * Tb;
    bf16* out = ds_rows + i * Tb;
    const long long blocks = i / 16 + 1;
    const std::uint32_t* bits_row = a.bits != nullptr ? a.bits + (bh * T + i) * T : nullptr;
    v16 dsum = {};
    for (long long c = 0; c < blocks; ++c) {
      v16 dp = load(dsi + 16 * c);
      if (bits_row != nullptr) dp = dp * mask_v(a, bits_row, 16 * c, T);
      dsum += widen(pi + 16 * c) * dp;  // P is 0 past the diagonal
    }
    const float dsum_s = hsum(dsum);
    for (long long c = 0; c < blocks; ++c) {
      v16 dp = load(dsi + 16 * c);
      if (bits_row != nullptr) dp = dp * mask_v(a, bits_row, 16 * c, T);
      store_bf16(out + 16 * c, widen(pi + 16 * c) * (dp - dsum_s));
    }
    std::memset(out + 16 * blocks, 0, static_cast<std::size_t>(Tb - 16 * blocks) * 2);
  }
  for (long long i = T; i < Tp; ++i) std::memset(ds_rows + i * Tb, 0, static_cast<std::size_t>(Tb) * 2);
}

// s (stride Tp) = x y^T for the 16 x 16 blocks on and below the diagonal: x rows (Tp of hs = 32 NC),
// y as pairs_transposed's tiles.
template <int NC>
void scores(const bf16* x, const bf16* yt, long long Tp, float* s) {
  constexpr int hs = 32 * NC;
  for (long long ib = 0; ib < Tp / 16; ++ib) {
    _tile_loadd(1, x + 16 * ib * hs, hs * 2);
    if constexpr (NC == 2) _tile_loadd(2, x + 16 * ib * hs + 32, hs * 2);
    for (long long jb = 0; jb <= ib; ++jb) {
      _tile_zero(0);
      _tile_loadd(4, yt + (jb * NC) * 512, 64);
      _tile_dpbf16ps(0, 1, 4);
      if constexpr (NC == 2) {
        _tile_loadd(5, yt + (jb * NC + 1) * 512, 64);
        _tile_dpbf16ps(0, 2, 5);
      }
      _tile_stored(0, s + 16 * ib * Tp + 16 * jb, Tp * 4);
    }
  }
}

// out row i (i < T, stride ldo, bf16) = scale * sum_k A[i][k] x[k] over the 32-column chunks of A's
// rows (Tp of Tb) that block ib needs: [0, its diagonal] (lower) or [its diagonal, Tb) (upper); x as
// pairs_interleaved's tiles (hs = 16 NB). C tiles 0..NB-1, A tile 4, B tiles 5-7.
template <int NB>
void times(const bf16* arows, long long Tb, const bf16* xi, long long T, bool lower, float scale, bf16* out,
           long long ldo) {
  constexpr int hs = 16 * NB;
  const long long Tp = (T + 15) / 16 * 16;
  alignas(64) float c[16 * hs];
  for (long long ib = 0; ib < Tp / 16; ++ib) {
    _tile_zero(0);
    _tile_zero(1);
    if constexpr (NB == 4) {
      _tile_zero(2);
      _tile_zero(3);
    }
    const long long diagonal = 16 * ib / 32;
    const long long k0 = lower ? 0 : diagonal, k1 = lower ? diagonal + 1 : Tb / 32;
    for (long long kc = k0; kc < k1; ++kc) {
      const bf16* t = xi + kc * NB * 512;
      _tile_loadd(4, arows + 16 * ib * Tb + 32 * kc, Tb * 2);
      _tile_loadd(5, t, 64);
      _tile_dpbf16ps(0, 4, 5);
      _tile_loadd(6, t + 512, 64);
      _tile_dpbf16ps(1, 4, 6);
      if constexpr (NB == 4) {
        _tile_loadd(7, t + 1024, 64);
        _tile_dpbf16ps(2, 4, 7);
        _tile_loadd(5, t + 1536, 64);
        _tile_dpbf16ps(3, 4, 5);
      }
    }
    _tile_stored(0, c, hs * 4);
    _tile_stored(1, c + 16, hs * 4);
    if constexpr (NB == 4) {
      _tile_stored(2, c + 32, hs * 4);
      _tile_stored(3, c + 48, hs * 4);
    }
    const long long rows = T - 16 * ib < 16 ? T - 16 * ib : 16;
    for (long long r = 0; r < rows; ++r) {
      for (int v = 0; v < NB; ++v) store_bf16(out + (16 * ib + r) * ldo + 16 * v, load(c + r * hs + 16 * v) * scale);
    }
  }
}

// A thread's bf16 work area for one pair (hs = 32 NC, Tp, Tb as above).
struct Scratch {
  bf16 *x[4], *pairs, *a, *at;
  static std::size_t elements(long long hs, long long Tp, long long Tb) {
    return static_cast<std::size_t>(4 * Tb * hs + Tb * hs + Tp * Tb * 2);
  }
  Scratch(bf16* w, long long hs, long long Tp, long long Tb) {
    for (int i = 0; i < 4; ++i) x[i] = w + i * Tb * hs;
    pairs = w + 4 * Tb * hs;
    a = pairs + Tb * hs;
    at = a + Tp * Tb;
  }
};

// One pair forward: q, k, v are T bf16 rows of stride ld; y gets T rows (stride ldy). The scores and
// the softmax stay in the thread's work area (2 Tp x Tp floats: S then P, and Pd with dropout); the
// pair's att tile keeps P rounded to bf16 (rows of Tb) for the backward pass: half the bytes written.
template <int NC>
void head_forward(const gpt_attention_args& a, long long bh, const bf16* q, const bf16* k, const bf16* v, long long ld,
                  bf16* y, long long ldy, float* work, Scratch& w) {
  constexpr int hs = 32 * NC;
  const long long T = a.T, Tp = (T + 15) / 16 * 16, Tb = (Tp + 31) / 32 * 32;
  float* s = work;
  bf16* p = reinterpret_cast<bf16*>(a.att + bh * Tp * Tp);
  copy_rows(q, ld, T, Tb, hs, w.x[0]);
  copy_rows(k, ld, T, Tb, hs, w.x[1]);
  pairs_transposed(w.x[1], hs, Tp, w.pairs);
  scores<NC>(w.x[0], w.pairs, Tp, s);
  softmax_to_bf16(a, bh, s, 1.0f / std::sqrt(static_cast<float>(hs)), p, w.a);
  copy_rows(v, ld, T, Tb, hs, w.x[2]);
  pairs_interleaved(w.x[2], hs, Tb, w.pairs);
  times<2 * NC>(a.bits != nullptr ? w.a : p, Tb, w.pairs, T, true, 1.0f, y, ldy);
}

// One pair backward: q, k, v, dq, dk, dv T rows of stride ld, dy T rows of stride lddy; P in bf16 from
// the forward pass. work: 2 Tp x Tp floats (dS, and Pd with dropout).
template <int NC>
void head_backward(const gpt_attention_args& a, long long bh, const bf16* q, const bf16* k, const bf16* v, long long ld,
                   const bf16* dy, long long lddy, bf16* dq, bf16* dk, bf16* dv, float* work, Scratch& w) {
  constexpr int hs = 32 * NC;
  const long long T = a.T, Tp = (T + 15) / 16 * 16, Tb = (Tp + 31) / 32 * 32;
  const bf16* p = reinterpret_cast<const bf16*>(a.att + bh * Tp * Tp);
  const auto load_p = [&](long long i, long long c) { return widen(p + i * Tb + 16 * c); };
  float* ds = work;
  const float sc = 1.0f / std::sqrt(static_cast<float>(hs));
  copy_rows(dy, lddy, T, Tb, hs, w.x[3]);
  copy_rows(v, ld, T, Tb, hs, w.x[2]);
  pairs_transposed(w.x[2], hs, Tp, w.pairs);
  scores<NC>(w.x[3], w.pairs, Tp, ds);  // dPd = dy v^T
  softmax_backward_to_bf16(a, bh, p, ds, w.a);
  copy_rows(k, ld, T, Tb, hs, w.x[1]);
  pairs_interleaved(w.x[1], hs, Tb, w.pairs);
  times<2 * NC>(w.a, Tb, w.pairs, T, true, sc, dq, ld);  // dq = sc dS k
  transposed_bf16([&](long long i, long long jb) { return widen(w.a + i * Tb + 16 * jb); }, Tp, Tb, w.at);
  copy_rows(q, ld, T, Tb, hs, w.x[0]);
  pairs_interleaved(w.x[0], hs, Tb, w.pairs);
  times<2 * NC>(w.at, Tb, w.pairs, T, false, sc, dk, ld);  // dk = sc dS^T q
  if (a.bits != nullptr) {  // Pd = P x the dropout factors, rounded once more
    transposed_bf16(
        [&](long long i, long long jb) {
          return i < T ? load_p(i, jb) * mask_v(a, a.bits + (bh * T + i) * T, 16 * jb, T) : v16{};
        },
        Tp, Tb, w.at);
  } else {
    transposed_bf16(load_p, Tp, Tb, w.at);
  }
  pairs_interleaved(w.x[3], hs, Tb, w.pairs);
  times<2 * NC>(w.at, Tb, w.pairs, T, false, 1.0f, dv, ld);  // dv = Pd^T dy
}

// The launch on AMX: pairs split over the threads as run() splits them.
template <int NC>
void run(const gpt_attention_args& a, bool forward, int threads) {
  const long long T = a.T, hs = 32 * NC, Tp = (T + 15) / 16 * 16, Tb = (Tp + 31) / 32 * 32, C = a.C, ld3 = 3 * C;
  const long long pairs = a.B * a.NH;
  const std::size_t floats = static_cast<std::size_t>(2 * Tp * Tp), halves = Scratch::elements(hs, Tp, Tb);
#pragma omp parallel num_threads(threads)
  {
    thread_local std::vector<float> work;
    thread_local std::vector<bf16> half_work;
    if (work.size() < floats) work.resize(floats);
    if (half_work.size() < halves) half_work.resize(halves);
    Scratch w(half_work.data(), hs, Tp, Tb);
    configure();
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const long long p0 = pairs * t / nt, p1 = pairs * (t + 1) / nt;
    for (long long p = p0; p < p1; ++p) {
      const long long b = p / a.NH, h = p % a.NH;
      const bf16* q = static_cast<const bf16*>(a.qkv) + b * T * ld3 + h * hs;
      if (forward) {
        head_forward<NC>(a, p, q, q + C, q + 2 * C, ld3, static_cast<bf16*>(a.y) + b * T * C + h * hs, C, work.data(), w);
      } else {
        bf16* dq = static_cast<bf16*>(a.dqkv) + b * T * ld3 + h * hs;
        head_backward<NC>(a, p, q, q + C, q + 2 * C, ld3, static_cast<const bf16*>(a.dy) + b * T * C + h * hs, C, dq,
                          dq + C, dq + 2 * C, work.data(), w);
      }
    }
    _tile_release();
  }
}

}  // namespace amx
#endif

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
  softmax_forward_tile(a, bh, s, pd);
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
  softmax_backward_tile(a, bh, att, ds, pd);
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

// Whether bf16 launches of head size hs run on AMX tiles (GPT_ATTENTION_AMX above).
inline bool uses_amx(long long hs) {
#if GPT_ATTENTION_AMX
  const char* env = std::getenv("ENGINE_ATTENTION_AMX");
  return (hs == 32 || hs == 64) && (env == nullptr || std::strcmp(env, "0") != 0) && amx::permitted();
#else
  (void)hs;
  return false;
#endif
}

template <int D>
int dispatch(const void* p, int num_threads, bool forward) {
  const auto& a = *static_cast<const gpt_attention_args*>(p);
  if (a.B < 0 || a.T <= 0 || a.NH <= 0 || a.C <= 0 || a.C % a.NH != 0) return 1;
  const long long hs = a.C / a.NH;
  const int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
#if GPT_ATTENTION_AMX
  if (D == ACCEL_DTYPE_BF16 && uses_amx(hs)) {
    hs == 32 ? amx::run<1>(a, forward, threads) : amx::run<2>(a, forward, threads);
    return 0;
  }
#endif
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

// *amx = 1 when the bf16 kernels of this head size run on AMX tiles (attention.h).
GPT_EXPORT int gpt_attention_cpu_amx(const void* p, int) {
  const auto& a = *static_cast<const gpt_attention_amx_args*>(p);
  if (a.NH <= 0 || a.C % a.NH != 0 || a.amx == nullptr) return 1;
  *a.amx = uses_amx(a.C / a.NH) ? 1 : 0;
  return 0;
}

GPT_CPU_KERNELS(f32, ACCEL_DTYPE_F32)
GPT_CPU_KERNELS(bf16, ACCEL_DTYPE_BF16)
GPT_CPU_KERNELS(f16, ACCEL_DTYPE_F16)
