// accel/blas/detail/gemm_impl.hpp — how a GEMM runs on a backend: GemmImpl<B>.
//
//   GemmImpl<B>::supports<T>                  whether B multiplies matrices of T
//   GemmImpl<B>::run(call, stream, args)      enqueues args (checked already) on `stream`
// Specializations: CpuBackend (cpu_gemm.hpp), CudaBackend (cuda_gemm.hpp), BasicAnyBackend
// (any_gemm.hpp). A user's own backend adds one.
#pragma once

namespace accel::blas::detail {

template <class B>
inline constexpr bool no_gemm = false;

template <class B>
struct GemmImpl {
  static_assert(no_gemm<B>,
                "accel::blas: this backend has no GEMM. accel::blas runs on CpuBackend, CudaBackend and AnyBackend; "
                "a backend of your own specializes accel::blas::detail::GemmImpl");
};

}  // namespace accel::blas::detail
