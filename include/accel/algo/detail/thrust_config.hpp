// accel/algo/detail/thrust_config.hpp — CCCL (Thrust, CUB, libcu++) for accel/algo, checked once.
#pragma once

#if !__has_include(<thrust/version.h>)
#error "accel/algo needs CCCL's Thrust and CUB headers (the CUDA toolkit's include/cccl, or CCCL from \
github.com/NVIDIA/cccl). With CMake, accel::accel carries them when configure found them (ACCEL_HAS_ALGO; \
see ACCEL_CCCL_INCLUDE_DIR); otherwise add -isystem <cuda>/include/cccl."
#else

// Thrust's default device system is CUDA, whose headers need the CUDA runtime's. A host-compiled
// translation unit without them (a CPU-only machine with a standalone CCCL) selects the CPP device
// system instead; accel/algo never uses thrust::device, so this changes nothing else it relies on.
#if !defined(__CUDACC__) && !defined(THRUST_DEVICE_SYSTEM) && !__has_include(<cuda_runtime_api.h>)
#define THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_CPP
#endif

#include <thrust/version.h>

#if THRUST_VERSION < 200000
#error "accel/algo needs CCCL 2.0 or newer (Thrust 2.x: par_nosync and allocator-aware policies)"
#endif

#endif  // CCCL found
