// accel/blas/detail/cpu_half.hpp — half (IEEE binary16) GEMM on CpuBackend, and bfloat16 GEMM on CPUs
// where oneDNN has no bf16 matmul: the operands widened to float, oneDNN's sgemm, C narrowed back
// (rounded once, to nearest even).
//
// No CPU BLAS from Debian multiplies binary16 (oneDNN 2.6 has no f16 matmul on CPUs without
// AVX512-FP16, OpenBLAS 0.3.21 no shgemm), and x86 CPUs other than Sapphire Rapids have no half
// arithmetic anyway: F16C only converts. So the product is the float product of the exactly widened
// operands, accumulated in float like cuBLAS's half GEMM with float compute, and rounded once. The
// conversions use F16C (VCVTPH2PS / VCVTPS2PH, 8 elements per instruction) where the CPU has it,
// chosen at run time (the library is built without -mf16c), else accel::half's exact scalar
// conversion; both give the same bits. Each matrix is copied into a packed float scratch of the
// thread that runs the task (kept between calls), its rows shared out among the product's BLAS
// threads (openmp.hpp's for_row_shares), so the conversion costs one pass over A, B and C on every
// core the product runs on, against the k-fold reuse of the product. bfloat16 takes the same path
// where oneDNN's bf16 matmul needs AVX-512 the CPU lacks (an AVX2-only Zen 3), and for single products
// on an Intel CPU without AMX (cpu_bfloat_choice.hpp): widening a bfloat16 is a shift, narrowing the
// rounding accel::bfloat16 does, 16 or 8 at a time.
//
// A long single product (more than two pieces' rows of C: a GPT's activations, batch x block rows) runs
// as sgemms of widened_rows_per_call rows per BLAS thread each: B widened once, then per piece its rows
// of A (columns, when A is transposed) widened, the sgemm, its rows of C narrowed. Whole widened copies
// of such operands go to memory and back — the conversions ran at ~1.1 G elements/s on one core of a
// Xeon VM (family 6 model 207), a fifth of a 16384 x 384 x 1536 product's time — where a piece's copy
// is still in cache when the sgemm reads it. Measured there (benchmarks/RESULTS.md, 2026-12-03) at the
// shakespeare GPT's products, one thread (the engine's case: a stream per thread): from 0.84-0.90 of
// sgemm's speed to 0.90-1.04, and oneDNN's sgemm of a transposed A with k = 16384 ran faster in pieces
// (1.2-1.4x the whole-copy product). On two threads, pieces of 512 rows lost at 16384 x 1152 x 384
// (0.71-0.73 of sgemm against 0.74-0.76 whole); pieces of 1024 were within the VM's noise (0.67-0.92).
// Each element of C is the same sum of the same products either way (the pieces split rows of C, not
// k), so the bits do not change. On two BLAS threads, conversions on the task's thread alone had left
// the other core idle while they ran: shared, the shakespeare GPT's products ran 1.06-1.18x faster
// there (widened / sgemm 0.78-0.84 -> 0.84-0.98), with the same bits.
#pragma once

#include <accel/blas/detail/arguments.hpp>
#include <accel/blas/detail/openmp.hpp>
#include <accel/core/bfloat16.hpp>
#include <accel/core/cpu_features.hpp>
#include <accel/core/half.hpp>
#include <accel/detail/small_float_vectors.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

// (Not under nvcc: its front end need not take GCC's target attribute; the scalar path gives the same bits.)
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#include <immintrin.h>
#define ACCEL_DETAIL_BLAS_F16C 1
#else
#define ACCEL_DETAIL_BLAS_F16C 0
#endif

