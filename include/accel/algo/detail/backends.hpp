// accel/algo/detail/backends.hpp — the launchers available in this translation unit: CpuBackend's
// always, CudaBackend's when nvcc compiles it (and the build has CUDA).
#pragma once

#include <accel/algo/detail/cpu_launch.hpp>
#if defined(__CUDACC__) && defined(ACCEL_HAS_CUDA)
#include <accel/algo/detail/cuda_launch.cuh>
#endif
