// accel/blas/detail/cpu_epilogue.hpp — the GELU epilogues on the CPU: a pass over C right after the
// product, in the same task (so it runs in stream order, and in a graph's replay, with the GEMM).
//
// The GELU is the tanh form (GPT-2's, torch's approximate='tanh', cuBLASLt's), computed through a
// sigmoid: 0.5 (1 + tanh u) = 1 / (1 + e^{-2u}), u = k (x + c x^3), k = sqrt(2 / pi), c = 0.044715.
// 16-bit C is the product as stored (rounded once), then the epilogue's result rounded once more: cuBLASLt
// applies its epilogue to the float accumulator instead, so 16-bit results may differ by one rounding.
// The rows are split over blas::num_threads() OpenMP threads, the threads the GEMM used.
#pragma once

#include <accel/blas/detail/arguments.hpp>
#include <accel/blas/detail/openmp.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace accel::blas::detail {

// The math runs on N lanes of GCC / Clang generic vectors, with no control flow to defeat the vectorizer
// (a float compare in a plain loop does, under the default -ftrapping-math): four lanes at x86-64's
// baseline (SSE; NEON on Arm), eight in a copy compiled for AVX2 + FMA, sixteen in one for AVX-512,
// the widest the CPU runs chosen at run time (the copies' results may differ in the last bits: FMA
// contracts some of the multiply-adds). The helpers are always inlined and take vectors by reference,
// so no vector crosses a call (whose ABI would depend on the flags each side was compiled with; GCC's
// -Wpsabi note about it is silenced for that reason).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

template <int N>
struct LaneTypes;  // (vector_size does not take a dependent size: one specialization per width)
template <>
struct LaneTypes<4> {
  using F = float __attribute__((vector_size(16)));
  using U = std::uint32_t __attribute__((vector_size(16)));
};
template <>
struct LaneTypes<8> {
  using F = float __attribute__((vector_size(32)));
  using U = std::uint32_t __attribute__((vector_size(32)));
};
template <>
struct LaneTypes<16> {
  using F = float __attribute__((vector_size(64)));
  using U = std::uint32_t __attribute__((vector_size(64)));
};

#define ACCEL_EPILOGUE_INLINE [[gnu::always_inline]] inline

/// x = x where mask, else b (mask lanes all ones or all zeros). Vectors go by reference: a vector
/// passed by value would cross calls in registers only where both sides were compiled with AVX.
template <int N>
ACCEL_EPILOGUE_INLINE void keep_else(typename LaneTypes<N>::F& x, const typename LaneTypes<N>::U& mask,
                                     const typename LaneTypes<N>::F& b) noexcept {
  using U = typename LaneTypes<N>::U;
  using F = typename LaneTypes<N>::F;
  x = reinterpret_cast<F>((reinterpret_cast<U>(x) & mask) | (reinterpret_cast<U>(b) & ~mask));
}

/// x = e^x, clamped to float's range (below at -87.3: about 1e-38, no subnormal; above at 88.37,
/// float's largest finite e^x): the exponent by rounding x / ln 2 with the 1.5 * 2^23 trick, the rest
/// by a degree-6 polynomial.
template <int N>
ACCEL_EPILOGUE_INLINE void exp_in_place(typename LaneTypes<N>::F& x) noexcept {
  using U = typename LaneTypes<N>::U;
  using F = typename LaneTypes<N>::F;
  const F hi = F{} + 88.3762626647949f, lo = F{} - 87.3365447505531f;
  keep_else<N>(x, reinterpret_cast<U>(x < hi), hi);
  keep_else<N>(x, reinterpret_cast<U>(x > lo), lo);
  const F t = x * 1.44269504088896341f + 12582912.0f;
  const F n = t - 12582912.0f;
  F r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const U scale = (reinterpret_cast<U>(t) - 0x4B400000u + 127u) << 23;
  x = (p * (r * r) + r + 1.0f) * reinterpret_cast<F>(scale);
}

