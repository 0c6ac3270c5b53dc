// cuda_common.cuh — helpers shared by accel's CUDA kernels. No includes beyond accel_ops_abi.h, so the
// same source compiles under NVRTC (the op builders' JIT) and nvcc (an ahead-of-time build).
//
// Conversions are integer code with the same bits as the CPU kernels and accel::half/bfloat16 (round
// to nearest even, subnormals kept, NaNs quiet with their payload), so both backends agree exactly.
#pragma once

#include "accel_ops_abi.h"

namespace accel_kernels {

struct f32 {};
struct f16 {};
struct bf16 {};
struct none {};

__device__ __forceinline__ float bf16_to_float(unsigned short b) { return __uint_as_float(((unsigned int)b) << 16); }
__device__ __forceinline__ unsigned short float_to_bf16(float f) {
  const unsigned int u = __float_as_uint(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (unsigned short)((u >> 16) | 0x40u);
  return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float half_to_float(unsigned short h) {
  const unsigned int sign = ((unsigned int)(h & 0x8000u)) << 16;
  unsigned int o = ((unsigned int)(h & 0x7FFFu)) << 13;
  const unsigned int exp = o & 0x0F800000u;
  o += (127u - 15u) << 23;
  if (exp == 0x0F800000u) {
    o += (128u - 16u) << 23;
    if ((o & 0x007FFFFFu) != 0) o |= 0x00400000u;
  } else if (exp == 0) {
    o += 1u << 23;
    o = __float_as_uint(__uint_as_float(o) - __uint_as_float(113u << 23));
  }
  return __uint_as_float(o | sign);
}
__device__ __forceinline__ unsigned short float_to_half(float f) {
  unsigned int u = __float_as_uint(f);
  const unsigned int sign = (u >> 16) & 0x8000u;
  u &= 0x7FFFFFFFu;
  unsigned int o;
  if (u >= (143u << 23)) {
    o = u > 0x7F800000u ? (0x7E00u | ((u >> 13) & 0x3FFu)) : 0x7C00u;
  } else if (u < (113u << 23)) {
    const unsigned int magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    o = __float_as_uint(__fadd_rn(__uint_as_float(u), __uint_as_float(magic))) - magic;
  } else {
    const unsigned int odd = (u >> 13) & 1u;
    u += ((unsigned int)(15 - 127) << 23) + 0xFFFu + odd;
    o = u >> 13;
  }
  return (unsigned short)(o | sign);
}

template <class T> struct storage;
template <> struct storage<f32> { typedef float type; };
template <> struct storage<f16> { typedef unsigned short type; };
template <> struct storage<bf16> { typedef unsigned short type; };

__device__ __forceinline__ float to_f(float x, f32) { return x; }
__device__ __forceinline__ float to_f(unsigned short x, f16) { return half_to_float(x); }
__device__ __forceinline__ float to_f(unsigned short x, bf16) { return bf16_to_float(x); }
__device__ __forceinline__ float from_f(float x, f32) { return x; }
__device__ __forceinline__ unsigned short from_f(float x, f16) { return float_to_half(x); }
__device__ __forceinline__ unsigned short from_f(float x, bf16) { return float_to_bf16(x); }

/* Loads/stores of 4 consecutive elements (index a multiple of 4, base 4-element aligned). */
template <class T>
__device__ __forceinline__ void load4(const void* base, long long i, float (&out)[4]) {
  const float4 v = reinterpret_cast<const float4*>(base)[i >> 2];
  out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
}
template <>
__device__ __forceinline__ void load4<f16>(const void* base, long long i, float (&out)[4]) {
  const uint2 v = reinterpret_cast<const uint2*>(base)[i >> 2];
  out[0] = half_to_float((unsigned short)(v.x & 0xFFFFu)); out[1] = half_to_float((unsigned short)(v.x >> 16));
  out[2] = half_to_float((unsigned short)(v.y & 0xFFFFu)); out[3] = half_to_float((unsigned short)(v.y >> 16));
}
template <>
__device__ __forceinline__ void load4<bf16>(const void* base, long long i, float (&out)[4]) {
  const uint2 v = reinterpret_cast<const uint2*>(base)[i >> 2];
  out[0] = bf16_to_float((unsigned short)(v.x & 0xFFFFu)); out[1] = bf16_to_float((unsigned short)(v.x >> 16));
  out[2] = bf16_to_float((unsigned short)(v.y & 0xFFFFu)); out[3] = bf16_to_float((unsigned short)(v.y >> 16));
}
template <class T>
__device__ __forceinline__ void store4(void* base, long long i, const float (&in)[4]) {
  reinterpret_cast<float4*>(base)[i >> 2] = make_float4(in[0], in[1], in[2], in[3]);
}
template <class T>
__device__ __forceinline__ void store4_16(void* base, long long i, const float (&in)[4]) {
  uint2 v;
  v.x = (unsigned int)from_f(in[0], T()) | ((unsigned int)from_f(in[1], T()) << 16);
  v.y = (unsigned int)from_f(in[2], T()) | ((unsigned int)from_f(in[3], T()) << 16);
  reinterpret_cast<uint2*>(base)[i >> 2] = v;
}
template <>
__device__ __forceinline__ void store4<f16>(void* base, long long i, const float (&in)[4]) { store4_16<f16>(base, i, in); }
template <>
__device__ __forceinline__ void store4<bf16>(void* base, long long i, const float (&in)[4]) { store4_16<bf16>(base, i, in); }

/* Loads/stores of 8 consecutive 16-bit elements in one 16-byte access (index a multiple of 8, base
   16-byte aligned). */
template <class T>
__device__ __forceinline__ void load8_16(const void* base, long long i, float (&out)[8]) {
  const uint4 v = reinterpret_cast<const uint4*>(base)[i >> 3];
  const unsigned int w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    out[2 * k] = to_f((unsigned short)(w[k] & 0xFFFFu), T());
    out[2 * k + 1] = to_f((unsigned short)(w[k] >> 16), T());
  }
}
template <class T>
__device__ __forceinline__ void store8_16(void* base, long long i, const float (&in)[8]) {
  unsigned int w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    w[k] = (unsigned int)from_f(in[2 * k], T()) | ((unsigned int)from_f(in[2 * k + 1], T()) << 16);
  }
  reinterpret_cast<uint4*>(base)[i >> 3] = make_uint4(w[0], w[1], w[2], w[3]);
}

/* N (4 or 8) consecutive elements of T: 16-byte accesses where the type allows (8 16-bit elements in
   one, 8 floats in two), else load4/store4. Index a multiple of N, base aligned to aligned_n<T, N>. */
template <class T, int N>
__device__ __forceinline__ void load_n(const void* base, long long i, float (&out)[N]) {
  if constexpr (N == 4) {
    load4<T>(base, i, out);
  } else if constexpr (sizeof(typename storage<T>::type) == 2) {
    load8_16<T>(base, i, out);
  } else {
    load4<T>(base, i, *reinterpret_cast<float(*)[4]>(&out[0]));
    load4<T>(base, i + 4, *reinterpret_cast<float(*)[4]>(&out[4]));
  }
}
template <class T, int N>
__device__ __forceinline__ void store_n(void* base, long long i, const float (&in)[N]) {
  if constexpr (N == 4) {
    store4<T>(base, i, in);
  } else if constexpr (sizeof(typename storage<T>::type) == 2) {
    store8_16<T>(base, i, in);
  } else {
    store4<T>(base, i, *reinterpret_cast<const float(*)[4]>(&in[0]));
    store4<T>(base, i + 4, *reinterpret_cast<const float(*)[4]>(&in[4]));
  }
}
/* Whether load_n/store_n<T, N> may use base: aligned to N elements, at most 16 bytes. */
template <class T, int N>
__device__ __forceinline__ bool aligned_n(const void* p) {
  const unsigned long long bytes = sizeof(typename storage<T>::type) * N < 16 ? sizeof(typename storage<T>::type) * N : 16;
  return (reinterpret_cast<unsigned long long>(p) & (bytes - 1)) == 0;
}

template <class T>
__device__ __forceinline__ float load1(const void* base, long long i) {
  return to_f(reinterpret_cast<const typename storage<T>::type*>(base)[i], T());
}
template <class T>
__device__ __forceinline__ void store1(void* base, long long i, float x) {
  reinterpret_cast<typename storage<T>::type*>(base)[i] = from_f(x, T());
}

__device__ __forceinline__ float load_dyn(const void* base, int dtype, long long i) {
  if (dtype == ACCEL_DTYPE_F16) return load1<f16>(base, i);
  if (dtype == ACCEL_DTYPE_BF16) return load1<bf16>(base, i);
  return load1<f32>(base, i);
}
__device__ __forceinline__ void store_dyn(void* base, int dtype, long long i, float x) {
  if (dtype == ACCEL_DTYPE_F16) store1<f16>(base, i, x);
  else if (dtype == ACCEL_DTYPE_BF16) store1<bf16>(base, i, x);
  else store1<f32>(base, i, x);
}

/* The tensor whose chunk range holds chunk c: largest i with chunk_start[i] <= c. */
__device__ __forceinline__ int find_tensor(const long long* chunk_start, int count, long long c) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (chunk_start[mid] <= c) lo = mid; else hi = mid - 1;
  }
  return lo;
}

}  // namespace accel_kernels

// The module's ABI tag: an ahead-of-time cubin whose tag is not the loading accel's ABI version is not
// used (ops::cubin_abi_problem reads it from the cubin's ELF symbols, no device needed).
extern "C" __device__ const int accel_ops_abi_version = ACCEL_OPS_ABI_VERSION;
