// blas.hpp — the engine's matrix products: accel::blas (oneDNN's sgemm on the CPU, OpenBLAS for the weight
// gradients' 'T','N' products on CPUs without AVX-512; cuBLAS on CUDA;
// CMake target accel::blas). accel.hpp comes first: accel/blas's AnyBackend path names std::get of
// <variant> where it is defined.
#pragma once

#include <accel/accel.hpp>
#include <accel/blas.hpp>
