// accel/cuda/detail/cuda_api.hpp — the one place the CUDA backend includes the CUDA runtime API.
//
// Host code only: <cuda_runtime_api.h> declares the runtime's C API without device code, so every
// header of accel/cuda/ compiles with the host compiler. A build without the CUDA toolkit (no
// ACCEL_HAS_CUDA) stops here with a message instead of a missing-header error deep in a header.
#pragma once

#if !defined(ACCEL_HAS_CUDA)
#error "accel/cuda/* needs the CUDA toolkit: this build has no CUDA (ACCEL_HAS_CUDA is not defined). \
Configure accel with CUDA found (ACCEL_ENABLE_CUDA=AUTO|ON), link accel::accel, or use accel::CpuBackend."
#else
#include <cuda_runtime_api.h>
#endif
