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
// CUDA fill kernels (kernels/cuda/random_fill.cu) use too (raw bits and uniform floats skip the
// scratch: the kernels write them straight into the output). On x86-64 the Philox loop is an
// SSE2/AVX2/AVX-512 kernel chosen at run time (the widest the CPU runs; philox_kernel() says which);
// elsewhere it is a plain loop the compiler vectorises. The transforms are compiled for the target
// flags, so the fills sit in an inline namespace named after them: translation units built with
// different flags do not share (ODR-merge) each other's code.
#pragma once

#include <accel/detail/min_max.hpp>
#include <accel/random/detail/block_fill.hpp>
#include <accel/random/distributions.hpp>
#include <accel/random/philox.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

// x86-64 with GCC or Clang (not nvcc's front end, which need not take the target attribute): Philox
// kernels for SSE2, AVX2 and AVX-512, each compiled under its own target attribute and picked at run
// time from cpu_features(), so a program built for the x86-64 baseline runs the widest one its CPU has.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && \
    defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)  // g++ 12 and later, clang
#include <accel/core/cpu_features.hpp>
#define ACCEL_DETAIL_PHILOX_SIMD 1
#endif
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

// The blocks for counters {c.x, c.y, c.z + i, c.w}, i < n, go to `out` in one of two layouts:
// soa_stride == 0: block by block, block i in out[4 i, 4 i + 4) (a bits fill's own buffer);
// otherwise word w of block i at out[w * soa_stride + i] (a batch's scratch, which a transform reads
// lane by lane: its loop then transposes while waiting on its stores).
// uniform: each word stored as the bits of its uniform float (uniform_float), so that a uniform fill
// writes its output directly; `out` may then be that float buffer, so every kernel stores with memcpy.
// The portable loop, which compilers vectorise (one Philox chain per vector, so it is latency-bound):
inline void philox_run(U32x4 c, U32x2 key, std::size_t n, u32* out, std::size_t soa_stride, bool uniform) noexcept {
  const std::size_t step = soa_stride == 0 ? 4 : 1, word = soa_stride == 0 ? 1 : soa_stride;
  const auto put = [uniform](u32* at, u32 w) {
    const u32 v = uniform ? std::bit_cast<u32>(uniform_float(w)) : w;
    std::memcpy(at, &v, sizeof v);
  };
  for (std::size_t i = 0; i < n; ++i) {
    const U32x4 r = philox4x32_10({c.x, c.y, c.z + static_cast<u32>(i), c.w}, key);
    put(out + step * i, r.x);
    put(out + step * i + word, r.y);
    put(out + step * i + 2 * word, r.z);
    put(out + step * i + 3 * word, r.w);
  }
}

/// The Philox block kernels of the host fills, narrowest first.
enum class PhiloxKernel : unsigned char { portable, sse2, avx2, avx512 };

[[nodiscard]] inline const char* philox_kernel_name(PhiloxKernel k) noexcept {
  switch (k) {
    case PhiloxKernel::sse2: return "SSE2";
    case PhiloxKernel::avx2: return "AVX2";
    case PhiloxKernel::avx512: return "AVX-512";
    case PhiloxKernel::portable: break;
  }
  return "portable loop";
}

