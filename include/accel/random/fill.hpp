// accel/random/fill.hpp — host fills that reproduce cuRAND's host generator
// CURAND_RNG_PSEUDO_PHILOX4_32_10 bit for bit.
//
// fill_X(out, seed, offset) writes what curandGenerateX(gen, out, n) writes after
// curandSetPseudoRandomGeneratorSeed(gen, seed) and curandSetGeneratorOffset(gen, offset), with the
// default ordering (block layout: CurandPhiloxLayout in philox.hpp). Raw bits and uniforms are
// identical; normals are identical with the same C math library (see distributions.hpp) and accept
// any length and offset (cuRAND's host generator does too, though its docs ask for an even count).
//
// The work is split into batches of Philox groups; with OpenMP the batches run on every thread.
// Each output is a pure function of (seed, offset, index), so the result does not depend on the
// thread count or the schedule. Per batch, Philox fills structure-of-arrays scratch, then the
// transform writes the outputs: the per-block transforms of random/detail/block_fill.hpp, which the
// CUDA fill kernels (kernels/cuda/random_fill.cu) use too. On x86 the Philox loop is an
// SSE2/AVX2/AVX-512 kernel picked by the target flags at compile time (-march=native gives the
// widest); elsewhere it is a plain loop the compiler vectorises. The fills sit in an inline
// namespace named after that choice, so translation units built with different flags do not share
// (ODR-merge) each other's code.
#pragma once

#include <accel/detail/min_max.hpp>
#include <accel/random/detail/block_fill.hpp>
#include <accel/random/distributions.hpp>
#include <accel/random/philox.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

#if defined(__SSE2__) && (defined(__x86_64__) || defined(__i386__))
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#else
#include <emmintrin.h>  // all the SSE2 path needs, at 1/20 of <immintrin.h>'s compile time
#endif
#define ACCEL_DETAIL_PHILOX_SIMD 1
#endif

#if !defined(ACCEL_DETAIL_PHILOX_SIMD)
#define ACCEL_DETAIL_FILL_ISA fill_portable
#elif defined(__AVX512F__)
#define ACCEL_DETAIL_FILL_ISA fill_avx512
#elif defined(__AVX2__)
#define ACCEL_DETAIL_FILL_ISA fill_avx2
#else
#define ACCEL_DETAIL_FILL_ISA fill_sse2
#endif