namespace accel::blas::detail {

// The vector loops run to n - n % width, not while i + width <= n: g++ 12 at -O3 read the latter as a
// loop that may overflow i (a false -Waggressive-loop-optimizations, an error under -Werror).
#if ACCEL_DETAIL_BLAS_F16C
[[gnu::target("avx,f16c")]] inline void widen_f16c(float* dst, const half* src, std::int64_t n) noexcept {
  std::int64_t i = 0;
  for (const std::int64_t whole = n - n % 8; i < whole; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i].bits());
}
[[gnu::target("avx,f16c")]] inline void narrow_f16c(half* dst, const float* src, std::int64_t n) noexcept {
  std::int64_t i = 0;
  for (const std::int64_t whole = n - n % 8; i < whole; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
  // The tail through the 4-wide conversion: clang's _cvtss_sh is a macro with a compound literal, which
  // -Wc99-extensions rejects in C++ under -Werror.
  for (; i < n; ++i) {
    const __m128i h = _mm_cvtps_ph(_mm_set_ss(src[i]), _MM_FROUND_TO_NEAREST_INT);
    dst[i] = half::from_bits(static_cast<std::uint16_t>(_mm_cvtsi128_si32(h) & 0xFFFF));
  }
}
#endif

/// dst[i] = float(src[i]), exact.
inline void widen(float* dst, const half* src, std::int64_t n) noexcept {
#if ACCEL_DETAIL_BLAS_F16C
  if (cpu_features().f16c) {
    widen_f16c(dst, src, n);
    return;
  }
#endif
  for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

/// dst[i] = half(src[i]), rounded to nearest even (overflow: inf).
inline void narrow(half* dst, const float* src, std::int64_t n) noexcept {
#if ACCEL_DETAIL_BLAS_F16C
  if (cpu_features().f16c) {
    narrow_f16c(dst, src, n);
    return;
  }
#endif
  for (std::int64_t i = 0; i < n; ++i) dst[i] = half(src[i]);
}

#if ACCEL_DETAIL_BLAS_F16C
// g++ 12's AVX-512 intrinsics start from an undefined vector, which -Wall reports as maybe uninitialised.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// bfloat16 <-> float 16 (AVX-512) or 8 (AVX2) at a time, chosen at run time: the conversions of a widened
// product are a pass over A, B and C each, which four-at-a-time code made a third of a tiny GEMM's time.
[[gnu::target("avx512f")]] inline void widen_bf16_avx512(float* dst, const bfloat16* src, std::int64_t n) noexcept {
  std::int64_t i = 0;
  for (const std::int64_t whole = n - n % 16; i < whole; i += 16) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    _mm512_storeu_si512(dst + i, _mm512_slli_epi32(w, 16));
  }
  for (; i < n; ++i) dst[i] = std::bit_cast<float>(std::uint32_t{src[i].bits()} << 16);
}
[[gnu::target("avx2")]] inline void widen_bf16_avx2(float* dst, const bfloat16* src, std::int64_t n) noexcept {
  std::int64_t i = 0;
  for (const std::int64_t whole = n - n % 8; i < whole; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_slli_epi32(w, 16));
  }
  for (; i < n; ++i) dst[i] = std::bit_cast<float>(std::uint32_t{src[i].bits()} << 16);
}
// As accel::bfloat16(float): round to nearest even (add 0x7FFF plus the lowest kept bit), a NaN kept
// quiet with its sign and top payload (the bits shifted down, 0x40 set).
[[gnu::target("avx512f")]] inline void narrow_bf16_avx512(bfloat16* dst, const float* src, std::int64_t n) noexcept {
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF), infinity = _mm512_set1_epi32(0x7F800000);
  const __m512i bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
  std::int64_t i = 0;
  for (const std::int64_t whole = n - n % 16; i < whole; i += 16) {
    const __m512i r = _mm512_loadu_si512(src + i);
    const __m512i top = _mm512_srli_epi32(r, 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(r, magnitude), infinity);
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(r, bias), _mm512_and_si512(top, one)), 16);
    const __m512i out = _mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(top, quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(out));
  }
  accel::detail::small_float::narrow_bf16s(reinterpret_cast<std::uint16_t*>(dst + i), src + i, n - i);
}
[[gnu::target("avx2")]] inline void narrow_bf16_avx2(bfloat16* dst, const float* src, std::int64_t n) noexcept {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF), infinity = _mm256_set1_epi32(0x7F800000);
  const __m256i bias = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x40);
  std::int64_t i = 0;
  for (const std::int64_t whole = n - n % 8; i < whole; i += 8) {
    const __m256i r = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i top = _mm256_srli_epi32(r, 16);
    // |r| < 2^31, so the signed comparison is the unsigned one
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(r, magnitude), infinity);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(r, bias), _mm256_and_si256(top, one)), 16);
    const __m256i out = _mm256_blendv_epi8(rounded, _mm256_or_si256(top, quiet), nan);
    // every lane is below 2^16: packus keeps it; packing works per 128-bit half, the permute restores the order
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(out, out), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(packed));
  }
  accel::detail::small_float::narrow_bf16s(reinterpret_cast<std::uint16_t*>(dst + i), src + i, n - i);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

