// accel/blas/gemm.hpp — accel::blas::gemm and gemm_strided_batched: matrix products on a stream.
//
// Row-major (C and torch layout): C = alpha * op(A) * op(B) + beta * C, where op(A) is m x k, op(B) is
// k x n and C is m x n; lda, ldb, ldc are row strides in elements (an operand used transposed is stored
// k x m or n x k). The batched form multiplies batch_count triples, matrix i starting stride_x elements
// after matrix i - 1 (a stride of 0 reuses one matrix for the whole batch).
//
//   gemm(backend, stream, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
//   gemm(backend, stream, ta, tb, m, n, k, alpha, A, offset_a, lda, B, offset_b, ldb, beta, C, offset_c, ldc)
//   gemm_strided_batched(..., a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch_count)
//   gemm_strided_batched(..., A, offset_a, lda, stride_a, ..., batch_count)      (Buffer<T, B> operands)
//
// The call returns once the work is enqueued on `stream`; it runs in stream order (after what was
// enqueued before, before what is enqueued after; recorded, not run, while the stream captures a
// graph). Pointers are memory of the stream's device, alive and unchanged until the GEMM has run.
// beta == 0: C is only written (NaNs or garbage in C do not propagate). k == 0: C = beta * C.
// Element types: float, bfloat16 and half (16-bit ones accumulated in float, C rounded once) on every
// backend. On the CPU, half — and bfloat16 where oneDNN has no bf16 matmul (it needs AVX-512) — is the
// float product of the widened operands (F16C conversions for half where the CPU has them).
//
// Checked at the call, before anything is enqueued, as InvalidArgumentError naming the argument:
// negative sizes, strides or batch_count, a leading dimension shorter than a stored row, a null
// pointer where an element is read or written, a pointer not aligned to its elements, C overlapping A
// or B (their address ranges over the whole batch: C is written while they are read; A and B may
// share memory), sizes beyond the backend's limits (cuBLAS: 32-bit);
// for Buffer operands also a negative offset, a buffer too small for the span the operand covers, and a
// buffer of another device (or, through AnyBackend, another backend) than the stream's.
//
//   CpuBackend   oneDNN's sgemm (bfloat16: its matmul primitive, else as half; half: sgemm on widened copies) as
//                one task on the CPU stream (blas/detail/cpu_gemm.hpp); threads: blas::set_num_threads
//   CudaBackend  cuBLAS, loaded on first use, one handle and workspace per stream
//                (blas/detail/cuda_gemm.hpp); any compiler, no nvcc needed
//   AnyBackend   the stream's backend
#pragma once

#include <accel/blas/detail/any_gemm.hpp>
#include <accel/blas/detail/arguments.hpp>
#include <accel/blas/detail/cpu_gemm.hpp>
#include <accel/blas/detail/cuda_gemm.hpp>
#include <accel/blas/trans.hpp>
#include <accel/concepts/accelerator.hpp>
#include <accel/memory/buffer.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace accel::blas {

namespace detail {

template <class B, class S>
[[nodiscard]] Call make_call(const char* fn, const S& stream) {
  if constexpr (requires { stream.backend_name(); }) {
    return Call{fn, stream.backend_name(), stream.device_index()};
  } else {
    return Call{fn, B::name(), stream.device_index()};
  }
}

template <class B, class T>
constexpr void check_type() {
  static_assert(is_gemm_type<T>, "accel::blas: the element type must be float, accel::bfloat16 or accel::half");
  static_assert(has_gemm<B>,
                "accel::blas: this backend has no GEMM. accel::blas runs on CpuBackend, CudaBackend and AnyBackend; "
                "a backend of your own specializes accel::blas::detail::GemmImpl");
  static_assert(!has_gemm<B> || GemmImpl<B>::template supports<T>,
                "accel::blas: this backend does not multiply matrices of this type (float, bfloat16, half)");
}

template <class B, class T>
void enqueue(const Call& call, typename B::StreamRef stream, const GemmArgs<T>& g, bool batched) {
  check_sizes(call, g, batched);
  check_pointers(call, g);
  check_epilogue(call, g);
  check_overlaps(call, g);
  if constexpr (has_gemm<B>) GemmImpl<B>::run(call, stream, g);  // else check_type has said why, alone
}

/// `buffer` must hold the `span` elements operand `name` covers from `offset`, on the stream's device.
template <class T, class B>
void check_buffer(const Call& call, typename B::StreamRef stream, const char* name, const char* offset_name,
                  const Buffer<T, B>& buffer, std::int64_t offset, std::int64_t span) {
  if (offset < 0) invalid(call, std::string(offset_name) + " = " + std::to_string(offset) + " is negative");
  if (span == 0) return;
  const auto size = static_cast<std::int64_t>(buffer.size());
  if (offset > size || span > size - offset) {
    invalid(call, std::string(name) + " is too small: the operand spans " + std::to_string(span) +
                      " elements from offset " + std::to_string(offset) + ", but the buffer holds " +
                      std::to_string(size));
  }
  const auto where = buffer.stream();
  if constexpr (requires { where.index(); }) {  // AnyBackend: the same backend first
    if (where.index() != stream.index()) {
      invalid(call, std::string(name) + " is memory of the " + std::string(where.backend_name()) +
                        " backend, but the stream is a " + std::string(stream.backend_name()) + " stream");
    }
  }
  if (where.device_index() != stream.device_index()) {
    invalid(call, std::string(name) + " is memory of device " + std::to_string(where.device_index()) +
                      ", but the stream is on device " + std::to_string(stream.device_index()));
  }
}

/// The buffer overloads: sizes first (the spans rely on them), then each buffer against its span.
template <class B, class T>
void enqueue_buffers(const Call& call, typename B::StreamRef stream, GemmArgs<T> g, bool batched,
                     const Buffer<T, B>& a, std::int64_t offset_a, const Buffer<T, B>& b, std::int64_t offset_b,
                     Buffer<T, B>& c, std::int64_t offset_c) {
  check_sizes(call, g, batched);
  const std::int64_t batch = g.empty() ? 0 : g.batch;
  const bool reads = g.k > 0;  // k == 0: A and B are not read
  const std::int64_t span_a = reads ? extent(call, {"A", "lda", g.m, g.k, g.lda, g.ta}, g.stride_a, batch) : 0;
  const std::int64_t span_b = reads ? extent(call, {"B", "ldb", g.k, g.n, g.ldb, g.tb}, g.stride_b, batch) : 0;
  const std::int64_t span_c = extent(call, {"C", "ldc", g.m, g.n, g.ldc, Trans::no}, g.stride_c, batch);
  check_buffer(call, stream, "a", "offset_a", a, offset_a, span_a);
  check_buffer(call, stream, "b", "offset_b", b, offset_b, span_b);
  check_buffer(call, stream, "c", "offset_c", c, offset_c, span_c);
  g.a = span_a == 0 ? nullptr : a.data() + offset_a;
  g.b = span_b == 0 ? nullptr : b.data() + offset_b;
  g.c = span_c == 0 ? nullptr : c.data() + offset_c;
  check_epilogue(call, g);
  check_overlaps(call, g);
  if constexpr (has_gemm<B>) GemmImpl<B>::run(call, stream, g);  // else check_type has said why, alone
}

}  // namespace detail

