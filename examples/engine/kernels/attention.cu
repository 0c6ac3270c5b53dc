// attention.cu — the engine's causal multi-head self-attention on CUDA (float32, bfloat16 and float16 storage,
// fp32 arithmetic), compiled by NVRTC through the engine's op builder. Arguments: attention.h.
//
// One block per (query row i, head h, batch b) — grid (T, NH, B) — with the row's scores in dynamic
// shared memory (T floats): simple and exact rather than fast (a flash-attention kernel is the next
// step for large T). The backward pass is two kernels: per query row, dS and dq (dS kept in scratch);
// then per key row j, dk and dv as sums over the rows i >= j in order. No atomics: the results do not
// depend on the schedule.
#include "attention.h"

namespace {

struct f32 {};
struct bf16 {};
struct f16 {};

__device__ __forceinline__ float ld(const void* p, long long i, f32) { return static_cast<const float*>(p)[i]; }
__device__ __forceinline__ float ld(const void* p, long long i, bf16) {
  return __uint_as_float(((unsigned int)static_cast<const unsigned short*>(p)[i]) << 16);
}
// float16: the PTX conversions (exact widening; narrowing rounds to nearest even, subnormals kept). On the
// CPU (GPT_FLASH_HOST: tests/engine/flash_host.hpp) accel's conversions, which round the same way.
#ifndef GPT_FLASH_HOST
__device__ __forceinline__ float ld(const void* p, long long i, f16) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(static_cast<const unsigned short*>(p)[i]));
  return f;
}
__device__ __forceinline__ void st(void* p, long long i, float x, f16) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  static_cast<unsigned short*>(p)[i] = h;
}
// A row's scores: the launch's dynamic shared memory (T floats).
#define GPT_ROW_SCORES(name) extern __shared__ float name[]
#else
__device__ __forceinline__ float ld(const void* p, long long i, f16) {
  return ::flash_host::from_f16(static_cast<const unsigned short*>(p)[i]);
}
__device__ __forceinline__ void st(void* p, long long i, float x, f16) {
  static_cast<unsigned short*>(p)[i] = ::flash_host::to_f16(x);
}
#define GPT_ROW_SCORES(name) float* name = ::cuda_host::dynamic_shared<float>()
#endif
__device__ __forceinline__ void st(void* p, long long i, float x, f32) { static_cast<float*>(p)[i] = x; }
__device__ __forceinline__ void st(void* p, long long i, float x, bf16) {
  const unsigned int u = __float_as_uint(x);
  const unsigned short b = (u & 0x7FFFFFFFu) > 0x7F800000u ? (unsigned short)((u >> 16) | 0x40u)
                                                           : (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  static_cast<unsigned short*>(p)[i] = b;
}

// Block-wide sum / max of one value per thread (blockDim.x a multiple of 32, at most 1024).
__device__ float block_reduce(float x, bool is_max) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) {
    const float y = __shfl_xor_sync(0xFFFFFFFFu, x, o);
    x = is_max ? fmaxf(x, y) : __fadd_rn(x, y);
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) partial[warp] = x;
  __syncthreads();
  float r = partial[0];
  for (int w = 1; w < warps; ++w) r = is_max ? fmaxf(r, partial[w]) : __fadd_rn(r, partial[w]);
  return r;
}

__device__ __forceinline__ float mask(const gpt_attention_args& a, long long idx) {
  return a.bits == nullptr ? 1.0f : (a.bits[idx] >= a.threshold ? a.scale : 0.0f);
}

template <class D>
__device__ void forward(const gpt_attention_args& a) {
  GPT_ROW_SCORES(s);
  const long long i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const long long T = a.T, C = a.C, hs = C / a.NH, ld3 = 3 * C;
  const long long qi = (b * T + i) * ld3 + h * hs;
  const long long bh = b * a.NH + h;
  const float scale = rsqrtf((float)hs);
  for (long long j = threadIdx.x; j <= i; j += blockDim.x) {
    const long long kj = (b * T + j) * ld3 + C + h * hs;
    float dot = 0;
    for (long long d = 0; d < hs; ++d) dot = __fmaf_rn(ld(a.qkv, qi + d, D()), ld(a.qkv, kj + d, D()), dot);
    s[j] = __fmul_rn(dot, scale);
  }
  __syncthreads();
  float mx = -3.402823466e38f;
  for (long long j = threadIdx.x; j <= i; j += blockDim.x) mx = fmaxf(mx, s[j]);
  mx = block_reduce(mx, true);
  float sum = 0;
  for (long long j = threadIdx.x; j <= i; j += blockDim.x) {
    const float e = expf(__fsub_rn(s[j], mx));
    s[j] = e;
    sum = __fadd_rn(sum, e);
  }
  sum = block_reduce(sum, false);
  const float inv = __fdiv_rn(1.0f, sum);
  const long long Tp = GPT_ATT_TP(T);
  float* att = a.att + (bh * Tp + i) * Tp;
  for (long long j = threadIdx.x; j < Tp; j += blockDim.x) {
    const float p = j <= i ? __fmul_rn(s[j], inv) : 0.0f;  // zeros past the diagonal (attention.h)
    att[j] = p;
    if (j <= i) s[j] = __fmul_rn(p, mask(a, (bh * T + i) * T + j));
  }
  if (i == T - 1) {  // the padding rows
    for (long long j = threadIdx.x; j < (Tp - T) * Tp; j += blockDim.x) a.att[(bh * Tp + T) * Tp + j] = 0.0f;
  }
  __syncthreads();
  for (long long d = threadIdx.x; d < hs; d += blockDim.x) {
    float acc = 0;
    for (long long j = 0; j <= i; ++j) acc = __fmaf_rn(s[j], ld(a.qkv, (b * T + j) * ld3 + 2 * C + h * hs + d, D()), acc);
    st(a.y, (b * T + i) * C + h * hs + d, acc, D());
  }
}

