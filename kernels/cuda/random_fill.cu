// random_fill.cu — Philox4x32-10 fills on CUDA, compiled by NVRTC (the "random_fill" op builder) or
// nvcc (an ahead-of-time build): raw 32-bit words, uniform and normal floats and doubles, writing
// exactly what accel::rng::fill_bits / fill_uniform / fill_normal(span(out, n), seed, offset[, mean,
// stddev]) write on the host (cuRAND's PHILOX4_32_10 layout). The math and the indexing are the
// host's: accel/random/detail/block_fill.hpp (the op's include directory is accel's include/).
//
// Each thread computes one Philox block (a *unit*: 4 outputs of 32 bits or 2 of 64 bits, 16 bytes),
// grid-striding over the units of the fill; a unit that lies wholly inside the output is one 16-byte
// store when the output's alignment allows it (units_aligned()), else (and at both ends) one store
// per value. Any length, any offset, any element-aligned pointer.
//
// Graph-safe parameters (torch's Philox for CUDA graphs): when philox_state is not null the kernel
// reads seed = philox_state[0] and offset = philox_state[1] + intra_offset from device memory, so a
// captured launch draws new numbers on each replay after the host rewrites that memory; seed and
// offset are then ignored. Launch with any grid of up to 512 threads per block: max_units(n) units at
// most (the host launches one wave of 512-thread blocks: 1.6 % faster than 256-thread blocks on an H100).
#include <accel/random/detail/block_fill.hpp>

namespace {

using namespace accel::rng;
using namespace accel::rng::detail;

__device__ __forceinline__ void store16(unsigned int* p, const unsigned int* v) {
  *reinterpret_cast<uint4*>(p) = make_uint4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store16(float* p, const float* v) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store16(double* p, const double* v) {
  *reinterpret_cast<double2*>(p) = make_double2(v[0], v[1]);
}

template <class Transform>
__device__ __forceinline__ void fill(typename Transform::value_type* out, u64 n, u64 seed, u64 offset,
                                     const unsigned long long* philox_state, u64 intra_offset, Transform transform) {
  using T = typename Transform::value_type;
  if (philox_state != nullptr) {
    seed = philox_state[0];
    offset = philox_state[1] + intra_offset;
  }
  const BlockFill<Transform> f(out, n, seed, offset, transform);
  const bool vector = f.units_aligned();
  const u64 stride = static_cast<u64>(blockDim.x) * gridDim.x;
  const u64 end = f.end_unit();
  for (u64 u = f.first_unit() + static_cast<u64>(blockIdx.x) * blockDim.x + threadIdx.x; u < end; u += stride) {
    T v[Transform::per_block];
    f.compute(u, v);
    if (vector && f.whole(u)) {
      store16(f.unit_ptr(u), v);
    } else {
      f.store_partial(u, v);
    }
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(512)
    accel_random_bits(unsigned int* out, unsigned long long n, unsigned long long seed, unsigned long long offset,
                      const unsigned long long* philox_state, unsigned long long intra_offset) {
  fill(out, n, seed, offset, philox_state, intra_offset, BitsTransform{});
}

extern "C" __global__ void __launch_bounds__(512)
    accel_random_uniform_f32(float* out, unsigned long long n, unsigned long long seed, unsigned long long offset,
                             const unsigned long long* philox_state, unsigned long long intra_offset) {
  fill(out, n, seed, offset, philox_state, intra_offset, UniformFloatTransform{});
}

extern "C" __global__ void __launch_bounds__(512)
    accel_random_uniform_f64(double* out, unsigned long long n, unsigned long long seed, unsigned long long offset,
                             const unsigned long long* philox_state, unsigned long long intra_offset) {
  fill(out, n, seed, offset, philox_state, intra_offset, UniformDoubleTransform{});
}

extern "C" __global__ void __launch_bounds__(512)
    accel_random_normal_f32(float* out, unsigned long long n, unsigned long long seed, unsigned long long offset,
                            const unsigned long long* philox_state, unsigned long long intra_offset, float mean,
                            float stddev) {
  fill(out, n, seed, offset, philox_state, intra_offset, NormalFloatTransform{mean, stddev});
}

extern "C" __global__ void __launch_bounds__(512)
    accel_random_normal_f64(double* out, unsigned long long n, unsigned long long seed, unsigned long long offset,
                            const unsigned long long* philox_state, unsigned long long intra_offset, double mean,
                            double stddev) {
  fill(out, n, seed, offset, philox_state, intra_offset, NormalDoubleTransform{mean, stddev});
}
