// accel/blas.hpp — accel::blas: matrix products over device memory, on a stream (opt-in part).
//
//   gemm / gemm_strided_batched       blas/gemm.hpp   (pointers or Buffer<T, B> operands, row-major)
//   gemm_gelu / gemm_dgelu            blas/gemm_gelu.hpp (a GEMM with the GELU or its gradient fused in)
//   Trans                             blas/trans.hpp
//   set_num_threads / num_threads     blas/threads.hpp (the CPU BLAS's threads)
//
// CpuBackend runs oneDNN (sgemm; bf16: matmul) on the CPU stream; CudaBackend runs cuBLAS (loaded with dlopen on first
// use, so a program runs where CUDA is absent); AnyBackend runs the stream's backend. CMake: link
// accel::blas (it exists where configure found oneDNN: ACCEL_HAS_BLAS; ACCEL_ENABLE_BLAS=AUTO|ON|OFF;
// Debian: libdnnl-dev). accel/accel.hpp does not include this header.
#pragma once

#include <accel/blas/gemm.hpp>
#include <accel/blas/gemm_gelu.hpp>
#include <accel/blas/threads.hpp>
#include <accel/blas/trans.hpp>