// Per query row i: dS[i][j] = P (dP - sum_j P dP) into scratch, and dq_i.
template <class D>
__device__ void backward_rows(const gpt_attention_args& a) {
  GPT_ROW_SCORES(s);
  const long long i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const long long T = a.T, C = a.C, hs = C / a.NH, ld3 = 3 * C;
  const long long bh = b * a.NH + h;
  const long long Tp = GPT_ATT_TP(T);
  const float* p = a.att + (bh * Tp + i) * Tp;
  const long long dyi = (b * T + i) * C + h * hs;
  float part = 0;
  for (long long j = threadIdx.x; j <= i; j += blockDim.x) {
    const long long vj = (b * T + j) * ld3 + 2 * C + h * hs;
    float dot = 0;
    for (long long d = 0; d < hs; ++d) dot = __fmaf_rn(ld(a.dy, dyi + d, D()), ld(a.qkv, vj + d, D()), dot);
    const float dp = __fmul_rn(dot, mask(a, (bh * T + i) * T + j));
    s[j] = dp;
    part = __fmaf_rn(p[j], dp, part);
  }
  const float dsum = block_reduce(part, false);
  float* ds = a.scratch + (bh * Tp + i) * Tp;
  for (long long j = threadIdx.x; j <= i; j += blockDim.x) {
    const float v = __fmul_rn(p[j], __fsub_rn(s[j], dsum));
    s[j] = v;
    ds[j] = v;
  }
  __syncthreads();
  const float scale = rsqrtf((float)hs);
  for (long long d = threadIdx.x; d < hs; d += blockDim.x) {
    float acc = 0;
    for (long long j = 0; j <= i; ++j) acc = __fmaf_rn(s[j], ld(a.qkv, (b * T + j) * ld3 + C + h * hs + d, D()), acc);
    st(a.dqkv, (b * T + i) * ld3 + h * hs + d, __fmul_rn(acc, scale), D());
  }
}

// Per key row j: dk_j = scale sum_{i >= j} dS[i][j] q_i, dv_j = sum_{i >= j} Pd[i][j] dy_i.
template <class D>
__device__ void backward_cols(const gpt_attention_args& a) {
  const long long j = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const long long T = a.T, C = a.C, hs = C / a.NH, ld3 = 3 * C;
  const long long bh = b * a.NH + h, Tp = GPT_ATT_TP(T);
  const float scale = rsqrtf((float)hs);
  for (long long d = threadIdx.x; d < hs; d += blockDim.x) {
    float dk = 0, dv = 0;
    for (long long i = j; i < T; ++i) {
      const long long idx = (bh * Tp + i) * Tp + j;
      dk = __fmaf_rn(a.scratch[idx], ld(a.qkv, (b * T + i) * ld3 + h * hs + d, D()), dk);
      dv = __fmaf_rn(__fmul_rn(a.att[idx], mask(a, (bh * T + i) * T + j)), ld(a.dy, (b * T + i) * C + h * hs + d, D()), dv);
    }
    st(a.dqkv, (b * T + j) * ld3 + C + h * hs + d, __fmul_rn(dk, scale), D());
    st(a.dqkv, (b * T + j) * ld3 + 2 * C + h * hs + d, dv, D());
  }
}

// ---- the GEMM path's kernels (attention.h) ----

template <class D>
__device__ void head_permute(const gpt_permute_args& a) {
  const long long hs = a.C / a.NH, width = a.parts * a.C, total = a.B * a.T * width;
  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += stride) {
    const long long r = e / width, col = e - r * width;
    const long long part = col / a.C, c = col - part * a.C, h = c / hs, d = c - h * hs;
    const long long b = r / a.T, t = r - b * a.T;
    const long long hi = ((b * a.NH + h) * a.T + t) * hs + d;
    if (a.to_tokens != 0) {
      st(a.tokens, e, ld(a.heads[part], hi, D()), D());
    } else {
      st(a.heads[part], hi, ld(a.tokens, e, D()), D());
    }
  }
}

