// accel/blas/detail/gemm_impl.hpp — how a GEMM runs on a backend: GemmImpl<B>.
//
//   GemmImpl<B>::supports<T>                  whether B multiplies matrices of T
//   GemmImpl<B>::run(call, stream, args)      enqueues args (checked already) on `stream`
// Specializations: CpuBackend (cpu_gemm.hpp), CudaBackend (cuda_gemm.hpp), BasicAnyBackend
// (any_gemm.hpp). A user's own backend adds one.
#pragma once

namespace accel::blas::detail {

/// A backend without a specialization has no GEMM: it supports no type and has no run(). It is not an
/// error by itself — an AnyBackend listing such a backend still multiplies on the others (a call on its
/// stream is a NotSupportedError) — a GEMM called on it directly is, at check_type (gemm.hpp).
template <class B>
struct GemmImpl {
  static constexpr bool no_specialization = true;
  template <class T>
  static constexpr bool supports = false;
};

/// Whether B has a GEMM of its own (GemmImpl<B> is specialized).
template <class B>
inline constexpr bool has_gemm = !requires { GemmImpl<B>::no_specialization; };

}  // namespace accel::blas::detail
