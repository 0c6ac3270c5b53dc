// accel/blas/detail/arguments.hpp — one GEMM call as a value, and the checks made on it at the call,
// before anything is enqueued (a bad argument is an InvalidArgumentError thrown by the call, never a
// task failure).
#pragma once

#include <accel/blas/trans.hpp>
#include <accel/core/bfloat16.hpp>
#include <accel/core/error.hpp>
#include <accel/core/half.hpp>
#include <accel/detail/min_max.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>

namespace accel::blas::detail {

/// Element types a GEMM may take (each backend says which it runs: GemmImpl<B>::supports<T>).
template <class T>
inline constexpr bool is_gemm_type = std::is_same_v<T, float> || std::is_same_v<T, bfloat16> || std::is_same_v<T, half>;

template <class T>
[[nodiscard]] constexpr const char* type_name() noexcept {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, bfloat16>) return "bfloat16";
  else return "half";
}

/// What a single GEMM does to its product before storing it (blas/gemm_gelu.hpp):
///   none    C = P, where P = alpha * op(A) * op(B) + beta * C
///   gelu    C = GELU(P) (tanh form); aux, when not null, receives P
///   dgelu   C = P * GELU'(aux)   (aux: the pre-activation the forward wrote; read only)
enum class Epilogue : unsigned char { none, gelu, dgelu };

/// A strided-batched row-major GEMM: C_i = alpha * op(A_i) * op(B_i) + beta * C_i, i < batch, where
/// X_i starts at x + i * stride_x. A single GEMM is batch 1 (strides unused). An epilogue other than
/// none comes with batch 1 and its aux matrix (m x n, row stride ldaux).
template <class T>
struct GemmArgs {
  Trans ta = Trans::no;
  Trans tb = Trans::no;
  std::int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const T* a = nullptr;
  std::int64_t lda = 0, stride_a = 0;
  const T* b = nullptr;
  std::int64_t ldb = 0, stride_b = 0;
  float beta = 0.0f;
  T* c = nullptr;
  std::int64_t ldc = 0, stride_c = 0;
  std::int64_t batch = 1;
  Epilogue epilogue = Epilogue::none;
  T* aux = nullptr;  ///< gelu: written (may be null); dgelu: read, never written
  std::int64_t ldaux = 0;

  /// True when the call changes nothing (no element of C).
  [[nodiscard]] bool empty() const noexcept { return m == 0 || n == 0 || batch == 0; }
};

/// Which call on which device, for messages; formatted only when one is written.
struct Call {
  const char* fn;            ///< "gemm"
  std::string_view backend;  ///< "cpu"
  int device;
  /// "accel::blas::gemm (cpu:0)"
  [[nodiscard]] std::string str() const {
    return std::string("accel::blas::") + fn + " (" + std::string(backend) + ":" + std::to_string(device) + ")";
  }
};

[[noreturn, gnu::cold, gnu::noinline]] inline void invalid(const Call& call, const std::string& what) {
  throw InvalidArgumentError(call.str() + ": " + what);
}

/// Row-major storage of op(X) (rows x cols of op(X)): the stored array is rows x cols, or cols x rows
/// when transposed. Its row stride must cover a stored row.
struct Operand {
  const char* name;     ///< "A"
  const char* ld_name;  ///< "lda"
  std::int64_t op_rows, op_cols, ld;
  Trans t;
  [[nodiscard]] std::int64_t stored_rows() const noexcept { return t == Trans::no ? op_rows : op_cols; }
  [[nodiscard]] std::int64_t stored_cols() const noexcept { return t == Trans::no ? op_cols : op_rows; }
};

/// Elements one operand spans: (stored_rows - 1) * ld + stored_cols, times the batch's strides;
/// 0 when it has no element. InvalidArgumentError when that does not fit in 64 bits.
[[nodiscard]] inline std::int64_t extent(const Call& call, const Operand& x, std::int64_t stride,
                                         std::int64_t batch) {
  const std::int64_t rows = x.stored_rows(), cols = x.stored_cols();
  if (rows == 0 || cols == 0 || batch == 0) return 0;
  std::int64_t span = 0;
  std::int64_t last = 0;
  if (__builtin_mul_overflow(rows - 1, x.ld, &span) || __builtin_add_overflow(span, cols, &span) ||
      __builtin_mul_overflow(batch - 1, stride, &last) || __builtin_add_overflow(span, last, &span)) {
    invalid(call, std::string(x.name) + " spans more than 2^63 elements (" + x.ld_name + " or the stride is too large)");
  }
  return span;
}