namespace accel::rng {
inline namespace ACCEL_DETAIL_FILL_ISA {

namespace fill_detail {

// Groups per batch: 256 groups of 4 outputs keep a batch's blocks (4-8 KiB) in L1.
inline constexpr std::size_t fill_batch_groups = 256;
// Below this many outputs the fill stays on the calling thread: a parallel region costs more.
inline constexpr std::size_t fill_parallel_min = std::size_t{1} << 15;
// Lanes a vector kernel may write past the end of a run (the next run or the padding takes them).
inline constexpr std::size_t fill_lane_slack = 64;

// Blocks of a batch in structure-of-arrays form: word w of block k of lane l is
// words[w][k * fill_stride + l].
inline constexpr std::size_t fill_stride = fill_batch_groups + fill_lane_slack;
template <u32 K>
struct BatchBlocks {
  alignas(64) u32 words[4][K * fill_stride];
};

// Blocks for counters {c.x, c.y, c.z + i, c.w}, i < n, into w0..w3[i]: the portable loop, which
// compilers vectorise (one Philox chain per vector, so it is latency-bound).
inline void philox_run(U32x4 c, U32x2 key, std::size_t n, u32* w0, u32* w1, u32* w2, u32* w3) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    const U32x4 r = philox4x32_10({c.x, c.y, c.z + static_cast<u32>(i), c.w}, key);
    w0[i] = r.x;
    w1[i] = r.y;
    w2[i] = r.z;
    w3[i] = r.w;
  }
}

#if defined(ACCEL_DETAIL_PHILOX_SIMD)
// x86: the same blocks with SSE2/AVX2/AVX-512 intrinsics, several independent vectors interleaved
// so that the multiply latency of one hides behind the others (about 2x the compiler's loop).
// 32x32->64 products come from vpmuludq on the even lanes and on the odd lanes shifted down.
#if defined(__AVX512F__)
struct PhiloxSimd {
  using V = __m512i;
  static constexpr std::size_t width = 16, interleave = 2;
  static V set1(u32 x) noexcept { return _mm512_set1_epi32(static_cast<int>(x)); }
  static V iota() noexcept { return _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0); }
  static V add(V a, V b) noexcept { return _mm512_add_epi32(a, b); }
  static V xor3(V a, V b, V c) noexcept { return _mm512_ternarylogic_epi32(a, b, c, 0x96); }
  // The zero-masked forms (all lanes on) avoid _mm512_undefined_epi32, which g++ 12 reports as
  // maybe-uninitialized once inlined (GCC bug 105593).
  static V srl32(V a) noexcept { return _mm512_maskz_srli_epi64(0xFF, a, 32); }
  static void mul_hi_lo(V a, V m, V& hi, V& lo) noexcept {
    const V even = _mm512_maskz_mul_epu32(0xFF, a, m);
    const V odd = _mm512_maskz_mul_epu32(0xFF, srl32(a), m);
    hi = _mm512_mask_blend_epi32(0xAAAA, srl32(even), odd);
    lo = _mm512_mullo_epi32(a, m);
  }
  static void store(u32* p, V v) noexcept { _mm512_storeu_si512(p, v); }
};
#elif defined(__AVX2__)
struct PhiloxSimd {
  using V = __m256i;
  static constexpr std::size_t width = 8, interleave = 4;
  static V set1(u32 x) noexcept { return _mm256_set1_epi32(static_cast<int>(x)); }
  static V iota() noexcept { return _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0); }
  static V add(V a, V b) noexcept { return _mm256_add_epi32(a, b); }
  static V xor3(V a, V b, V c) noexcept { return _mm256_xor_si256(_mm256_xor_si256(a, b), c); }
  static void mul_hi_lo(V a, V m, V& hi, V& lo) noexcept {
    const V even = _mm256_mul_epu32(a, m);
    const V odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
    hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
    lo = _mm256_mullo_epi32(a, m);
  }
  static void store(u32* p, V v) noexcept { _mm256_storeu_si256(reinterpret_cast<V*>(p), v); }
};
#else  // SSE2, the x86-64 baseline: no 32-bit mullo or blend, so both halves come from masks.
struct PhiloxSimd {
  using V = __m128i;
  static constexpr std::size_t width = 4, interleave = 4;
  static V set1(u32 x) noexcept { return _mm_set1_epi32(static_cast<int>(x)); }
  static V iota() noexcept { return _mm_set_epi32(3, 2, 1, 0); }
  static V add(V a, V b) noexcept { return _mm_add_epi32(a, b); }
  static V xor3(V a, V b, V c) noexcept { return _mm_xor_si128(_mm_xor_si128(a, b), c); }
  static void mul_hi_lo(V a, V m, V& hi, V& lo) noexcept {
    const V even = _mm_mul_epu32(a, m);
    const V odd = _mm_mul_epu32(_mm_srli_epi64(a, 32), m);
    const V low_half = _mm_set_epi32(0, -1, 0, -1);
    hi = _mm_or_si128(_mm_srli_epi64(even, 32), _mm_andnot_si128(low_half, odd));
    lo = _mm_or_si128(_mm_and_si128(even, low_half), _mm_slli_epi64(odd, 32));
  }
  static void store(u32* p, V v) noexcept { _mm_storeu_si128(reinterpret_cast<V*>(p), v); }
};
#endif