/// dst[i] = float(src[i]), exact: the bits shifted into a float's upper half.
inline void widen(float* dst, const bfloat16* src, std::int64_t n) noexcept {
#if ACCEL_DETAIL_BLAS_F16C
  if (cpu_features().avx512f) return widen_bf16_avx512(dst, src, n);
  if (cpu_features().avx2) return widen_bf16_avx2(dst, src, n);
#endif
  for (std::int64_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(std::uint32_t{src[i].bits()} << 16);
}

/// dst[i] = bfloat16(src[i]), rounded to nearest even: the same bits as accel::bfloat16's conversion
/// (the rounding MPI's bfloat16 sums use too).
inline void narrow(bfloat16* dst, const float* src, std::int64_t n) noexcept {
#if ACCEL_DETAIL_BLAS_F16C
  if (cpu_features().avx512f) return narrow_bf16_avx512(dst, src, n);
  if (cpu_features().avx2) return narrow_bf16_avx2(dst, src, n);
#endif
  accel::detail::small_float::narrow_bf16s(reinterpret_cast<std::uint16_t*>(dst), src, n);
}

/// The packed float copy of a batch's matrices of rows x cols (row stride ld, matrix stride `stride`; 0:
/// one matrix shared by the batch, copied once) at `out`, rows x cols each; the rows shared out among
/// `threads` threads (openmp.hpp).
template <class H>
void widen_matrices(float* out, const H* src, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                    std::int64_t stride, std::int64_t batch, int threads = 1) noexcept {
  const std::int64_t count = stride == 0 ? 1 : batch;
  if (rows <= 0) return;
  for_row_shares(threads, count * rows, cols, [&](std::int64_t first, std::int64_t last) noexcept {
    for (std::int64_t q = first; q < last; ++q) {
      const std::int64_t i = q / rows, r = q % rows;
      widen(out + q * cols, src + i * stride + r * ld, cols);
    }
  });
}

/// The packed float matrices of rows x cols at `src` rounded into the batch's matrices at `out` (row
/// stride ld, matrix stride `stride`), the rows shared out among `threads` threads.
template <class H>
void narrow_matrices(H* out, const float* src, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                     std::int64_t stride, std::int64_t batch, int threads = 1) noexcept {
  if (rows <= 0) return;
  for_row_shares(threads, batch * rows, cols, [&](std::int64_t first, std::int64_t last) noexcept {
    for (std::int64_t q = first; q < last; ++q) {
      const std::int64_t i = q / rows, r = q % rows;
      narrow(out + i * stride + r * ld, src + q * cols, cols);
    }
  });
}

/// Rows of C per sgemm in a long single widened product (see the top): from 256 to 1024 rows measured
/// alike at the shakespeare GPT's products, 64 and 128 slower (sgemm's start-up per call).
inline constexpr std::int64_t widened_rows_per_call = 512;

/// The float product with g's transposes, sizes, scalars and batch; its pointers and strides still to set.
template <class H>
[[nodiscard]] GemmArgs<float> widened_shape(const GemmArgs<H>& g) noexcept {
  GemmArgs<float> f;
  f.ta = g.ta;
  f.tb = g.tb;
  f.m = g.m;
  f.n = g.n;
  f.k = g.k;
  f.alpha = g.alpha;
  f.beta = g.beta;
  f.batch = g.batch;
  return f;
}

/// cpu_widened_gemm's long single product (batch 1, k > 0), in pieces of `rows_per_call` rows of C.
template <class H, class Sgemm>
void widened_gemm_by_rows(const GemmArgs<H>& g, Sgemm&& sgemm, std::int64_t rows_per_call, int threads) {
  thread_local std::vector<float> sa, sb, sc;
  const std::int64_t br = g.tb == Trans::no ? g.k : g.n, bc = g.tb == Trans::no ? g.n : g.k;
  sb.resize(static_cast<std::size_t>(br * bc));
  widen_matrices(sb.data(), g.b, br, bc, g.ldb, 0, 1, threads);
  GemmArgs<float> f = widened_shape(g);
  f.b = sb.data();
  f.ldb = bc;
  f.ldc = g.n;
  for (std::int64_t r0 = 0; r0 < g.m; r0 += rows_per_call) {
    const std::int64_t rows = std::min(rows_per_call, g.m - r0);
    f.m = rows;
    sa.resize(static_cast<std::size_t>(rows * g.k));
    if (g.ta == Trans::no) {  // rows r0.. of A (m x k)
      widen_matrices(sa.data(), g.a + r0 * g.lda, rows, g.k, g.lda, 0, 1, threads);
      f.lda = g.k;
    } else {  // columns r0.. of A (stored k x m)
      widen_matrices(sa.data(), g.a + r0, g.k, rows, g.lda, 0, 1, threads);
      f.lda = rows;
    }
    f.a = sa.data();
    sc.resize(static_cast<std::size_t>(rows * g.n));
    H* const c = g.c + r0 * g.ldc;
    if (g.beta != 0.0f) widen_matrices(sc.data(), c, rows, g.n, g.ldc, 0, 1, threads);
    f.c = sc.data();
    sgemm(f);
    narrow_matrices(c, sc.data(), rows, g.n, g.ldc, 0, 1, threads);
  }
}

/// The half (or bfloat16) product as a float one (runs in the task, on the stream's thread); `sgemm`
/// runs the float arguments (cpu_sgemm) on `threads` BLAS threads.
template <class H, class Sgemm>
void cpu_widened_gemm(const GemmArgs<H>& g, Sgemm&& sgemm, int threads = 1) {
  const std::int64_t rows_per_call = widened_rows_per_call * std::max(threads, 1);
  if (g.batch == 1 && g.k > 0 && g.m > 2 * rows_per_call) return widened_gemm_by_rows(g, sgemm, rows_per_call, threads);
  thread_local std::vector<float> sa, sb, sc;
  const std::int64_t ar = g.ta == Trans::no ? g.m : g.k, ac = g.ta == Trans::no ? g.k : g.m;
  const std::int64_t br = g.tb == Trans::no ? g.k : g.n, bc = g.tb == Trans::no ? g.n : g.k;
  const auto count = [&](std::int64_t stride) { return stride == 0 ? std::int64_t{1} : g.batch; };
  GemmArgs<float> f = widened_shape(g);
  if (g.k > 0) {
    sa.resize(static_cast<std::size_t>(ar * ac * count(g.stride_a)));
    sb.resize(static_cast<std::size_t>(br * bc * count(g.stride_b)));
    widen_matrices(sa.data(), g.a, ar, ac, g.lda, g.stride_a, g.batch, threads);
    widen_matrices(sb.data(), g.b, br, bc, g.ldb, g.stride_b, g.batch, threads);
    f.a = sa.data();
    f.lda = ac;
    f.stride_a = g.stride_a == 0 ? 0 : ar * ac;
    f.b = sb.data();
    f.ldb = bc;
    f.stride_b = g.stride_b == 0 ? 0 : br * bc;
  }
  // C: every matrix of the batch, each to its own place (check_sizes refuses C matrices that share an
  // element, stride_c = 0 included).
  sc.resize(static_cast<std::size_t>(g.m * g.n * g.batch));
  if (g.beta != 0.0f) widen_matrices(sc.data(), g.c, g.m, g.n, g.ldc, g.stride_c, g.batch, threads);
  f.c = sc.data();
  f.ldc = g.n;
  f.stride_c = g.m * g.n;
  sgemm(f);
  narrow_matrices(g.c, sc.data(), g.m, g.n, g.ldc, g.stride_c, g.batch, threads);
}

}  // namespace accel::blas::detail