/// C = alpha * op(A) * op(B) + beta * C on `stream` (row-major; see the top of this header).
template <Accelerator B, class T>
void gemm(const B& backend, typename B::StreamRef stream, Trans ta, Trans tb, std::int64_t m, std::int64_t n,
          std::int64_t k, float alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, float beta, T* c,
          std::int64_t ldc) {
  detail::check_type<B, T>();
  (void)backend;  // the policy is stateless: the stream says where the work runs
  const detail::Call call = detail::make_call<B>("gemm", stream);
  detail::enqueue<B>(call, stream,
                     detail::GemmArgs<T>{ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1}, false);
}

/// C_i = alpha * op(A_i) * op(B_i) + beta * C_i for i < batch_count, X_i = x + i * stride_x.
template <Accelerator B, class T>
void gemm_strided_batched(const B& backend, typename B::StreamRef stream, Trans ta, Trans tb, std::int64_t m,
                          std::int64_t n, std::int64_t k, float alpha, const T* a, std::int64_t lda,
                          std::int64_t stride_a, const T* b, std::int64_t ldb, std::int64_t stride_b, float beta, T* c,
                          std::int64_t ldc, std::int64_t stride_c, std::int64_t batch_count) {
  detail::check_type<B, T>();
  (void)backend;
  const detail::Call call = detail::make_call<B>("gemm_strided_batched", stream);
  detail::enqueue<B>(call, stream,
                     detail::GemmArgs<T>{ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                                         stride_c, batch_count},
                     true);
}

/// gemm over buffers: each operand starts `offset_x` elements into its buffer.
template <Accelerator B, class T>
void gemm(const B& backend, typename B::StreamRef stream, Trans ta, Trans tb, std::int64_t m, std::int64_t n,
          std::int64_t k, float alpha, const Buffer<T, B>& a, std::int64_t offset_a, std::int64_t lda,
          const Buffer<T, B>& b, std::int64_t offset_b, std::int64_t ldb, float beta, Buffer<T, B>& c,
          std::int64_t offset_c, std::int64_t ldc) {
  detail::check_type<B, T>();
  (void)backend;
  detail::enqueue_buffers<B>(detail::make_call<B>("gemm", stream), stream,
                             detail::GemmArgs<T>{ta, tb, m, n, k, alpha, nullptr, lda, 0, nullptr, ldb, 0, beta,
                                                 nullptr, ldc, 0, 1},
                             false, a, offset_a, b, offset_b, c, offset_c);
}

/// gemm_strided_batched over buffers: operand x's matrix i starts offset_x + i * stride_x elements in.
template <Accelerator B, class T>
void gemm_strided_batched(const B& backend, typename B::StreamRef stream, Trans ta, Trans tb, std::int64_t m,
                          std::int64_t n, std::int64_t k, float alpha, const Buffer<T, B>& a, std::int64_t offset_a,
                          std::int64_t lda, std::int64_t stride_a, const Buffer<T, B>& b, std::int64_t offset_b,
                          std::int64_t ldb, std::int64_t stride_b, float beta, Buffer<T, B>& c,
                          std::int64_t offset_c, std::int64_t ldc, std::int64_t stride_c, std::int64_t batch_count) {
  detail::check_type<B, T>();
  (void)backend;
  detail::enqueue_buffers<B>(detail::make_call<B>("gemm_strided_batched", stream), stream,
                             detail::GemmArgs<T>{ta, tb, m, n, k, alpha, nullptr, lda, stride_a, nullptr, ldb,
                                                 stride_b, beta, nullptr, ldc, stride_c, batch_count},
                             true, a, offset_a, b, offset_b, c, offset_c);
}

}  // namespace accel::blas