// -2u = x (-2k - 2kc x^2) and 2u' = 2k + 6kc x^2, the constants folded in double and rounded once.
inline constexpr float gelu_m2k = static_cast<float>(-2 * 0.7978845608028654);
inline constexpr float gelu_m2kc = static_cast<float>(-2 * 0.7978845608028654 * 0.044715);
inline constexpr float gelu_2k = static_cast<float>(2 * 0.7978845608028654);
inline constexpr float gelu_6kc = static_cast<float>(6 * 0.7978845608028654 * 0.044715);

// Past |x| = 11, e^{-2u} lies far outside float's range (exp_in_place clamps it) and GELU is 0 (x < -11) or
// x (x > 11), GELU' 0 or 1, to float precision. The formulas with the clamped e^{-2u} are not: x / (1 + e) is
// -1.4 at -FLT_MAX, and GELU' grows as x^3 times the clamped 1.2e-38 (wrong past about 1e11, inf past 1e19).
// So those lanes are set to 0 or 1 at the end, by masks taken from x (off the formulas' dependency chain:
// on one 3.1 M-element pass, +9 % for GELU and +11 % for GELU' where clamping x first cost +28 %). A NaN's
// compares are false: it keeps the formula's NaN.
inline constexpr float gelu_saturated = 11.0f;

/// x = GELU(x), tanh form.
template <int N>
ACCEL_EPILOGUE_INLINE void gelu_in_place(typename LaneTypes<N>::F& x) noexcept {
  using U = typename LaneTypes<N>::U;
  using F = typename LaneTypes<N>::F;
  const U zero = reinterpret_cast<U>(x < -gelu_saturated);
  F e = x * (gelu_m2kc * x * x + gelu_m2k);
  exp_in_place<N>(e);
  x = reinterpret_cast<F>(reinterpret_cast<U>(x / (1.0f + e)) & ~zero);
}

/// x = GELU'(x) = s + 2 x s (1 - s) u'(x), s = 1 / (1 + e^{-2u}); 1 - s is taken as e^{-2u} s (no cancellation).
template <int N>
ACCEL_EPILOGUE_INLINE void gelu_grad_in_place(typename LaneTypes<N>::F& x) noexcept {
  using U = typename LaneTypes<N>::U;
  using F = typename LaneTypes<N>::F;
  const U zero = reinterpret_cast<U>(x < -gelu_saturated), one = reinterpret_cast<U>(x > gelu_saturated);
  const F x2 = x * x;
  F e = x * (gelu_m2kc * x2 + gelu_m2k);
  exp_in_place<N>(e);
  const F s = 1.0f / (1.0f + e);
  const F g = x * (e * s) * s * (gelu_6kc * x2 + gelu_2k) + s;
  x = reinterpret_cast<F>((reinterpret_cast<U>(g) & ~(zero | one)) | (reinterpret_cast<U>(F{} + 1.0f) & one));
}

/// v = up to N elements of T as floats (the rest zero), and back.
template <int N, class T>
ACCEL_EPILOGUE_INLINE void load_lanes(typename LaneTypes<N>::F& v, const T* p, int count) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    if (count == N) {
      std::memcpy(&v, p, sizeof(v));
      return;
    }
  }
  v = typename LaneTypes<N>::F{};
  for (int i = 0; i < count; ++i) v[i] = static_cast<float>(p[i]);
}

template <int N, class T>
ACCEL_EPILOGUE_INLINE void store_lanes(T* p, const typename LaneTypes<N>::F& v, int count) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    if (count == N) {
      std::memcpy(p, &v, sizeof(v));
      return;
    }
  }
  for (int i = 0; i < count; ++i) p[i] = T(v[i]);
}