/// The checks every GEMM makes on its sizes, whatever the backend: sizes, strides, leading dimensions.
template <class T>
void check_sizes(const Call& call, const GemmArgs<T>& g, bool batched) {
  const auto non_negative = [&](const char* name, std::int64_t v) {
    if (v < 0) invalid(call, std::string(name) + " = " + std::to_string(v) + " is negative");
  };
  non_negative("m", g.m);
  non_negative("n", g.n);
  non_negative("k", g.k);
  if (batched) {
    non_negative("batch_count", g.batch);
    non_negative("stride_a", g.stride_a);
    non_negative("stride_b", g.stride_b);
    non_negative("stride_c", g.stride_c);
  }
  const Operand ops[] = {{"A", "lda", g.m, g.k, g.lda, g.ta}, {"B", "ldb", g.k, g.n, g.ldb, g.tb},
                         {"C", "ldc", g.m, g.n, g.ldc, Trans::no}};
  for (const Operand& x : ops) {
    const std::int64_t needed = x.stored_cols() > 1 ? x.stored_cols() : 1;
    if (x.ld < needed) {
      invalid(call, std::string(x.ld_name) + " = " + std::to_string(x.ld) + " is less than " +
                        std::to_string(needed) + ", the row length of " + x.name + " (stored " +
                        std::to_string(x.stored_rows()) + " x " + std::to_string(x.stored_cols()) +
                        (x.t == Trans::yes ? ", transposed" : "") + ")");
    }
  }
  // The batch's C matrices are written at once (threads, CUDA blocks): they must not share an
  // element. A and B may (stride 0 broadcasts one matrix to the batch). Two layouts keep them apart:
  // one after another (stride_c >= the span of one C) or side by side in each row (stride_c >= n and
  // the last one's columns end within ldc, as heads interleaved in a [T, heads x n] array).
  if (batched && g.batch > 1 && g.m > 0 && g.n > 0) {
    // One C's span; extent() refuses one that overflows, as every span is refused.
    const std::int64_t span_c = extent(call, {"C", "ldc", g.m, g.n, g.ldc, Trans::no}, 0, 1);
    std::int64_t row_end = 0;
    const bool stacked = g.stride_c >= span_c;
    const bool side_by_side = g.stride_c >= g.n && !__builtin_mul_overflow(g.batch - 1, g.stride_c, &row_end) &&
                              !__builtin_add_overflow(row_end, g.n, &row_end) && row_end <= g.ldc;
    if (!stacked && !side_by_side) {
      invalid(call, "stride_c = " + std::to_string(g.stride_c) + " makes the batch's C matrices overlap: one C spans " +
                        std::to_string(span_c) + " elements ((m - 1) x ldc + n); side by side in a row they need " +
                        "stride_c >= n = " + std::to_string(g.n) + " and (batch_count - 1) x stride_c + n <= ldc = " +
                        std::to_string(g.ldc));
    }
  }
}

/// A pointer not aligned to its elements: cuBLAS faults on one, so every backend refuses it.
[[noreturn, gnu::cold, gnu::noinline]] inline void misaligned(const Call& call, const char* name, const void* p,
                                                              std::size_t element_bytes) {
  char text[160];
  std::snprintf(text, sizeof text, "%s: the pointer %p is not aligned to its %zu-byte elements", name, p, element_bytes);
  invalid(call, text);
}

/// A null pointer is refused where an element would be read or written, and one not aligned to T.
template <class T>
void check_pointers(const Call& call, const GemmArgs<T>& g) {
  if (g.empty()) return;
  const auto aligned = [&](const char* name, const void* p) {
    if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0) misaligned(call, name, p, alignof(T));
  };
  if (g.c == nullptr) invalid(call, "c is null");
  aligned("c", g.c);
  if (g.k > 0) {
    if (g.a == nullptr) invalid(call, "a is null");
    if (g.b == nullptr) invalid(call, "b is null");
    aligned("a", g.a);
    aligned("b", g.b);
  }
}

/// Where one operand's elements lie, in elements from its pointer: `batch` matrices `stride` apart,
/// each `rows` stored rows `ld` apart, each row `cols` contiguous elements.
struct Footprint {
  std::int64_t rows, cols, ld, stride, batch;
};

