// accel/blas/gemm_gelu.hpp — accel::blas::gemm_gelu and gemm_dgelu: a GEMM with the GELU (tanh form)
// or its gradient applied to the product before it is stored — the MLP of a transformer without a
// separate pass over its widest activation, forward and backward.
//
//   gemm_gelu(backend, stream, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, aux, ldaux)
//       P = alpha * op(A) * op(B) + beta * C;  C = GELU(P);  aux = P  (aux may be null: P is not kept)
//   gemm_dgelu(backend, stream, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, aux, ldaux)
//       C = (alpha * op(A) * op(B) + beta * C) * GELU'(aux)   (aux: the P a gemm_gelu wrote; read only)
//   ... and the same over Buffer<T, B> operands, each at an offset (aux required there).
//
// GELU(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): GPT-2's, torch's approximate='tanh',
// cuBLASLt's. Layout, element types, stream order and graph capture as accel::blas::gemm
// (blas/gemm.hpp); a single GEMM (no batch). aux is m x n with row stride ldaux, of C's element type.
//
// Checked at the call, before anything is enqueued, as InvalidArgumentError naming the argument: all of
// gemm's checks, and k >= 1, ldaux >= n and a multiple of 8, aux 16-byte aligned (cuBLASLt's rules,
// kept on every backend so that code which runs on one runs on all), aux not overlapping C (nor, for
// gemm_gelu, which writes it, A or B), aux not null for gemm_dgelu, and for Buffer operands aux's
// buffer holding its span on the stream's device.
//
//   CpuBackend   the GEMM (blas/gemm.hpp), then a pass over C in the same task (detail/cpu_epilogue.hpp);
//                16-bit C: the epilogue reads the product as stored (rounded once) and rounds again
//   CudaBackend  cuBLASLt's GELU_AUX / GELU / DGELU epilogues on the float accumulator, inside the GEMM's
//                kernel (detail/cuda_epilogue.hpp); cuBLASLt is loaded on first use. Its tanh is less
//                exact than the CPU's: float C within 5e-6 (GELU) and 2.5e-5 (its gradient) of the exact
//                form, relative to max(1, |C|), on an H200 with CUDA 13.0 (the CPU: 2e-7); aux is exact
//   AnyBackend   the stream's backend
#pragma once

#include <accel/blas/gemm.hpp>

#include <cstdint>

namespace accel::blas {

namespace detail {

/// Checks aux's stride and buffer, then the product's operands as gemm's buffer overload does.
template <class B, class T>
void enqueue_epilogue_buffers(const Call& call, typename B::StreamRef stream, GemmArgs<T> g, const Buffer<T, B>& a,
                              std::int64_t offset_a, const Buffer<T, B>& b, std::int64_t offset_b, Buffer<T, B>& c,
                              std::int64_t offset_c, const Buffer<T, B>& aux, std::int64_t offset_aux) {
  check_sizes(call, g, false);
  check_aux_stride(call, g);
  const std::int64_t span_aux = extent(call, {"aux", "ldaux", g.m, g.n, g.ldaux, Trans::no}, 0, 1);
  check_buffer(call, stream, "aux", "offset_aux", aux, offset_aux, span_aux);
  g.aux = span_aux == 0 ? nullptr : const_cast<T*>(aux.data()) + offset_aux;  // dgelu reads it only
  enqueue_buffers<B>(call, stream, g, false, a, offset_a, b, offset_b, c, offset_c);
}

}  // namespace detail

/// C = GELU(alpha * op(A) * op(B) + beta * C); aux (when not null) receives the product before the GELU.
template <Accelerator B, class T>
void gemm_gelu(const B& backend, typename B::StreamRef stream, Trans ta, Trans tb, std::int64_t m, std::int64_t n,
               std::int64_t k, float alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, float beta, T* c,
               std::int64_t ldc, T* aux, std::int64_t ldaux) {
  detail::check_type<B, T>();
  (void)backend;
  detail::enqueue<B>(detail::make_call<B>("gemm_gelu", stream), stream,
                     detail::GemmArgs<T>{ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1,
                                         detail::Epilogue::gelu, aux, ldaux},
                     false);
}

/// C = (alpha * op(A) * op(B) + beta * C) * GELU'(aux), aux the pre-activation gemm_gelu kept.
template <Accelerator B, class T>
void gemm_dgelu(const B& backend, typename B::StreamRef stream, Trans ta, Trans tb, std::int64_t m, std::int64_t n,
                std::int64_t k, float alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, float beta,
                T* c, std::int64_t ldc, const T* aux, std::int64_t ldaux) {
  detail::check_type<B, T>();
  (void)backend;
  detail::enqueue<B>(detail::make_call<B>("gemm_dgelu", stream), stream,
                     detail::GemmArgs<T>{ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1,
                                         detail::Epilogue::dgelu, const_cast<T*>(aux), ldaux},
                     false);
}

/// gemm_gelu over buffers: each operand, aux included, starts `offset_x` elements into its buffer.
template <Accelerator B, class T>
void gemm_gelu(const B& backend, typename B::StreamRef stream, Trans ta, Trans tb, std::int64_t m, std::int64_t n,
               std::int64_t k, float alpha, const Buffer<T, B>& a, std::int64_t offset_a, std::int64_t lda,
               const Buffer<T, B>& b, std::int64_t offset_b, std::int64_t ldb, float beta, Buffer<T, B>& c,
               std::int64_t offset_c, std::int64_t ldc, Buffer<T, B>& aux, std::int64_t offset_aux,
               std::int64_t ldaux) {
  detail::check_type<B, T>();
  (void)backend;
  detail::enqueue_epilogue_buffers<B>(
      detail::make_call<B>("gemm_gelu", stream), stream,
      detail::GemmArgs<T>{ta, tb, m, n, k, alpha, nullptr, lda, 0, nullptr, ldb, 0, beta, nullptr, ldc, 0, 1,
                          detail::Epilogue::gelu, nullptr, ldaux},
      a, offset_a, b, offset_b, c, offset_c, aux, offset_aux);
}

/// gemm_dgelu over buffers.
template <Accelerator B, class T>
void gemm_dgelu(const B& backend, typename B::StreamRef stream, Trans ta, Trans tb, std::int64_t m, std::int64_t n,
                std::int64_t k, float alpha, const Buffer<T, B>& a, std::int64_t offset_a, std::int64_t lda,
                const Buffer<T, B>& b, std::int64_t offset_b, std::int64_t ldb, float beta, Buffer<T, B>& c,
                std::int64_t offset_c, std::int64_t ldc, const Buffer<T, B>& aux, std::int64_t offset_aux,
                std::int64_t ldaux) {
  detail::check_type<B, T>();
  (void)backend;
  detail::enqueue_epilogue_buffers<B>(
      detail::make_call<B>("gemm_dgelu", stream), stream,
      detail::GemmArgs<T>{ta, tb, m, n, k, alpha, nullptr, lda, 0, nullptr, ldb, 0, beta, nullptr, ldc, 0, 1,
                          detail::Epilogue::dgelu, nullptr, ldaux},
      a, offset_a, b, offset_b, c, offset_c, aux, offset_aux);
}

}  // namespace accel::blas