// As philox_run, rounding n up to whole steps of width * interleave lanes (<= fill_lane_slack).
inline void philox_run_simd(U32x4 c, U32x2 key, std::size_t n, u32* w0, u32* w1, u32* w2, u32* w3) noexcept {
  using S = PhiloxSimd;
  using V = S::V;
  constexpr std::size_t W = S::width, N = S::interleave;
  const V m0 = S::set1(detail::philox_m0), m1 = S::set1(detail::philox_m1);
  for (std::size_t i = 0; i < n; i += W * N) {
    V x[N], y[N], z[N], w[N];
    for (std::size_t j = 0; j < N; ++j) {
      x[j] = S::set1(c.x);
      y[j] = S::set1(c.y);
      z[j] = S::add(S::set1(c.z + static_cast<u32>(i + j * W)), S::iota());
      w[j] = S::set1(c.w);
    }
    U32x2 k = key;
    for (int round = 0; round < 10; ++round) {
      const V kx = S::set1(k.x), ky = S::set1(k.y);
      for (std::size_t j = 0; j < N; ++j) {
        V hi0, lo0, hi1, lo1;
        S::mul_hi_lo(x[j], m0, hi0, lo0);
        S::mul_hi_lo(z[j], m1, hi1, lo1);
        x[j] = S::xor3(hi1, y[j], kx);
        y[j] = lo1;
        z[j] = S::xor3(hi0, w[j], ky);
        w[j] = lo0;
      }
      k = detail::philox_bump(k);
    }
    for (std::size_t j = 0; j < N; ++j) {
      S::store(w0 + i + j * W, x[j]);
      S::store(w1 + i + j * W, y[j]);
      S::store(w2 + i + j * W, z[j]);
      S::store(w3 + i + j * W, w[j]);
    }
  }
}
static_assert(PhiloxSimd::width * PhiloxSimd::interleave <= fill_lane_slack);
#endif

template <u32 K>
inline void compute_batch(const CurandPhiloxLayout& layout, U32x2 key, u64 g0, std::size_t lanes,
                          BatchBlocks<K>& b) noexcept {
  for (u32 k = 0; k < K; ++k) {
    const std::size_t at = k * fill_stride;
    // At most three runs per batch (a subsequence wrap, the first subsequence); inside a run
    // only counter word z changes, so lanes are plain 32-bit arithmetic.
    for (std::size_t l = 0; l < lanes;) {
      const U32x4 c = layout.counter(g0 + l, k);
      const std::size_t run = static_cast<std::size_t>(accel::detail::min_of<u64>(lanes - l, layout.run_length(g0 + l)));
      u32* const w[4] = {b.words[0] + at + l, b.words[1] + at + l, b.words[2] + at + l, b.words[3] + at + l};
#if defined(ACCEL_DETAIL_PHILOX_SIMD)
      philox_run_simd(c, key, run, w[0], w[1], w[2], w[3]);
#else
      philox_run(c, key, run, w[0], w[1], w[2], w[3]);
#endif
      l += run;
    }
  }
}

// The K blocks of lane l.
template <u32 K>
struct LaneBlocks {
  U32x4 b[K];
};
template <u32 K>
[[nodiscard]] inline LaneBlocks<K> lane(const BatchBlocks<K>& bb, std::size_t l) noexcept {
  LaneBlocks<K> r{};
  for (u32 k = 0; k < K; ++k) {
    const std::size_t i = k * fill_stride + l;
    r.b[k] = {bb.words[0][i], bb.words[1][i], bb.words[2][i], bb.words[3][i]};
  }
  return r;
}