[[nodiscard]] constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {  // b > 0
  return a / b - (a % b != 0 && a < 0 ? 1 : 0);
}
[[nodiscard]] constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept {  // b > 0
  return a / b + (a % b != 0 && a > 0 ? 1 : 0);
}

/// Whether written operand w and read operand r, r starting `offset` elements after w (negative:
/// before), share an element. Each row of w is tested against the rows of r that could reach it (O(1)
/// per batch of r near it), so operands interleaved in one array — heads side by side, [x | W x]
/// written beside its input — are told apart from ones that really overlap. Past `budget` rows the
/// answer is "they share one": a refusal the caller can act on beats a silent wrong product.
[[nodiscard]] inline bool shares_element(const Footprint& w, const Footprint& r, std::int64_t offset) {
  std::int64_t budget = std::int64_t{1} << 22;
  const std::int64_t w_batches = w.stride == 0 ? 1 : w.batch, r_batches = r.stride == 0 ? 1 : r.batch;
  const std::int64_t r_span = (r.rows - 1) * r.ld + r.cols;  // one matrix of r; fits: extent() checked
  for (std::int64_t t = 0; t < w_batches; ++t) {
    for (std::int64_t row = 0; row < w.rows; ++row) {
      if (--budget < 0) return true;
      const std::int64_t x = t * w.stride + row * w.ld - offset;  // this row of w, from r's pointer
      const std::int64_t lo = x - r.cols + 1, hi = x + w.cols - 1;  // r's rows starting here meet it
      std::int64_t u_first = 0, u_last = r_batches - 1;
      if (r.stride > 0) {
        u_first = accel::detail::max_of(u_first, ceil_div(lo - r_span + r.cols, r.stride));
        u_last = accel::detail::min_of(u_last, floor_div(hi, r.stride));
      }
      for (std::int64_t u = u_first; u <= u_last; ++u) {
        if (--budget < 0) return true;
        const std::int64_t base = u * r.stride;
        const std::int64_t q_first = accel::detail::max_of(std::int64_t{0}, ceil_div(lo - base, r.ld));
        const std::int64_t q_last = accel::detail::min_of(r.rows - 1, floor_div(hi - base, r.ld));
        if (q_first <= q_last) return true;
      }
    }
  }
  return false;
}

/// C (and a gelu's aux, also written) must not share an element with A or B, which the GEMM reads
/// while it writes them: no backend promises a result then (oneDNN and cuBLAS read A and B in blocks,
/// after parts of C are stored). Operands interleaved in one array without a common element are
/// allowed, as cuBLAS runs them. A and B may share memory, as may dgelu's aux (read only) with them.
/// Pointers already checked (after check_pointers / the buffers' checks and check_epilogue).
template <class T>
void check_overlaps(const Call& call, const GemmArgs<T>& g) {
  if (g.empty() || g.k == 0) return;  // k == 0: A and B are not read
  struct Range {
    const char* arg;  // "c"
    const char* op;   // "C"
    const void* p;
    std::int64_t elements;
    Footprint where;
  };
  const auto range = [&](const char* arg, const Operand& x, const void* p, std::int64_t stride,
                         std::int64_t batch) {
    return Range{arg, x.name, p, extent(call, x, stride, batch),
                 Footprint{x.stored_rows(), x.stored_cols(), x.ld, stride, batch}};
  };
  const Range c = range("c", {"C", "ldc", g.m, g.n, g.ldc, Trans::no}, g.c, g.stride_c, g.batch);
  const Range a = range("a", {"A", "lda", g.m, g.k, g.lda, g.ta}, g.a, g.stride_a, g.batch);
  const Range b = range("b", {"B", "ldb", g.k, g.n, g.ldb, g.tb}, g.b, g.stride_b, g.batch);
  const auto refuse_overlap = [&](const Range& w, const Range& r) {
    // [first, end) in bytes; an end past the address space (no such operand exists) saturates.
    const auto end = [](std::uintptr_t first, std::int64_t elements) {
      std::uintptr_t bytes = 0, last = 0;
      if (__builtin_mul_overflow(static_cast<std::uintptr_t>(elements), sizeof(T), &bytes) ||
          __builtin_add_overflow(first, bytes, &last)) {
        return ~std::uintptr_t{0};
      }
      return last;
    };
    const auto w0 = reinterpret_cast<std::uintptr_t>(w.p), r0 = reinterpret_cast<std::uintptr_t>(r.p);
    if (!(w0 < end(r0, r.elements) && r0 < end(w0, w.elements))) return;  // apart: the usual case
    // The ranges meet, so the pointers are within one operand's extent of each other, and both are
    // aligned to T (check_pointers): their distance is a whole number of elements that fits.
    const std::int64_t offset = r0 >= w0 ? static_cast<std::int64_t>((r0 - w0) / sizeof(T))
                                         : -static_cast<std::int64_t>((w0 - r0) / sizeof(T));
    if (!shares_element(w.where, r.where, offset)) return;
    invalid(call, std::string(w.arg) + " overlaps " + r.arg + ": " + w.op + " (" + std::to_string(w.elements) +
                      " elements from " + w.arg + ") is written while " + r.op + " (" + std::to_string(r.elements) +
                      " elements from " + r.arg + ") is read" +
                      (g.batch > 1 ? ", over the batch of " + std::to_string(g.batch) : std::string()) +
                      "; they must not share memory");
  };
  refuse_overlap(c, a);
  refuse_overlap(c, b);
  if (g.epilogue == Epilogue::gelu && g.aux != nullptr) {
    const Range aux = range("aux", {"aux", "ldaux", g.m, g.n, g.ldaux, Trans::no}, g.aux, 0, 1);
    refuse_overlap(aux, a);
    refuse_overlap(aux, b);
  }
}

