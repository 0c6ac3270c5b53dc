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

// acc + the squares of a 16-byte word's elements, in element order (double products and sums).
__device__ __forceinline__ double add_squares(const uint4& w, int dtype, double acc) {
  const unsigned int u[4] = {w.x, w.y, w.z, w.w};
  if (dtype == ACCEL_DTYPE_F32) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const double x = __uint_as_float(u[k]);
      acc = fma(x, x, acc);
    }
    return acc;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const unsigned short lo = (unsigned short)(u[k] & 0xFFFFu), hi = (unsigned short)(u[k] >> 16);
    const double a = dtype == ACCEL_DTYPE_BF16 ? bf16_to_float(lo) : half_to_float(lo);
    const double b = dtype == ACCEL_DTYPE_BF16 ? bf16_to_float(hi) : half_to_float(hi);
    acc = fma(a, a, acc);
    acc = fma(b, b, acc);
  }
  return acc;
}
}  // namespace

// partials[c] = sum of squares of chunk c (blockDim.x must be a multiple of 32). A 16-byte aligned
// chunk is read in 16-byte words, each thread words t, t + blockDim, ... with eight loads in flight
// before their sums (one element per load left the kernel waiting on memory latency: on an H200 the
// norm of gpt2's 86 M bf16 gradients took ~0.15 ms, 4x its bytes' time); any other chunk, and the
// elements after the last whole word, one element at a time. The order of the sums depends only on
// the chunk and the block size: deterministic.
extern "C" __global__ void __launch_bounds__(512) accel_l2norm_partial(const __grid_constant__ accel_tensor_list l,
                                                                        double* partials) {
  const long long total = l.chunk_start[l.num_tensors];
  for (long long c = blockIdx.x; c < total; c += gridDim.x) {
    const int ti = find_tensor(l.chunk_start, l.num_tensors, c);
    const accel_tensor_ref& r = l.t[ti];
    const long long begin = (c - l.chunk_start[ti]) * l.chunk_size;
    const long long end = begin + l.chunk_size < r.numel ? begin + l.chunk_size : r.numel;
    const int esize = r.dtype == ACCEL_DTYPE_F32 ? 4 : 2, per_word = 16 / esize;
    const char* first = static_cast<const char*>(r.data) + begin * esize;
    double acc = 0;
    long long scalar_from = begin;
    if ((reinterpret_cast<unsigned long long>(first) & 15ull) == 0) {
      const uint4* words = reinterpret_cast<const uint4*>(first);
      const long long nw = (end - begin) / per_word, step = blockDim.x;
      constexpr int in_flight = 8;
      long long i = threadIdx.x;
      for (; i + (in_flight - 1) * step < nw; i += in_flight * step) {
        uint4 w[in_flight];
#pragma unroll
        for (int k = 0; k < in_flight; ++k) w[k] = words[i + k * step];
#pragma unroll
        for (int k = 0; k < in_flight; ++k) acc = add_squares(w[k], r.dtype, acc);
      }
      for (; i < nw; i += step) acc = add_squares(words[i], r.dtype, acc);
      scalar_from = begin + nw * per_word;
    }
    for (long long i = scalar_from + threadIdx.x; i < end; i += blockDim.x) {
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
