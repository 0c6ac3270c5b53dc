// tensor_ops.cu — fill, copy/cast (float32/float16/bfloat16), scale, multi-tensor L2 norm and
// isfinite on CUDA, compiled by NVRTC (the "tensor_ops" op builder) or nvcc. Dtypes are run-time
// arguments (uniform branches). The L2 norm is deterministic: accel_l2norm_partial writes one double
// per chunk (a fixed-order block reduction), accel_l2norm_finalize (one block) adds them in order.
#include "cuda_common.cuh"

using namespace accel_kernels;

extern "C" __global__ void accel_fill(void* dst, int dtype, long long n, float value) {
  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) store_dyn(dst, dtype, i, value);
}

// dst[i] = src[i] * scale (scale 1: cast / copy). dst may equal src.
extern "C" __global__ void accel_scale(void* dst, int dst_dtype, const void* src, int src_dtype, long long n,
                                       float scale) {
  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    const float x = load_dyn(src, src_dtype, i);
    store_dyn(dst, dst_dtype, i, scale == 1.0f ? x : __fmul_rn(x, scale));
  }
}

namespace {
// Sum over the block of one double per thread; thread 0 gets the result. Fixed order: deterministic.
__device__ double block_sum(double x) {
  __shared__ double warp_sums[32];
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_down_sync(0xFFFFFFFFu, x, offset);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = x;
  __syncthreads();
  double total = 0;
  if (threadIdx.x == 0) {
    const int warps = (blockDim.x + 31) >> 5;
    for (int w = 0; w < warps; ++w) total += warp_sums[w];
  }
  __syncthreads();
  return total;
}
}  // namespace

// partials[c] = sum of squares of chunk c (blockDim.x must be a multiple of 32).
extern "C" __global__ void __launch_bounds__(512) accel_l2norm_partial(const __grid_constant__ accel_tensor_list l,
                                                                        double* partials) {
  const long long total = l.chunk_start[l.num_tensors];
  for (long long c = blockIdx.x; c < total; c += gridDim.x) {
    const int ti = find_tensor(l.chunk_start, l.num_tensors, c);
    const accel_tensor_ref& r = l.t[ti];
    const long long begin = (c - l.chunk_start[ti]) * l.chunk_size;
    const long long end = begin + l.chunk_size < r.numel ? begin + l.chunk_size : r.numel;
    double acc = 0;
    for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const double x = load_dyn(r.data, r.dtype, i);
      acc = fma(x, x, acc);
    }
    const double s = block_sum(acc);
    if (threadIdx.x == 0) partials[c] = s;
  }
}

// One block: per_tensor[i] (if not null) and *total from the chunk partials, in a fixed order.
extern "C" __global__ void __launch_bounds__(512) accel_l2norm_finalize(const __grid_constant__ accel_tensor_list l,
                                                                         const double* partials, float* total_norm,
                                                                         float* per_tensor, int accumulate) {
  double total = 0;
  for (int i = 0; i < l.num_tensors; ++i) {
    double acc = 0;
    for (long long c = l.chunk_start[i] + threadIdx.x; c < l.chunk_start[i + 1]; c += blockDim.x) acc += partials[c];
    const double s = block_sum(acc);
    if (threadIdx.x == 0) {
      if (per_tensor != 0) per_tensor[i] = (float)sqrt(s);
      total += s;
    }
  }
  if (threadIdx.x == 0) {
    /* accumulate: *total_norm holds the sum of squares of earlier launches (as a float bit pattern
       is not enough precision, the host passes it through partials[-1]; see cuda/ops.hpp). */
    if (accumulate) total += partials[-1];
    *total_norm = (float)sqrt(total);
    ((double*)partials)[-1] = total;
  }
}

// *all_finite is set to 0 when any element is inf or NaN (the host sets it to 1 first).
extern "C" __global__ void accel_isfinite(const __grid_constant__ accel_tensor_list l, int* all_finite) {
  const long long total = l.chunk_start[l.num_tensors];
  for (long long c = blockIdx.x; c < total; c += gridDim.x) {
    const int ti = find_tensor(l.chunk_start, l.num_tensors, c);
    const accel_tensor_ref& r = l.t[ti];
    const long long begin = (c - l.chunk_start[ti]) * l.chunk_size;
    const long long end = begin + l.chunk_size < r.numel ? begin + l.chunk_size : r.numel;
    int bad = 0;
    if (r.dtype == ACCEL_DTYPE_F32) {
      const unsigned int* x = (const unsigned int*)r.data;
      for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) bad |= (x[i] & 0x7F800000u) == 0x7F800000u;
    } else {
      const unsigned short* x = (const unsigned short*)r.data;
      const unsigned short mask = r.dtype == ACCEL_DTYPE_F16 ? 0x7C00u : 0x7F80u;
      for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) bad |= (x[i] & mask) == mask;
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0) *all_finite = 0;
  }
}