/// The alignment (bytes) and row-stride multiple an aux matrix must have on every backend: cuBLASLt's
/// rule for its GELU epilogues, kept everywhere so that code which runs on one backend runs on all.
inline constexpr std::int64_t aux_alignment_bytes = 16;
inline constexpr std::int64_t aux_ld_multiple = 8;

/// aux's row stride: it covers a row of C's width and is a multiple of aux_ld_multiple.
template <class T>
void check_aux_stride(const Call& call, const GemmArgs<T>& g) {
  const std::int64_t needed = g.n > 1 ? g.n : 1;
  if (g.ldaux < needed) {
    invalid(call, "ldaux = " + std::to_string(g.ldaux) + " is less than " + std::to_string(needed) +
                      ", the row length of aux (" + std::to_string(g.m) + " x " + std::to_string(g.n) + ")");
  }
  if (g.ldaux % aux_ld_multiple != 0) {
    invalid(call, "ldaux = " + std::to_string(g.ldaux) + " is not a multiple of " + std::to_string(aux_ld_multiple) +
                      " (cuBLASLt's rule for the aux matrix, kept on every backend)");
  }
}

/// The checks of an epilogue's aux matrix (after check_sizes): its stride, alignment, and that it does
/// not overlap C (both are written, or aux is read while C is written).
template <class T>
void check_epilogue(const Call& call, const GemmArgs<T>& g) {
  if (g.epilogue == Epilogue::none) return;
  if (g.k == 0 && !g.empty()) invalid(call, "k = 0: an epilogue needs a product to apply to (k >= 1)");
  if (g.aux == nullptr) {
    if (g.epilogue == Epilogue::dgelu && !g.empty()) invalid(call, "aux is null (the GELU's input is read from it)");
    return;
  }
  check_aux_stride(call, g);
  if (reinterpret_cast<std::uintptr_t>(g.aux) % aux_alignment_bytes != 0) {
    invalid(call, "aux is not " + std::to_string(aux_alignment_bytes) +
                      "-byte aligned (cuBLASLt's rule for the aux matrix, kept on every backend)");
  }
  if (g.empty()) return;
  const auto bytes = [&](const Operand& x) {
    return static_cast<std::uintptr_t>(extent(call, x, 0, 1)) * sizeof(T);  // extent refuses an overflow
  };
  const auto aux0 = reinterpret_cast<std::uintptr_t>(g.aux), c0 = reinterpret_cast<std::uintptr_t>(g.c);
  const std::uintptr_t aux1 = aux0 + bytes({"aux", "ldaux", g.m, g.n, g.ldaux, Trans::no});
  const std::uintptr_t c1 = c0 + bytes({"C", "ldc", g.m, g.n, g.ldc, Trans::no});
  if (aux0 < c1 && c0 < aux1) invalid(call, "aux overlaps c (the epilogue writes c while it reads or writes aux)");
}

}  // namespace accel::blas::detail