__device__ __forceinline__ float softmax_mask(const gpt_softmax_args& a, long long idx) {
  return a.bits == nullptr ? 1.0f : (a.bits[idx] >= a.threshold ? a.scale : 0.0f);
}

// One warp per row (8 rows per 256-thread block).
template <class D>
__device__ void softmax_forward(const gpt_softmax_args& a) {
  const long long r = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= a.heads * a.T) return;
  const long long T = a.T, i = r % T, base = r * T;
  float mx = -3.402823466e38f;
  for (long long j = lane; j <= i; j += 32) mx = fmaxf(mx, ld(a.att, base + j, D()));
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
  float sum = 0;
  for (long long j = lane; j <= i; j += 32) sum = __fadd_rn(sum, expf(__fsub_rn(ld(a.att, base + j, D()), mx)));
  for (int o = 16; o > 0; o >>= 1) sum = __fadd_rn(sum, __shfl_xor_sync(0xFFFFFFFFu, sum, o));
  const float inv = __fdiv_rn(1.0f, sum);
  for (long long j = lane; j < T; j += 32) {
    const float pv = j <= i ? __fmul_rn(expf(__fsub_rn(ld(a.att, base + j, D()), mx)), inv) : 0.0f;
    st(a.att, base + j, pv, D());
    if (a.bits != nullptr) st(a.pd, base + j, __fmul_rn(pv, softmax_mask(a, base + j)), D());
  }
}

template <class D>
__device__ void softmax_backward(const gpt_softmax_args& a) {
  const long long r = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= a.heads * a.T) return;
  const long long T = a.T, i = r % T, base = r * T;
  float dsum = 0;
  for (long long j = lane; j <= i; j += 32) {
    const float dp = __fmul_rn(ld(a.datt, base + j, D()), softmax_mask(a, base + j));
    dsum = __fmaf_rn(ld(a.att, base + j, D()), dp, dsum);
  }
  for (int o = 16; o > 0; o >>= 1) dsum = __fadd_rn(dsum, __shfl_xor_sync(0xFFFFFFFFu, dsum, o));
  for (long long j = lane; j < T; j += 32) {
    float ds = 0.0f;
    if (j <= i) {
      const float dp = __fmul_rn(ld(a.datt, base + j, D()), softmax_mask(a, base + j));
      ds = __fmul_rn(__fmul_rn(ld(a.att, base + j, D()), __fsub_rn(dp, dsum)), a.scale_qk);
    }
    st(a.datt, base + j, ds, D());
  }
}

}  // namespace

extern "C" __global__ void gpt_head_permute_f32(const gpt_permute_args a) { head_permute<f32>(a); }
extern "C" __global__ void gpt_head_permute_bf16(const gpt_permute_args a) { head_permute<bf16>(a); }
extern "C" __global__ void gpt_head_permute_f16(const gpt_permute_args a) { head_permute<f16>(a); }
extern "C" __global__ void gpt_softmax_forward_f32(const gpt_softmax_args a) { softmax_forward<f32>(a); }
extern "C" __global__ void gpt_softmax_forward_bf16(const gpt_softmax_args a) { softmax_forward<bf16>(a); }
extern "C" __global__ void gpt_softmax_forward_f16(const gpt_softmax_args a) { softmax_forward<f16>(a); }
extern "C" __global__ void gpt_softmax_backward_f32(const gpt_softmax_args a) { softmax_backward<f32>(a); }
extern "C" __global__ void gpt_softmax_backward_bf16(const gpt_softmax_args a) { softmax_backward<bf16>(a); }
extern "C" __global__ void gpt_softmax_backward_f16(const gpt_softmax_args a) { softmax_backward<f16>(a); }

extern "C" __global__ void gpt_attention_forward_f32(const gpt_attention_args a) { forward<f32>(a); }
extern "C" __global__ void gpt_attention_forward_bf16(const gpt_attention_args a) { forward<bf16>(a); }
extern "C" __global__ void gpt_attention_forward_f16(const gpt_attention_args a) { forward<f16>(a); }
extern "C" __global__ void gpt_attention_backward_f32(const gpt_attention_args a) { backward_rows<f32>(a); }
extern "C" __global__ void gpt_attention_backward_bf16(const gpt_attention_args a) { backward_rows<bf16>(a); }
extern "C" __global__ void gpt_attention_backward_f16(const gpt_attention_args a) { backward_rows<f16>(a); }
extern "C" __global__ void gpt_attention_backward_kv_f32(const gpt_attention_args a) { backward_cols<f32>(a); }
extern "C" __global__ void gpt_attention_backward_kv_bf16(const gpt_attention_args a) { backward_cols<bf16>(a); }
extern "C" __global__ void gpt_attention_backward_kv_f16(const gpt_attention_args a) { backward_cols<f16>(a); }
#include "flash_attention.cuh"
