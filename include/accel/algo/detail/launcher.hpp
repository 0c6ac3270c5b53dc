// accel/algo/detail/launcher.hpp — how accel's algorithms run on a backend: Launcher<B>.
//
//   Launcher<B>::run(algorithm, stream, fn)   calls fn(policy) in `stream` order, with a Thrust execution
//                                             policy whose temporaries come from B's caching allocator
// The CPU specialization (cpu_launch.hpp) works with any compiler; the CUDA one (cuda_launch.cuh)
// exists only in translation units compiled by nvcc.
#pragma once

#include <type_traits>

namespace accel::algo::detail {

template <class B>
inline constexpr bool no_launcher = false;

template <class B>
struct Launcher {
  static_assert(no_launcher<B>,
                "accel::algo: this backend has no algorithms in this translation unit. CudaBackend's algorithms "
                "run Thrust/CUB kernels: call them from a translation unit compiled by nvcc (a .cu file). "
                "CpuBackend's work with any compiler.");
};

}  // namespace accel::algo::detail
