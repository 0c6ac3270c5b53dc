// Shared by the accel/blas tests: host matrices, a double-precision reference GEMM, and the copies to
// and from a backend's memory.
#pragma once

#include "conformance/backends.hpp"  // ACCEL_SKIP_UNLESS_AVAILABLE, accel/accel.hpp

#include <accel/accel.hpp>
#include <accel/blas.hpp>

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace blas_test {

using accel::blas::Trans;
using i64 = std::int64_t;

/// A deterministic value in {-3, ..., 3} (exact in bfloat16, half and float; every product and the sums
/// of the tests' sizes are exact in float, so results can be compared bit for bit).
inline float small_int(i64 i, int salt) {
  const std::uint64_t x = (static_cast<std::uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(salt) * 0xBF58476D1CE4E5B9ull;
  return static_cast<float>(static_cast<int>((x >> 29) % 7) - 3);
}

/// A deterministic value in (-1, 1) with a full mantissa.
inline float fraction(i64 i, int salt) {
  const std::uint64_t x = ((static_cast<std::uint64_t>(i) + 7) * 0xD1B54A32D192ED03ull) ^ (static_cast<std::uint64_t>(salt) << 32);
  return static_cast<float>(static_cast<double>(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/// Element (r, c) of op(X), X stored row-major with row stride ld.
inline double op_at(const std::vector<float>& x, i64 offset, i64 ld, Trans t, i64 r, i64 c) {
  return t == Trans::no ? x[offset + r * ld + c] : x[offset + c * ld + r];
}

/// C_i = alpha op(A_i) op(B_i) + beta C_i in double (beta == 0: C not read), rounded to float.
inline void reference_gemm(Trans ta, Trans tb, i64 m, i64 n, i64 k, float alpha, const std::vector<float>& a, i64 lda,
                           i64 stride_a, const std::vector<float>& b, i64 ldb, i64 stride_b, float beta,
                           std::vector<float>& c, i64 ldc, i64 stride_c, i64 batch) {
  for (i64 i = 0; i < batch; ++i) {
    for (i64 r = 0; r < m; ++r) {
      for (i64 col = 0; col < n; ++col) {
        double sum = 0;
        for (i64 p = 0; p < k; ++p) sum += op_at(a, i * stride_a, lda, ta, r, p) * op_at(b, i * stride_b, ldb, tb, p, col);
        float& out = c[i * stride_c + r * ldc + col];
        const double prior = beta == 0.0f ? 0.0 : double(beta) * double(out);
        out = static_cast<float>(double(alpha) * sum + prior);
      }
    }
  }
}

/// Elements (stored_rows - 1) * ld + stored_cols, or 0.
inline i64 span(i64 rows, i64 cols, i64 ld) { return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols; }

inline std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

template <class T>
T to(float f) {
  if constexpr (std::is_same_v<T, float>) return f;
  else return T(f);
}
template <class T>
float from(T v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return static_cast<float>(v);
}

/// Host floats -> a new buffer of T on `stream` (enqueued in stream order).
template <class T, class B>
accel::Buffer<T, B> upload(const B& b, typename B::StreamRef stream, const std::vector<float>& host,
                           std::vector<T>& staging) {
  staging.resize(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) staging[i] = to<T>(host[i]);
  accel::Buffer<T, B> out(host.size(), stream);
  if (!host.empty()) b.copy_async(stream, out.data(), staging.data(), host.size() * sizeof(T));
  return out;
}

/// A buffer's contents as floats (synchronizes the stream).
template <class T, class B>
std::vector<float> download(const B& b, typename B::StreamRef stream, const accel::Buffer<T, B>& buffer) {
  std::vector<T> staging(buffer.size());
  if (!staging.empty()) b.copy_async(stream, staging.data(), buffer.data(), buffer.size() * sizeof(T));
  stream.synchronize();
  std::vector<float> out(staging.size());
  for (std::size_t i = 0; i < staging.size(); ++i) out[i] = from<T>(staging[i]);
  return out;
}

/// The name of a stream's backend ("cpu", "cuda"), also through AnyBackend.
template <class B>
std::string backend_of(typename B::StreamRef s) {
  if constexpr (requires { s.backend_name(); }) {
    return std::string(s.backend_name());
  } else {
    return std::string(B::name());
  }
}

inline bool mentions(const std::exception& e, const std::string& word) {
  return std::string(e.what()).find(word) != std::string::npos;
}

}  // namespace blas_test

/// Runs `expr`, requires an InvalidArgumentError whose message contains `word`.
#define BLAS_CHECK_INVALID(expr, word)                                                          \
  do {                                                                                          \
    bool thrown_ = false;                                                                       \
    try {                                                                                       \
      expr;                                                                                     \
    } catch (const accel::InvalidArgumentError& e_) {                                           \
      thrown_ = true;                                                                           \
      CHECK_MESSAGE(::blas_test::mentions(e_, word), "message: " << e_.what() << " lacks " << word); \
    }                                                                                           \
    CHECK_MESSAGE(thrown_, #expr " did not throw InvalidArgumentError");                        \
  } while (false)