// Fills out[0, n) with group(blocks, dst): the 4 outputs of one group, from its K blocks.
template <u32 K, class T, class Group>
inline void fill_groups(T* out, std::size_t n, u64 seed, u64 offset, Group group) {
  if (n == 0) return;
  const CurandPhiloxLayout layout(offset, K);
  const U32x2 key = philox_key(seed);
  const std::size_t skip = layout.skip();
  const u64 groups = (skip + static_cast<u64>(n) + 3) / 4;
  // Output j is word (skip + j) % 4 of group (skip + j) / 4. Groups cut by either end of `out`
  // go through a 4-element scratch; the others write straight into `out`.
  const u64 full_begin = skip == 0 ? 0 : 1;
  const u64 full_end = (skip + static_cast<u64>(n)) / 4;
  const auto partial = [&](u64 g) {
    LaneBlocks<K> blocks{};
    for (u32 k = 0; k < K; ++k) blocks.b[k] = philox4x32_10(layout.counter(g, k), key);
    T tmp[4];
    group(blocks, tmp);
    for (u64 w = 0; w < 4; ++w) {
      const u64 j = 4 * g + w;  // index + skip
      if (j >= skip && j - skip < n) out[j - skip] = tmp[w];
    }
  };
  if (full_begin > 0) partial(0);
  if (full_end < groups && full_end >= full_begin) partial(full_end);
  if (full_end <= full_begin) return;

  const u64 full = full_end - full_begin;
  const std::int64_t batches = static_cast<std::int64_t>((full + fill_batch_groups - 1) / fill_batch_groups);
  T* const base = out + 4 * full_begin - skip;  // group full_begin + i writes base[4 i .. 4 i + 3]
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (n >= fill_parallel_min)
#endif
  for (std::int64_t batch = 0; batch < batches; ++batch) {
    const u64 first = static_cast<u64>(batch) * fill_batch_groups;
    const std::size_t lanes = static_cast<std::size_t>(accel::detail::min_of<u64>(fill_batch_groups, full - first));
    BatchBlocks<K> blocks;
    compute_batch<K>(layout, key, full_begin + first, lanes, blocks);
    T* const dst = base + 4 * first;
    for (std::size_t l = 0; l < lanes; ++l) group(lane(blocks, l), dst + 4 * l);
  }
}

// Fills out[0, n) with Transform's outputs (detail/block_fill.hpp): a group is its K blocks'
// outputs in block order.
template <class Transform>
inline void fill_with(typename Transform::value_type* out, std::size_t n, u64 seed, u64 offset, Transform t) {
  constexpr u32 K = detail::blocks_per_group<Transform>;
  fill_groups<K>(out, n, seed, offset, [t](const LaneBlocks<K>& g, typename Transform::value_type* d) {
    for (u32 k = 0; k < K; ++k) t(g.b[k], d + k * Transform::per_block);
  });
}

}  // namespace fill_detail

/// Raw 32-bit words, as curandGenerate().
inline void fill_bits(std::span<std::uint32_t> out, std::uint64_t seed, std::uint64_t offset) {
  fill_detail::fill_with(out.data(), out.size(), seed, offset, detail::BitsTransform{});
}

/// Floats in (0, 1], as curandGenerateUniform().
inline void fill_uniform(std::span<float> out, std::uint64_t seed, std::uint64_t offset) {
  fill_detail::fill_with(out.data(), out.size(), seed, offset, detail::UniformFloatTransform{});
}

/// Doubles in (0, 1] with 53 random bits, as curandGenerateUniformDouble(): two words each.
inline void fill_uniform(std::span<double> out, std::uint64_t seed, std::uint64_t offset) {
  fill_detail::fill_with(out.data(), out.size(), seed, offset, detail::UniformDoubleTransform{});
}

/// Normal floats, as curandGenerateNormal(): Box–Muller pairs from words (0, 1) and (2, 3) of a
/// block, sin value first. Any length and offset; an odd offset starts on the cos half of a pair.
inline void fill_normal(std::span<float> out, std::uint64_t seed, std::uint64_t offset, float mean = 0.0f,
                        float stddev = 1.0f) {
  fill_detail::fill_with(out.data(), out.size(), seed, offset, detail::NormalFloatTransform{mean, stddev});
}

/// Normal doubles, as curandGenerateNormalDouble(): one Box–Muller pair per block (all 4 words).
inline void fill_normal(std::span<double> out, std::uint64_t seed, std::uint64_t offset, double mean = 0.0,
                        double stddev = 1.0) {
  fill_detail::fill_with(out.data(), out.size(), seed, offset, detail::NormalDoubleTransform{mean, stddev});
}

}  // namespace ACCEL_DETAIL_FILL_ISA
}  // namespace accel::rng