/// Rows [begin, end) of C (and aux), N lanes at a time.
template <int N, class T>
ACCEL_EPILOGUE_INLINE void epilogue_rows_lanes(const GemmArgs<T>& g, std::int64_t begin, std::int64_t end) noexcept {
  typename LaneTypes<N>::F x, d;
  for (std::int64_t r = begin; r < end; ++r) {
    T* c = g.c + r * g.ldc;
    T* aux = g.aux == nullptr ? nullptr : g.aux + r * g.ldaux;
    for (std::int64_t j = 0; j < g.n; j += N) {
      const int count = g.n - j < N ? static_cast<int>(g.n - j) : N;
      load_lanes<N>(x, c + j, count);
      if (g.epilogue == Epilogue::dgelu) {
        load_lanes<N>(d, aux + j, count);
        gelu_grad_in_place<N>(d);
        x = x * d;
      } else {
        if (aux != nullptr) std::memcpy(aux + j, c + j, static_cast<std::size_t>(count) * sizeof(T));
        gelu_in_place<N>(x);
      }
      store_lanes<N>(c + j, x, count);
    }
  }
}

#undef ACCEL_EPILOGUE_INLINE

template <class T>
void epilogue_rows_baseline(const GemmArgs<T>& g, std::int64_t begin, std::int64_t end) noexcept {
  epilogue_rows_lanes<4>(g, begin, end);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#define ACCEL_EPILOGUE_AVX2 1
template <class T>
__attribute__((target("avx2,fma"))) void epilogue_rows_avx2(const GemmArgs<T>& g, std::int64_t begin,
                                                             std::int64_t end) noexcept {
  epilogue_rows_lanes<8>(g, begin, end);
}
template <class T>
__attribute__((target("avx512f"))) void epilogue_rows_avx512(const GemmArgs<T>& g, std::int64_t begin,
                                                              std::int64_t end) noexcept {
  epilogue_rows_lanes<16>(g, begin, end);
}
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// Which copy this CPU runs (asked once): 16 (AVX-512), 8 (AVX2 + FMA) or 4 lanes (the baseline).
[[nodiscard]] inline int epilogue_lanes() noexcept {
#if defined(ACCEL_EPILOGUE_AVX2)
  static const int lanes = __builtin_cpu_supports("avx512f")                                   ? 16
                           : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 8
                                                                                              : 4;
  return lanes;
#else
  return 4;
#endif
}

/// Rows [begin, end) of C (and aux), on the widest copy this CPU runs.
template <class T>
void epilogue_rows(const GemmArgs<T>& g, std::int64_t begin, std::int64_t end) noexcept {
#if defined(ACCEL_EPILOGUE_AVX2)
  switch (epilogue_lanes()) {
    case 16: epilogue_rows_avx512(g, begin, end); return;
    case 8: epilogue_rows_avx2(g, begin, end); return;
    default: break;
  }
#endif
  epilogue_rows_baseline(g, begin, end);
}

template <class T>
struct EpilogueWork {
  const GemmArgs<T>* g;
};

template <class T>
void epilogue_share(void* data) noexcept {
  const GemmArgs<T>& g = *static_cast<EpilogueWork<T>*>(data)->g;
  const OpenMpApi& omp = openmp();
  const std::int64_t t = omp.get_thread_num(), n = omp.get_num_threads();
  epilogue_rows(g, t * g.m / n, (t + 1) * g.m / n);
}

/// Applies g's epilogue to C (computed already); runs in the GEMM's task, on the stream's thread.
template <class T>
void cpu_epilogue(const GemmArgs<T>& g) {
  if (g.epilogue == Epilogue::none || g.empty()) return;
  const int threads = apply_requested_threads();
  // Below ~64 K elements a team costs more than it saves.
  if (threads > 1 && g.m > 1 && g.m * g.n >= (std::int64_t{1} << 16)) {
    EpilogueWork<T> work{&g};
    openmp().parallel(&epilogue_share<T>, &work, static_cast<unsigned>(threads), 0);
    return;
  }
  epilogue_rows(g, 0, g.m);
}

}  // namespace accel::blas::detail