#if defined(ACCEL_DETAIL_PHILOX_SIMD)
// The same blocks, several independent vectors interleaved so that the multiply latency of one hides
// behind the others (about 2x the compiler's loop), each block's four words then transposed from the
// x, y, z, w vectors into place. Written with the compilers' vector extensions and the one builtin they
// have no generic spelling for in g++ (vpmuludq: the 32x32->64 products of the even lanes; the odd
// lanes' come from the words shifted down): <immintrin.h> would cost every translation unit that
// includes this header 0.6 s. A template cannot carry a target attribute, so the body is a macro,
// stamped out once per instruction set.
namespace philox_vec {
using i32x4 = int __attribute__((vector_size(16)));
using i32x8 = int __attribute__((vector_size(32)));
using i32x16 = int __attribute__((vector_size(64)));
using i64x2 = long long __attribute__((vector_size(16)));
using i64x4 = long long __attribute__((vector_size(32)));
using i64x8 = long long __attribute__((vector_size(64)));
using u32x4 = u32 __attribute__((vector_size(16)));
using u32x8 = u32 __attribute__((vector_size(32)));
using u32x16 = u32 __attribute__((vector_size(64)));
using u64x2 = u64 __attribute__((vector_size(16)));
using u64x4 = u64 __attribute__((vector_size(32)));
using u64x8 = u64 __attribute__((vector_size(64)));
using f32x4 = float __attribute__((vector_size(16)));
using f32x8 = float __attribute__((vector_size(32)));
using f32x16 = float __attribute__((vector_size(64)));

[[gnu::target("sse2"), gnu::always_inline]] inline u64x2 mul_even(u32x4 a, u32x4 b) noexcept {
  return reinterpret_cast<u64x2>(__builtin_ia32_pmuludq128(reinterpret_cast<i32x4>(a), reinterpret_cast<i32x4>(b)));
}
[[gnu::target("avx2"), gnu::always_inline]] inline u64x4 mul_even(u32x8 a, u32x8 b) noexcept {
  return reinterpret_cast<u64x4>(__builtin_ia32_pmuludq256(reinterpret_cast<i32x8>(a), reinterpret_cast<i32x8>(b)));
}
[[gnu::target("avx512f"), gnu::always_inline]] inline u64x8 mul_even(u32x16 a, u32x16 b) noexcept {
#if defined(__clang__)
  return reinterpret_cast<u64x8>(__builtin_ia32_pmuludq512(reinterpret_cast<i32x16>(a), reinterpret_cast<i32x16>(b)));
#else
  return reinterpret_cast<u64x8>(
      __builtin_ia32_pmuludq512_mask(reinterpret_cast<i32x16>(a), reinterpret_cast<i32x16>(b), i64x8{}, 0xFF));
#endif
}

// out[4 l + 0..3] = x[l], y[l], z[l], w[l]: pairs (x y, z w) interleaved, then the pairs.
[[gnu::target("sse2"), gnu::always_inline]] inline void store_blocks(u32* out, u32x4 x, u32x4 y, u32x4 z, u32x4 w) noexcept {
  const u32x4 xy_lo = __builtin_shufflevector(x, y, 0, 4, 1, 5), xy_hi = __builtin_shufflevector(x, y, 2, 6, 3, 7);
  const u32x4 zw_lo = __builtin_shufflevector(z, w, 0, 4, 1, 5), zw_hi = __builtin_shufflevector(z, w, 2, 6, 3, 7);
  const u32x4 o[4] = {__builtin_shufflevector(xy_lo, zw_lo, 0, 1, 4, 5), __builtin_shufflevector(xy_lo, zw_lo, 2, 3, 6, 7),
                      __builtin_shufflevector(xy_hi, zw_hi, 0, 1, 4, 5), __builtin_shufflevector(xy_hi, zw_hi, 2, 3, 6, 7)};
  __builtin_memcpy(out, o, sizeof o);
}
[[gnu::target("avx2"), gnu::always_inline]] inline void store_blocks(u32* out, u32x8 x, u32x8 y, u32x8 z, u32x8 w) noexcept {
  const u32x8 xy_lo = __builtin_shufflevector(x, y, 0, 8, 1, 9, 2, 10, 3, 11);
  const u32x8 xy_hi = __builtin_shufflevector(x, y, 4, 12, 5, 13, 6, 14, 7, 15);
  const u32x8 zw_lo = __builtin_shufflevector(z, w, 0, 8, 1, 9, 2, 10, 3, 11);
  const u32x8 zw_hi = __builtin_shufflevector(z, w, 4, 12, 5, 13, 6, 14, 7, 15);
  const u32x8 o[4] = {__builtin_shufflevector(xy_lo, zw_lo, 0, 1, 8, 9, 2, 3, 10, 11),
                      __builtin_shufflevector(xy_lo, zw_lo, 4, 5, 12, 13, 6, 7, 14, 15),
                      __builtin_shufflevector(xy_hi, zw_hi, 0, 1, 8, 9, 2, 3, 10, 11),
                      __builtin_shufflevector(xy_hi, zw_hi, 4, 5, 12, 13, 6, 7, 14, 15)};
  __builtin_memcpy(out, o, sizeof o);
}
[[gnu::target("avx512f"), gnu::always_inline]] inline void store_blocks(u32* out, u32x16 x, u32x16 y, u32x16 z,
                                                                       u32x16 w) noexcept {
  const u32x16 xy_lo = __builtin_shufflevector(x, y, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const u32x16 xy_hi = __builtin_shufflevector(x, y, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const u32x16 zw_lo = __builtin_shufflevector(z, w, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const u32x16 zw_hi = __builtin_shufflevector(z, w, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const u32x16 o[4] = {
      __builtin_shufflevector(xy_lo, zw_lo, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23),
      __builtin_shufflevector(xy_lo, zw_lo, 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31),
      __builtin_shufflevector(xy_hi, zw_hi, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23),
      __builtin_shufflevector(xy_hi, zw_hi, 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31)};
  __builtin_memcpy(out, o, sizeof o);
}
}  // namespace philox_vec

// NAME(c, key, n, out, soa_stride, uniform): as philox_run, with n rounded up to whole steps of
// WIDTH * INTERLEAVE lanes (<= fill_lane_slack). V: WIDTH u32 lanes; D: the same register as u64 lanes;
// F: as floats. The uniform floats are uniform_float's arithmetic on vectors: the conversion rounds
// once (vcvtudq2ps, or its exact emulation below AVX-512), the scaling by 2^-32 is exact, so a
// contracted multiply-add gives the same bits.
#define ACCEL_DETAIL_PHILOX_KERNEL(NAME, TARGET, V, D, F, WIDTH, INTERLEAVE)                                   \
  [[gnu::target(TARGET)]] inline void NAME(U32x4 c, U32x2 key, std::size_t n, u32* out, std::size_t soa_stride, \
                                           bool uniform) noexcept {                                             \
    using namespace philox_vec;                                                                                 \
    constexpr std::size_t W = WIDTH, N = INTERLEAVE;                                                            \
    static_assert(fill_lane_slack % (W * N) == 0); /* blocks_into's whole steps */                            \
    const D low = D{} + 0xFFFFFFFFull;                                                                          \
    const V m0 = V{} + detail::philox_m0, m1 = V{} + detail::philox_m1;                                         \
    V iota{};                                                                                                   \
    for (std::size_t l = 0; l < W; ++l) iota[l] = static_cast<u32>(l);                                          \
    for (std::size_t i = 0; i < n; i += W * N) {                                                                \
      V x[N], y[N], z[N], w[N];                                                                                 \
      for (std::size_t j = 0; j < N; ++j) {                                                                     \
        x[j] = V{} + c.x;                                                                                       \
        y[j] = V{} + c.y;                                                                                       \
        z[j] = (V{} + (c.z + static_cast<u32>(i + j * W))) + iota;                                              \
        w[j] = V{} + c.w;                                                                                       \
      }                                                                                                         \
      U32x2 k = key;                                                                                            \
      for (int round = 0; round < 10; ++round) {                                                                \
        const V kx = V{} + k.x, ky = V{} + k.y;                                                                 \
        for (std::size_t j = 0; j < N; ++j) {                                                                   \
          const D x_even = mul_even(x[j], m0), x_odd = mul_even(reinterpret_cast<V>(reinterpret_cast<D>(x[j]) >> 32), m0); \
          const D z_even = mul_even(z[j], m1), z_odd = mul_even(reinterpret_cast<V>(reinterpret_cast<D>(z[j]) >> 32), m1); \
          x[j] = reinterpret_cast<V>((z_even >> 32) | (z_odd & ~low)) ^ y[j] ^ kx;                              \
          y[j] = reinterpret_cast<V>((z_even & low) | (z_odd << 32));                                           \
          z[j] = reinterpret_cast<V>((x_even >> 32) | (x_odd & ~low)) ^ w[j] ^ ky;                              \
          w[j] = reinterpret_cast<V>((x_even & low) | (x_odd << 32));                                           \
        }                                                                                                       \
        k = detail::philox_bump(k);                                                                             \
      }                                                                                                         \
      if (uniform) {                                                                                            \
        for (std::size_t j = 0; j < N; ++j) {                                                                   \
          x[j] = reinterpret_cast<V>(__builtin_convertvector(x[j], F) * detail::two_pow32_inv +                  \
                                     detail::two_pow32_inv / 2.0f);                                             \
          y[j] = reinterpret_cast<V>(__builtin_convertvector(y[j], F) * detail::two_pow32_inv +                  \
                                     detail::two_pow32_inv / 2.0f);                                             \
          z[j] = reinterpret_cast<V>(__builtin_convertvector(z[j], F) * detail::two_pow32_inv +                  \
                                     detail::two_pow32_inv / 2.0f);                                             \
          w[j] = reinterpret_cast<V>(__builtin_convertvector(w[j], F) * detail::two_pow32_inv +                  \
                                     detail::two_pow32_inv / 2.0f);                                             \
        }                                                                                                       \
      }                                                                                                         \
      for (std::size_t j = 0; j < N; ++j) {                                                                     \
        if (soa_stride == 0) {                                                                                  \
          store_blocks(out + 4 * (i + j * W), x[j], y[j], z[j], w[j]);                                          \
        } else {                                                                                                \
          __builtin_memcpy(out + i + j * W, &x[j], sizeof(V));                                                  \
          __builtin_memcpy(out + soa_stride + i + j * W, &y[j], sizeof(V));                                     \
          __builtin_memcpy(out + 2 * soa_stride + i + j * W, &z[j], sizeof(V));                                 \
          __builtin_memcpy(out + 3 * soa_stride + i + j * W, &w[j], sizeof(V));                                 \
        }                                                                                                       \
      }                                                                                                         \
    }                                                                                                           \
  }
ACCEL_DETAIL_PHILOX_KERNEL(philox_run_sse2, "sse2", u32x4, u64x2, f32x4, 4, 4)
ACCEL_DETAIL_PHILOX_KERNEL(philox_run_avx2, "avx2", u32x8, u64x4, f32x8, 8, 4)
ACCEL_DETAIL_PHILOX_KERNEL(philox_run_avx512, "avx512f", u32x16, u64x8, f32x16, 16, 2)
#undef ACCEL_DETAIL_PHILOX_KERNEL
#endif

/// Whether kernel k runs on this CPU.
[[nodiscard]] inline bool philox_kernel_runs(PhiloxKernel k) noexcept {
  switch (k) {
    case PhiloxKernel::portable: return true;
#if defined(ACCEL_DETAIL_PHILOX_SIMD)
    case PhiloxKernel::sse2: return true;  // the x86-64 baseline
    case PhiloxKernel::avx2: return cpu_features().avx2;
    case PhiloxKernel::avx512: return cpu_features().avx512f;
#else
    default: return false;
#endif
  }
  return false;
}

/// The kernel the fills use: the widest this CPU runs (detected once).
[[nodiscard]] inline PhiloxKernel philox_kernel() noexcept {
  static const PhiloxKernel best = [] {
    for (const PhiloxKernel k : {PhiloxKernel::avx512, PhiloxKernel::avx2, PhiloxKernel::sse2}) {
      if (philox_kernel_runs(k)) return k;
    }
    return PhiloxKernel::portable;
  }();
  return best;
}

/// As philox_run, through kernel k (which must run here: philox_kernel_runs); the vector kernels round
/// n up to whole vector steps (at most fill_lane_slack more blocks).
inline void philox_run_with(PhiloxKernel k, U32x4 c, U32x2 key, std::size_t n, u32* out, std::size_t soa_stride,
                            bool uniform) noexcept {
  switch (k) {
#if defined(ACCEL_DETAIL_PHILOX_SIMD)
    case PhiloxKernel::sse2: return philox_run_sse2(c, key, n, out, soa_stride, uniform);
    case PhiloxKernel::avx2: return philox_run_avx2(c, key, n, out, soa_stride, uniform);
    case PhiloxKernel::avx512: return philox_run_avx512(c, key, n, out, soa_stride, uniform);
#endif
    default: return philox_run(c, key, n, out, soa_stride, uniform);
  }
}

/// As philox_run, through philox_kernel().
inline void philox_run_best(U32x4 c, U32x2 key, std::size_t n, u32* out, std::size_t soa_stride,
                            bool uniform) noexcept {
  philox_run_with(philox_kernel(), c, key, n, out, soa_stride, uniform);
}

template <u32 K>
inline void compute_batch(const CurandPhiloxLayout& layout, U32x2 key, u64 g0, std::size_t lanes,
                          BatchBlocks<K>& b) noexcept {
  for (u32 k = 0; k < K; ++k) {
    // At most three runs per batch (a subsequence wrap, the first subsequence); inside a run
    // only counter word z changes, so lanes are plain 32-bit arithmetic.
    for (std::size_t l = 0; l < lanes;) {
      const U32x4 c = layout.counter(g0 + l, k);
      const std::size_t run = static_cast<std::size_t>(accel::detail::min_of<u64>(lanes - l, layout.run_length(g0 + l)));
      philox_run_best(c, key, run, b.words[0] + k * fill_stride + l, sizeof(b.words[0]) / sizeof(u32), false);
      l += run;
    }
  }
}

// Blocks of groups [g0, g0 + lanes) (one block per group; uniform: as uniform floats' bits) straight into
// out[0, 4 lanes), writing
// nothing past it: `out` is the fill's own buffer, and the next batch (another thread's) follows it.
// Each run's whole steps of fill_lane_slack blocks go straight in (no kernel rounds them up); its
// tail through a scratch. Stores and the blocks' arithmetic then overlap, where a batch computed in
// scratch and copied out stalls on the stores after the arithmetic.
inline void blocks_into(const CurandPhiloxLayout& layout, U32x2 key, u64 g0, std::size_t lanes, u32* out,
                        bool uniform) noexcept {
  for (std::size_t l = 0; l < lanes;) {
    const U32x4 c = layout.counter(g0 + l, 0);
    const std::size_t run = static_cast<std::size_t>(accel::detail::min_of<u64>(lanes - l, layout.run_length(g0 + l)));
    const std::size_t whole = run / fill_lane_slack * fill_lane_slack;
    if (whole > 0) philox_run_best(c, key, whole, out + 4 * l, 0, uniform);
    if (whole < run) {
      alignas(64) u32 tail[4 * fill_lane_slack];
      philox_run_best({c.x, c.y, c.z + static_cast<u32>(whole), c.w}, key, run - whole, tail, 0, uniform);
      std::memcpy(out + 4 * (l + whole), tail, 4 * (run - whole) * sizeof(u32));
    }
    l += run;
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

// How a fill's full groups are written: through the batch scratch and the transform (through_scratch),
// or by the kernels straight into the output, as words (bits) or as uniform floats (uniform_floats).
enum class Direct : unsigned char { through_scratch, bits, uniform_floats };

// Fills out[0, n) with group(blocks, dst): the 4 outputs of one group, from its K blocks (the groups
// cut by either end of `out` always go through group).
template <u32 K, Direct D, class T, class Group>
inline void fill_groups(T* out, std::size_t n, u64 seed, u64 offset, Group group) {
  static_assert(D == Direct::through_scratch || (K == 1 && sizeof(T) == sizeof(u32)));
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
    T* const dst = base + 4 * first;
    if constexpr (D != Direct::through_scratch) {
      // Straight into dst: at one thread 1.4x the scratch and copy for bits, 1.4x for uniforms.
      blocks_into(layout, key, full_begin + first, lanes, reinterpret_cast<u32*>(dst), D == Direct::uniform_floats);
    } else {
      BatchBlocks<K> blocks;
      compute_batch<K>(layout, key, full_begin + first, lanes, blocks);
      for (std::size_t l = 0; l < lanes; ++l) group(lane(blocks, l), dst + 4 * l);
    }
  }
}

// Fills out[0, n) with Transform's outputs (detail/block_fill.hpp): a group is its K blocks'
// outputs in block order.
template <class Transform>
inline void fill_with(typename Transform::value_type* out, std::size_t n, u64 seed, u64 offset, Transform t) {
  constexpr u32 K = detail::blocks_per_group<Transform>;
  constexpr Direct direct = std::is_same_v<Transform, detail::BitsTransform>           ? Direct::bits
                            : std::is_same_v<Transform, detail::UniformFloatTransform> ? Direct::uniform_floats
                                                                                      : Direct::through_scratch;
  fill_groups<K, direct>(out, n, seed, offset, [t](const LaneBlocks<K>& g, typename Transform::value_type* d) {
    for (u32 k = 0; k < K; ++k) t(g.b[k], d + k * Transform::per_block);
  });
}

}  // namespace fill_detail

/// The instruction set the host fills' Philox kernel uses on this CPU: "AVX-512", "AVX2", "SSE2" or
/// "portable loop" — chosen at run time (the widest the CPU and OS run), whatever the program was
/// compiled for.
[[nodiscard]] inline const char* fill_kernel_name() noexcept {
  return fill_detail::philox_kernel_name(fill_detail::philox_kernel());
}

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
