// nn_ops.cu — accel's neural-network kernels on CUDA (the "nn_ops" op): embedding, LayerNorm with the
// residual add fused in, GELU (tanh), softmax cross-entropy with its gradient, dropout and clipping;
// float32, bfloat16 and float16 storage (fp32 arithmetic). Compiled by NVRTC (or nvcc ahead of time).
// Arguments: kernels/common/accel_nn_abi.h, passed by value (accel/ops/launch.hpp); the launch shapes
// are computed by accel/ops/nn_ops.hpp. Sums across rows run in a fixed order (no atomics), so results
// do not depend on the grid or the schedule (for the block sizes the host launches).
//
// Speed: the hot kernels move 8 elements per access (16 bytes of bfloat16/float16, two 16-byte accesses
// of float32) where C is a multiple of 8 and the pointers are 16-byte aligned — checked here at run time,
// since the ABI promises no alignment — and fall back to one element per access otherwise. Row kernels
// with C <= 1024 hold a row in registers (a warp per row: each row read once).
#include "cuda_common.cuh"

#include "accel_nn_abi.h"

using namespace accel_kernels;

namespace {

constexpr float gelu_k = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float gelu_c = 0.044715f;

// The block sizes nn_ops.hpp launches (the LayerNorm backward's summation order depends on them).
// LayerNorm backward: 1024 threads for bfloat16 (within 64 registers), 512 for float32 and float16 (whose
// rows take more registers); its column pass uses at most ln_column_threads (shared memory: 16 floats each).
constexpr int ln_backward_threads_bf16 = 1024;
constexpr int ln_backward_threads_other = 512;
constexpr int ln_column_threads = 512;
// LayerNorm forward on bfloat16: 256-thread blocks, at least 5 per SM (48 registers, no spills; float16's
// conversions would spill there).
constexpr int ln_forward_threads = 256;
constexpr int ln_forward_min_blocks_bf16 = 5;
// Row kernels hold a row in registers up to this many columns (8 per lane per 256 columns).
constexpr int row_fast_max_c = 1024;

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xFFFFFFFFu, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, o));
  return x;
}
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ long long lmin(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ bool al16(const void* p) { return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0; }

template <class T>
struct Is16 {
  static constexpr bool value = sizeof(typename storage<T>::type) == 2;
};

// 8 consecutive elements as stored: one 16-byte word of 16-bit values (hi unused), two of float32.
struct Raw8 {
  uint4 lo, hi;
};
// Elements [8v, 8v + 8) of base (16-byte aligned). I: the index type (32-bit where sizes allow).
template <class T, class I>
__device__ __forceinline__ Raw8 ld8(const void* base, I v) {
  Raw8 r;
  if constexpr (Is16<T>::value) {
    r.lo = reinterpret_cast<const uint4*>(base)[v];
    r.hi = make_uint4(0u, 0u, 0u, 0u);
  } else {
    r = reinterpret_cast<const Raw8*>(base)[v];
  }
  return r;
}
template <class T, class I>
__device__ __forceinline__ void st8_raw(void* base, I v, const Raw8& r) {
  if constexpr (Is16<T>::value) {
    reinterpret_cast<uint4*>(base)[v] = r.lo;
  } else {
    reinterpret_cast<Raw8*>(base)[v] = r;
  }
}
template <class T>
struct IsF16 {
  static constexpr bool value = false;
};
template <>
struct IsF16<f16> {
  static constexpr bool value = true;
};
// float16's conversions are long (subnormals, NaN payloads: cuda_common.cuh); out of line, so that the
// unrolled row kernels stay quick to compile (inlined, nn_ops took ~15 s instead of ~4 s per
// architecture, most of it float16's). bfloat16's are a shift and a rounding: inline.
struct F8 {
  float v[8];
};
__device__ __noinline__ F8 unpack8_f16(uint4 r) {
  F8 o;
  const unsigned int w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    o.v[2 * k] = half_to_float((unsigned short)(w[k] & 0xFFFFu));
    o.v[2 * k + 1] = half_to_float((unsigned short)(w[k] >> 16));
  }
  return o;
}
__device__ __noinline__ uint4 pack8_f16(F8 x) {
  unsigned int w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    w[k] = (unsigned int)float_to_half(x.v[2 * k]) | ((unsigned int)float_to_half(x.v[2 * k + 1]) << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

template <class T>
__device__ __forceinline__ void unpack8(const Raw8& r, float (&o)[8]) {
  if constexpr (IsF16<T>::value) {
    const F8 f = unpack8_f16(r.lo);
#pragma unroll
    for (int k = 0; k < 8; ++k) o[k] = f.v[k];
  } else if constexpr (Is16<T>::value) {
    const unsigned int w[4] = {r.lo.x, r.lo.y, r.lo.z, r.lo.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      o[2 * k] = to_f((unsigned short)(w[k] & 0xFFFFu), T());
      o[2 * k + 1] = to_f((unsigned short)(w[k] >> 16), T());
    }
  } else {
    o[0] = __uint_as_float(r.lo.x); o[1] = __uint_as_float(r.lo.y);
    o[2] = __uint_as_float(r.lo.z); o[3] = __uint_as_float(r.lo.w);
    o[4] = __uint_as_float(r.hi.x); o[5] = __uint_as_float(r.hi.y);
    o[6] = __uint_as_float(r.hi.z); o[7] = __uint_as_float(r.hi.w);
  }
}
template <class T, class I>
__device__ __forceinline__ void ld8f(const void* base, I v, float (&o)[8]) {
  unpack8<T>(ld8<T>(base, v), o);
}
// 8 floats rounded to T and packed as stored.
template <class T>
__device__ __forceinline__ Raw8 pack8(const float (&x)[8]) {
  Raw8 r;
  if constexpr (IsF16<T>::value) {
    F8 f;
#pragma unroll
    for (int k = 0; k < 8; ++k) f.v[k] = x[k];
    r.lo = pack8_f16(f);
    r.hi = r.lo;
  } else if constexpr (Is16<T>::value) {
    unsigned int w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      w[k] = (unsigned int)from_f(x[2 * k], T()) | ((unsigned int)from_f(x[2 * k + 1], T()) << 16);
    }
    r.lo = make_uint4(w[0], w[1], w[2], w[3]);
    r.hi = r.lo;
  } else {
    r.lo = make_uint4(__float_as_uint(x[0]), __float_as_uint(x[1]), __float_as_uint(x[2]), __float_as_uint(x[3]));
    r.hi = make_uint4(__float_as_uint(x[4]), __float_as_uint(x[5]), __float_as_uint(x[6]), __float_as_uint(x[7]));
  }
  return r;
}
template <class T, class I>
__device__ __forceinline__ void st8(void* base, I v, const float (&x)[8]) {
  st8_raw<T>(base, v, pack8<T>(x));
}
// Row n of a [N x C] tensor.
template <class T>
__device__ __forceinline__ const void* row_of(const void* base, long long n, long long C) {
  return reinterpret_cast<const typename storage<T>::type*>(base) + n * C;
}
template <class T>
__device__ __forceinline__ void* row_of(void* base, long long n, long long C) {
  return reinterpret_cast<typename storage<T>::type*>(base) + n * C;
}

// ---- Embedding ----------------------------------------------------------------------------------------

template <class T, class I>
__device__ __forceinline__ void embedding_forward_vec(const accel_nn_embedding_forward_args& a, I groups_per_row,
                                                      I total) {
  const I stride = (I)blockDim.x * (I)gridDim.x;
  for (I g = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; g < total; g += stride) {
    const I n = g / groups_per_row, cg = g - n * groups_per_row;
    const long long tok = a.tokens[n], pos = (long long)n % a.T;
    float e[8], p[8];
    ld8f<T>(a.wte, tok * groups_per_row + cg, e);
    ld8f<T>(a.wpe, pos * groups_per_row + cg, p);
#pragma unroll
    for (int k = 0; k < 8; ++k) e[k] = __fadd_rn(e[k], p[k]);
    st8<T>(a.out, g, e);
  }
}

// One thread per 8 columns where C % 8 == 0 and the tensors are 16-byte aligned, else per element.
template <class T>
__device__ void embedding_forward(const accel_nn_embedding_forward_args& a) {
  const long long stride = (long long)blockDim.x * gridDim.x;
  const long long gid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (a.C % 8 == 0 && al16(a.out) && al16(a.wte) && al16(a.wpe)) {
    const long long gpr = a.C / 8, total = a.N * gpr;
    if (total + stride < 0x100000000LL) {  // else (2^35 elements) the one-element loop
      embedding_forward_vec<T, unsigned int>(a, (unsigned int)gpr, (unsigned int)total);
      return;
    }
  }
  const long long total = a.N * a.C;
  for (long long i = gid; i < total; i += stride) {
    const long long n = i / a.C, c = i - n * a.C;
    const int tok = a.tokens[n];
    const float v = __fadd_rn(load1<T>(a.wte, tok * a.C + c), load1<T>(a.wpe, (n % a.T) * a.C + c));
    store1<T>(a.out, i, v);
  }
}

// VEC consecutive columns starting at group g (VEC = 8: 16-byte accesses; 1: one element).
template <class T, int VEC>
__device__ __forceinline__ void load_group(const void* row, long long g, float (&o)[VEC]) {
  if constexpr (VEC == 8) {
    ld8f<T>(row, g, o);
  } else {
    o[0] = load1<T>(row, g);
  }
}
template <class T, int VEC>
__device__ __forceinline__ void store_group(void* row, long long g, const float (&x)[VEC]) {
  if constexpr (VEC == 8) {
    st8<T>(row, g, x);
  } else {
    store1<T>(row, g, x[0]);
  }
}

// The block size nn_ops.hpp launches the embedding backward with, and its shared memory: a pool of
// 8 floats per thread, first the tile's list of matching rows (4 ints per thread), then the slices'
// partial sums.
constexpr int emb_backward_threads = 1024;
constexpr int emb_max_slices = 16;

// Block x = r < V: vocabulary row r of dwte (the rows n with tokens[n] == r). The block covers W groups
// of VEC columns per pass (block y and the passes cover the rest) with S = blockDim / W slices of
// threads (at most 16): slice s adds its contiguous share of the matching rows, in row order, and the
// slices' sums are added in slice order — a fixed order (for the host's block size), so the result does
// not depend on the grid or the schedule, and a frequent token (a space in a character vocabulary: 15 %
// of the rows) is spread over S threads per column group instead of one. The block scans the tokens, 4
// per thread per tile, and compacts the tile's matching rows into shared memory in row order (a prefix
// sum of the matches); slice s takes its share of each tile's list.
// Blocks x >= V: positions of dwpe, blockDim / W of them per block (a grid-stride loop over the rest),
// each thread summing rows t, t + T, ... of its column group in row order (N / T rows: no slices).
template <class T, int VEC>
__device__ void embedding_backward_impl(const accel_nn_embedding_backward_args& a, float* pool, int* warp_hits) {
  int* const list = reinterpret_cast<int*>(pool);
  float* const red = pool;
  const long long r = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  const long long groups = a.C / VEC;
  const int W = (int)lmin(groups, (long long)blockDim.x);
  const int gl = (int)threadIdx.x % W, sl = (int)threadIdx.x / W;
  const long long per_pass = (long long)gridDim.y * W;
  const long long passes = (groups + per_pass - 1) / per_pass;
  if (r >= a.V) {  // positions (no barriers on this side)
    const int P = (int)blockDim.x / W;
    if (sl >= P) return;
    const long long step = ((long long)gridDim.x - a.V) * P;
    for (long long t = (r - a.V) * P + sl; t < a.T; t += step) {
      for (long long p = 0; p < passes; ++p) {
        const long long g = p * per_pass + (long long)blockIdx.y * W + gl;
        if (g >= groups) continue;
        float acc[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) acc[k] = 0.0f;
#pragma unroll 8
        for (long long n = t; n < a.N; n += a.T) {
          float d[VEC];
          load_group<T, VEC>(row_of<T>(a.dout, n, a.C), g, d);
#pragma unroll
          for (int k = 0; k < VEC; ++k) acc[k] = __fadd_rn(acc[k], d[k]);
        }
        void* dst = row_of<T>(a.dwpe, t, a.C);
        float cur[VEC];
        load_group<T, VEC>(dst, g, cur);
#pragma unroll
        for (int k = 0; k < VEC; ++k) cur[k] = __fadd_rn(cur[k], acc[k]);
        store_group<T, VEC>(dst, g, cur);
      }
    }
    return;
  }
  const int S = imin((int)blockDim.x / W, emb_max_slices);  // sl >= S: idle in the sums
  const long long tile = 4LL * blockDim.x;
  const bool tok16 = al16(a.tokens);
  for (long long p = 0; p < passes; ++p) {
    const long long g = p * per_pass + (long long)blockIdx.y * W + gl;
    const bool on = g < groups && sl < S;
    float acc[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc[k] = 0.0f;
    for (long long base = 0; base < a.N; base += tile) {
      const long long t0 = base + 4LL * threadIdx.x;
      int tok[4];
      if (tok16 && t0 + 4 <= a.N) {
        const int4 q = reinterpret_cast<const int4*>(a.tokens)[t0 >> 2];
        tok[0] = q.x; tok[1] = q.y; tok[2] = q.z; tok[3] = q.w;
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) tok[q] = t0 + q < a.N ? a.tokens[t0 + q] : -1;
      }
      unsigned int hits = 0;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        if (t0 + q < a.N && (long long)tok[q] == r) hits |= 1u << q;
      }
      const int count = __popc(hits);
      int incl = count;  // inclusive prefix sum of the counts over the warp
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xFFFFFFFFu, incl, o);
        if (lane >= o) incl += y;
      }
      if (lane == 31 || threadIdx.x == blockDim.x - 1) warp_hits[warp] = incl;
      __syncthreads();  // (also: every thread is done reading the previous tile's list)
      int before = 0, total = 0;
      for (int w = 0; w < warps; ++w) {
        const int h = warp_hits[w];
        if (w < warp) before += h;
        total += h;
      }
      int at = before + incl - count;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        if ((hits >> q) & 1u) list[at++] = 4 * (int)threadIdx.x + q;
      }
      __syncthreads();
      if (on) {
        const int seg = (total + S - 1) / S;
        const int i0 = imin(total, sl * seg), i1 = imin(total, i0 + seg);
#pragma unroll 8
        for (int i = i0; i < i1; ++i) {
          float d[VEC];
          load_group<T, VEC>(row_of<T>(a.dout, base + list[i], a.C), g, d);
#pragma unroll
          for (int k = 0; k < VEC; ++k) acc[k] = __fadd_rn(acc[k], d[k]);
        }
      }
      // No barrier here: the next tile writes list only after its first barrier, and warp_hits was
      // last read before this tile's second one.
    }
    __syncthreads();  // red overlays list
    if (sl < S) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) red[(sl * W + gl) * VEC + k] = acc[k];
    }
    __syncthreads();
    if (on && sl == 0) {
      float sum[VEC];
#pragma unroll
      for (int k = 0; k < VEC; ++k) sum[k] = red[gl * VEC + k];
      for (int q = 1; q < S; ++q) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) sum[k] = __fadd_rn(sum[k], red[(q * W + gl) * VEC + k]);
      }
      void* dst = row_of<T>(a.dwte, r, a.C);
      float cur[VEC];
      load_group<T, VEC>(dst, g, cur);
#pragma unroll
      for (int k = 0; k < VEC; ++k) cur[k] = __fadd_rn(cur[k], sum[k]);
      store_group<T, VEC>(dst, g, cur);
    }
    __syncthreads();  // red is rewritten by the next pass
  }
}

template <class T>
__device__ void embedding_backward(const accel_nn_embedding_backward_args& a) {
  __shared__ __align__(16) float pool[8 * emb_backward_threads];
  __shared__ int warp_hits[emb_backward_threads / 32];
  if (a.N <= 0) return;  // nothing to add (and the gradients may be null)
  if (a.C % 8 == 0 && al16(a.dout) && al16(a.dwte) && al16(a.dwpe)) {
    embedding_backward_impl<T, 8>(a, pool, warp_hits);
  } else {
    embedding_backward_impl<T, 1>(a, pool, warp_hits);
  }
}

// ---- LayerNorm ----------------------------------------------------------------------------------------

// Fast path of the forward: lane l holds the 8-column groups l, l + 32, ... (K of them) of row n, as
// stored (with a residual: the sum rounded to T, whose statistics these are) and unpacked at each of
// the three passes: 16-bit rows take half the registers of floats, so more warps fit on an SM.
template <class T, int K>
__device__ __forceinline__ void layernorm_forward_row(const accel_nn_layernorm_forward_args& a, long long n, int lane) {
  const int C = (int)a.C;
  Raw8 xr[K];
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const int v = j * 32 + lane;
    if (v * 8 < C) xr[j] = ld8<T>(row_of<T>(a.inp, n, a.C), v);
  }
  if (a.residual != nullptr) {
    Raw8 rr[K];
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int v = j * 32 + lane;
      if (v * 8 < C) rr[j] = ld8<T>(row_of<T>(a.residual, n, a.C), v);
    }
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int v = j * 32 + lane;
      if (v * 8 < C) {
        float x[8], r[8];
        unpack8<T>(xr[j], x);
        unpack8<T>(rr[j], r);
#pragma unroll
        for (int k = 0; k < 8; ++k) x[k] = __fadd_rn(x[k], r[k]);
        xr[j] = pack8<T>(x);
        st8_raw<T>(row_of<T>(a.residual_out, n, a.C), v, xr[j]);
      }
    }
  } else if (a.residual_out != nullptr && a.residual_out != a.inp) {
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int v = j * 32 + lane;
      if (v * 8 < C) st8_raw<T>(row_of<T>(a.residual_out, n, a.C), v, xr[j]);
    }
  }
  float sum = 0;
#pragma unroll
  for (int j = 0; j < K; ++j) {
    if ((j * 32 + lane) * 8 < C) {
      float x[8];
      unpack8<T>(xr[j], x);
#pragma unroll
      for (int k = 0; k < 8; ++k) sum = __fadd_rn(sum, x[k]);
    }
  }
  const float inv_c = 1.0f / (float)a.C;
  const float m = __fmul_rn(warp_sum(sum), inv_c);
  float var = 0;
#pragma unroll
  for (int j = 0; j < K; ++j) {
    if ((j * 32 + lane) * 8 < C) {
      float x[8];
      unpack8<T>(xr[j], x);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float d = __fsub_rn(x[k], m);
        var = __fmaf_rn(d, d, var);
      }
    }
  }
  const float s = 1.0f / sqrtf(__fmaf_rn(warp_sum(var), inv_c, a.eps));
  void* out = row_of<T>(a.out, n, a.C);
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const int v = j * 32 + lane;
    if (v * 8 < C) {
      float x[8], w[8], b[8], o[8];
      unpack8<T>(xr[j], x);
      ld8f<T>(a.weight, v, w);
      ld8f<T>(a.bias, v, b);
#pragma unroll
      for (int k = 0; k < 8; ++k) o[k] = __fmaf_rn(__fmul_rn(__fsub_rn(x[k], m), s), w[k], b[k]);
      st8<T>(out, v, o);
    }
  }
  if (lane == 0) {
    a.mean[n] = m;
    a.rstd[n] = s;
  }
}

// One warp per row (blockDim / 32 rows per block).
template <class T>
__device__ void layernorm_forward(const accel_nn_layernorm_forward_args& a) {
  const long long n = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (n >= a.N) return;
  if (a.C % 8 == 0 && a.C <= row_fast_max_c && al16(a.out) && al16(a.inp) && al16(a.weight) && al16(a.bias) &&
      al16(a.residual) && al16(a.residual_out)) {
    switch ((int)((a.C + 255) / 256)) {
      case 1: layernorm_forward_row<T, 1>(a, n, lane); return;
      case 2: layernorm_forward_row<T, 2>(a, n, lane); return;
      case 3: layernorm_forward_row<T, 3>(a, n, lane); return;
      default: layernorm_forward_row<T, 4>(a, n, lane); return;
    }
  }
  const long long base = n * a.C;
  const void* x = a.inp;
  if (a.residual != nullptr) {
    for (long long c = lane; c < a.C; c += 32) {
      store1<T>(a.residual_out, base + c, __fadd_rn(load1<T>(a.inp, base + c), load1<T>(a.residual, base + c)));
    }
    __syncwarp();
    x = a.residual_out;
  } else if (a.residual_out != nullptr && a.residual_out != a.inp) {
    for (long long c = lane; c < a.C; c += 32) store1<T>(a.residual_out, base + c, load1<T>(a.inp, base + c));
  }
  float sum = 0;
  for (long long c = lane; c < a.C; c += 32) sum = __fadd_rn(sum, load1<T>(x, base + c));
  const float m = __fmul_rn(warp_sum(sum), 1.0f / (float)a.C);
  float var = 0;
  for (long long c = lane; c < a.C; c += 32) {
    const float d = __fsub_rn(load1<T>(x, base + c), m);
    var = __fmaf_rn(d, d, var);
  }
  const float s = 1.0f / sqrtf(__fmaf_rn(warp_sum(var), 1.0f / (float)a.C, a.eps));
  for (long long c = lane; c < a.C; c += 32) {
    const float xhat = __fmul_rn(__fsub_rn(load1<T>(x, base + c), m), s);
    store1<T>(a.out, base + c, __fmaf_rn(xhat, load1<T>(a.weight, c), load1<T>(a.bias, c)));
  }
  if (lane == 0) {
    a.mean[n] = m;
    a.rstd[n] = s;
  }
}

// Fast path of the backward (C % 8 == 0, C <= 1024, 16-byte aligned), in two passes over the block's
// chunk. Rows: the block's warps (32 for bfloat16: two rows each) split the rows; a warp reads a row's dout and x into registers
// as stored (lane l: the 8-column groups l, l + 32, ...), takes the row's two sums with shuffles, then
// reads dinp, adds dx and writes it. Columns: up to 512 threads then take (8-column group, run of
// rows) pairs and sum dout * xhat and dout down their run (in row order, re-reading dout and x, which
// the row pass has just brought into L1/L2), and the runs are added in run order in shared memory
// (part: 8192 floats). Holding no column sums through the row pass keeps a bfloat16 thread within the
// 64 registers that 1024 threads per SM allow (Nsight Compute, gpt2 on an H200: a 512-thread block of
// 128 registers, one per SM, left the SM without an eligible warp 56-62 % of the time). The order depends only on the
// block size, which the host fixes per dtype (ln_backward_threads_*). dinp must not overlap dout or inp (the
// column pass reads them again after dinp is written).
template <class T, int K>
__device__ void layernorm_backward_rows(const accel_nn_layernorm_backward_args& a, float* part) {
  const int C = (int)a.C;
  const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long n0 = (long long)blockIdx.x * ACCEL_NN_LN_CHUNK;
  const int rows = (int)lmin(ACCEL_NN_LN_CHUNK, a.N - n0);
  const float inv_c = 1.0f / (float)a.C;
  {
    const int per = (rows + warps - 1) / warps;
    const int r0 = imin(rows, warp * per), r1 = imin(rows, r0 + per);
    for (int r = r0; r < r1; ++r) {
      const long long n = n0 + r;
      const float m = a.mean[n], s = a.rstd[n];
      Raw8 rdy[K], rx[K];
#pragma unroll
      for (int j = 0; j < K; ++j) {
        const int v = j * 32 + lane;
        if (v * 8 < C) {
          rdy[j] = ld8<T>(row_of<T>(a.dout, n, a.C), v);
          rx[j] = ld8<T>(row_of<T>(a.inp, n, a.C), v);
        }
      }
      float sg = 0.0f, sgx = 0.0f;
#pragma unroll
      for (int j = 0; j < K; ++j) {
        if ((j * 32 + lane) * 8 < C) {
          float dy[8], x[8], w[8];
          unpack8<T>(rdy[j], dy);
          unpack8<T>(rx[j], x);
          ld8f<T>(a.weight, j * 32 + lane, w);
#pragma unroll
          for (int k = 0; k < 8; ++k) {
            const float xhat = __fmul_rn(__fsub_rn(x[k], m), s);
            const float g = __fmul_rn(dy[k], w[k]);
            sg = __fadd_rn(sg, g);
            sgx = __fmaf_rn(g, xhat, sgx);
          }
        }
      }
      const float mean_g = __fmul_rn(warp_sum(sg), inv_c), mean_gx = __fmul_rn(warp_sum(sgx), inv_c);
      void* dx_row = row_of<T>(a.dinp, n, a.C);
      Raw8 rdx[K];
#pragma unroll
      for (int j = 0; j < K; ++j) {
        const int v = j * 32 + lane;
        if (v * 8 < C) rdx[j] = ld8<T>(dx_row, v);
      }
#pragma unroll
      for (int j = 0; j < K; ++j) {
        const int v = j * 32 + lane;
        if (v * 8 < C) {
          float dy[8], x[8], w[8], dx[8];
          unpack8<T>(rdy[j], dy);
          unpack8<T>(rx[j], x);
          ld8f<T>(a.weight, v, w);
          unpack8<T>(rdx[j], dx);
#pragma unroll
          for (int k = 0; k < 8; ++k) {
            const float xhat = __fmul_rn(__fsub_rn(x[k], m), s);
            const float g = __fmul_rn(dy[k], w[k]);
            dx[k] = __fadd_rn(dx[k], __fmul_rn(__fsub_rn(__fsub_rn(g, mean_g), __fmul_rn(xhat, mean_gx)), s));
          }
          st8<T>(dx_row, v, dx);
        }
      }
    }
  }
  __syncthreads();  // the chunk's dout and x are in L2 (the column pass needs only those, read-only)
  // Columns: thread t takes group g = t % G of 8 columns and run t / G of the chunk's rows (S runs; at
  // most 512 threads, which part holds).
  const int G = C >> 3, S = imin((int)blockDim.x, ln_column_threads) / G;
  const int t = threadIdx.x;
  if (t < S * G) {
    const int g = t % G, run = t / G;
    const int per = (rows + S - 1) / S;
    const int ra = imin(rows, run * per), rb = imin(rows, ra + per);
    float dw[8], db[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      dw[k] = 0.0f;
      db[k] = 0.0f;
    }
    int r = ra;
    for (; r + 4 <= rb; r += 4) {
      Raw8 ry[4], rxx[4];
      float m[4], s[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const long long n = n0 + r + u;
        ry[u] = ld8<T>(row_of<T>(a.dout, n, a.C), g);
        rxx[u] = ld8<T>(row_of<T>(a.inp, n, a.C), g);
        m[u] = a.mean[n];
        s[u] = a.rstd[n];
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        float dy[8], x[8];
        unpack8<T>(ry[u], dy);
        unpack8<T>(rxx[u], x);
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          dw[k] = __fmaf_rn(dy[k], __fmul_rn(__fsub_rn(x[k], m[u]), s[u]), dw[k]);
          db[k] = __fadd_rn(db[k], dy[k]);
        }
      }
    }
    for (; r < rb; ++r) {
      const long long n = n0 + r;
      float dy[8], x[8];
      ld8f<T>(row_of<T>(a.dout, n, a.C), g, dy);
      ld8f<T>(row_of<T>(a.inp, n, a.C), g, x);
      const float m = a.mean[n], s = a.rstd[n];
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        dw[k] = __fmaf_rn(dy[k], __fmul_rn(__fsub_rn(x[k], m), s), dw[k]);
        db[k] = __fadd_rn(db[k], dy[k]);
      }
    }
    float4* pw = reinterpret_cast<float4*>(part + run * 2 * C) + 2 * g;
    float4* pb = reinterpret_cast<float4*>(part + run * 2 * C + C) + 2 * g;
    pw[0] = make_float4(dw[0], dw[1], dw[2], dw[3]);
    pw[1] = make_float4(dw[4], dw[5], dw[6], dw[7]);
    pb[0] = make_float4(db[0], db[1], db[2], db[3]);
    pb[1] = make_float4(db[4], db[5], db[6], db[7]);
  }
  __syncthreads();
  // The runs in run order.
  float* out = a.scratch + (long long)blockIdx.x * 2 * a.C;
  for (int i = t; i < 2 * C; i += blockDim.x) {
    float sum = part[i];
    for (int run = 1; run < S; ++run) sum = __fadd_rn(sum, part[run * 2 * C + i]);
    out[i] = sum;
  }
}

// One block per chunk of ACCEL_NN_LN_CHUNK rows.
template <class T>
__device__ void layernorm_backward(const accel_nn_layernorm_backward_args& a) {
  // The fast path's column sums: at most (512 / G) runs x 2 C = 8192 floats (G = C / 8).
  __shared__ __align__(16) float part[16 * ln_column_threads];
  if ((long long)blockIdx.x * ACCEL_NN_LN_CHUNK >= a.N) return;  // N == 0: no chunk, no scratch
  // (The column pass needs a thread per 8-column group: C / 8 <= 128 threads.)
  if (a.C % 8 == 0 && a.C <= row_fast_max_c && (blockDim.x & 31) == 0 && blockDim.x >= a.C / 8 && al16(a.dinp) &&
      al16(a.dout) && al16(a.inp) && al16(a.weight)) {
    switch ((int)((a.C + 255) / 256)) {
      case 1: layernorm_backward_rows<T, 1>(a, part); return;
      case 2: layernorm_backward_rows<T, 2>(a, part); return;
      case 3: layernorm_backward_rows<T, 3>(a, part); return;
      default: layernorm_backward_rows<T, 4>(a, part); return;
    }
  }
  // Any C or alignment: the warps find each row's two means, then every thread walks its columns down
  // the chunk's rows (in order) for dinp and the chunk's partial sums.
  float* row_g = part;
  float* row_gx = part + ACCEL_NN_LN_CHUNK;
  const long long n0 = blockIdx.x * (long long)ACCEL_NN_LN_CHUNK;
  const long long n1 = n0 + ACCEL_NN_LN_CHUNK < a.N ? n0 + ACCEL_NN_LN_CHUNK : a.N;
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float inv_c = 1.0f / (float)a.C;
  for (long long n = n0 + warp; n < n1; n += warps) {
    const long long base = n * a.C;
    const float m = a.mean[n], s = a.rstd[n];
    float sg = 0, sgx = 0;
    for (long long c = lane; c < a.C; c += 32) {
      const float xhat = __fmul_rn(__fsub_rn(load1<T>(a.inp, base + c), m), s);
      const float g = __fmul_rn(load1<T>(a.dout, base + c), load1<T>(a.weight, c));
      sg = __fadd_rn(sg, g);
      sgx = __fmaf_rn(g, xhat, sgx);
    }
    sg = warp_sum(sg);
    sgx = warp_sum(sgx);
    if (lane == 0) {
      row_g[n - n0] = __fmul_rn(sg, inv_c);
      row_gx[n - n0] = __fmul_rn(sgx, inv_c);
    }
  }
  __syncthreads();
  float* pw = a.scratch + blockIdx.x * 2 * a.C;
  float* pb = pw + a.C;
  for (long long c = threadIdx.x; c < a.C; c += blockDim.x) {
    const float w = load1<T>(a.weight, c);
    float dw = 0, db = 0;
    for (long long n = n0; n < n1; ++n) {
      const long long i = n * a.C + c;
      const float m = a.mean[n], s = a.rstd[n];
      const float xhat = __fmul_rn(__fsub_rn(load1<T>(a.inp, i), m), s);
      const float dy = load1<T>(a.dout, i);
      const float g = __fmul_rn(dy, w);
      const float dx = __fmul_rn(__fsub_rn(__fsub_rn(g, row_g[n - n0]), __fmul_rn(xhat, row_gx[n - n0])), s);
      store1<T>(a.dinp, i, __fadd_rn(load1<T>(a.dinp, i), dx));
      dw = __fmaf_rn(dy, xhat, dw);
      db = __fadd_rn(db, dy);
    }
    pw[c] = dw;
    pb[c] = db;
  }
}

// dweight[c] += the sum of the chunks' partials. A block takes 32 columns (a lane each); its warps split
// the chunks into contiguous runs summed in order, and the runs are added in warp order (fixed for the
// host's block size).
template <class T>
__device__ void layernorm_backward_reduce(const accel_nn_layernorm_backward_args& a) {
  __shared__ float red[2][32][32];
  if (a.N <= 0) return;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  const long long c = (long long)blockIdx.x * 32 + lane;
  const long long chunks = (a.N + ACCEL_NN_LN_CHUNK - 1) / ACCEL_NN_LN_CHUNK;
  const long long per = (chunks + warps - 1) / warps;
  const long long k0 = lmin(chunks, warp * per), k1 = lmin(chunks, k0 + per);
  float dw = 0, db = 0;
  if (c < a.C) {
    const long long step = 2 * a.C;
    const float* p = a.scratch + k0 * step + c;
    long long k = k0;
    for (; k + 4 <= k1; k += 4, p += 4 * step) {
      const float w0 = p[0], w1 = p[step], w2 = p[2 * step], w3 = p[3 * step];
      const float b0 = p[a.C], b1 = p[step + a.C], b2 = p[2 * step + a.C], b3 = p[3 * step + a.C];
      dw = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(dw, w0), w1), w2), w3);
      db = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(db, b0), b1), b2), b3);
    }
    for (; k < k1; ++k, p += step) {
      dw = __fadd_rn(dw, p[0]);
      db = __fadd_rn(db, p[a.C]);
    }
  }
  red[0][warp][lane] = dw;
  red[1][warp][lane] = db;
  __syncthreads();
  if (warp == 0 && c < a.C) {
    float sw = 0, sb = 0;
    for (int w = 0; w < warps; ++w) {
      sw = __fadd_rn(sw, red[0][w][lane]);
      sb = __fadd_rn(sb, red[1][w][lane]);
    }
    store1<T>(a.dweight, c, __fadd_rn(load1<T>(a.dweight, c), sw));
    store1<T>(a.dbias, c, __fadd_rn(load1<T>(a.dbias, c), sb));
  }
}

// ---- Elementwise ----------------------------------------------------------------------------------------

// A grid-stride loop over n elements: op.vec(v) for each group of 8 (elements [8v, 8v + 8), v 32-bit)
// when vec_ok, then op.one(i) for the elements left (all of them without vec_ok, or past 2^32 groups
// of 8: one instantiation of the unrolled body keeps the JIT quick). (Functors, not generic lambdas:
// NVRTC takes those for host code.)
template <class Op>
__device__ __forceinline__ void elementwise8(long long n, bool vec_ok, const Op& op) {
  const long long total = (long long)blockDim.x * gridDim.x;
  const long long gid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long done = 0;
  const long long nv = n >> 3;
  if (vec_ok && nv + total < 0x100000000LL) {
    const unsigned int count = (unsigned int)nv, stride = (unsigned int)total;
    for (unsigned int v = (unsigned int)gid; v < count; v += stride) op.vec(v);
    done = nv << 3;
  }
  for (long long i = done + gid; i < n; i += total) op.one(i);
}

__device__ __forceinline__ float gelu_tanh(float x, float* th) {
  const float u = __fmul_rn(gelu_k, __fmaf_rn(__fmul_rn(gelu_c, x), __fmul_rn(x, x), x));
  *th = tanhf(u);
  return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, *th));
}
__device__ __forceinline__ float gelu_value(float x) {
  float th;
  return gelu_tanh(x, &th);
}
// Past |x| = 11 GELU' is 0 or 1 to float precision, where the formulas' x^2 overflows past |x| ~ 1.8e19 and
// gives inf * 0 = NaN: those elements take 0 or 1, selected from x at the end (a NaN's compares are false,
// so it keeps the formula's NaN).
__device__ __forceinline__ float gelu_grad_saturated(float x, float grad) {
  return x > 11.0f ? 1.0f : x < -11.0f ? 0.0f : grad;
}
__device__ __forceinline__ float gelu_grad(float x) {
  float th;
  (void)gelu_tanh(x, &th);
  const float sech2 = __fmaf_rn(-th, th, 1.0f);
  const float du = __fmul_rn(gelu_k, __fmaf_rn(3.0f * gelu_c, __fmul_rn(x, x), 1.0f));
  return gelu_grad_saturated(x, __fmaf_rn(__fmul_rn(__fmul_rn(0.5f, x), sech2), du, __fmul_rn(0.5f, __fadd_rn(1.0f, th))));
}

// 16-bit storage: GELU as x sigmoid(2u) = x / (1 + 2^(-2 log2(e) u)) on the approximate exp2 and
// reciprocal — a few float32 ulps, far below the 16-bit rounding that follows (float32 keeps tanhf) —
// in about a third of tanhf's instructions, which left these bandwidth-bound kernels waiting on
// arithmetic. No cancellation: the tails give 2^z = inf, so 1 / inf = 0 (GELU(-x) -> -0) and 1 - r = 1.
#ifndef ACCEL_CUDA_ON_HOST
__device__ __forceinline__ float ex2_approx(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float rcp_approx(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
#else  // the kernels run on the CPU (tests/support/cuda_host.hpp): the exact values, within 2 ulps of these
__device__ __forceinline__ float ex2_approx(float x) { return exp2f(x); }
__device__ __forceinline__ float rcp_approx(float x) { return 1.0f / x; }
#endif
constexpr float gelu_a = -2.0f * 1.4426950408889634f * gelu_k;  // 2u = -(x + c x^3) gelu_a / log2(e)
__device__ __forceinline__ float gelu_sigmoid(float x) {
  const float z = __fmul_rn(x, __fmaf_rn(gelu_a * gelu_c, __fmul_rn(x, x), gelu_a));
  return rcp_approx(__fadd_rn(1.0f, ex2_approx(z)));
}
// d/dx x s(2u) = s + x s (1 - s) 2u'.
__device__ __forceinline__ float gelu_grad_sigmoid(float x) {
  const float r = gelu_sigmoid(x);
  const float du2 = __fmul_rn(2.0f * gelu_k, __fmaf_rn(3.0f * gelu_c, __fmul_rn(x, x), 1.0f));
  return gelu_grad_saturated(x, __fmaf_rn(__fmul_rn(__fmul_rn(x, r), __fsub_rn(1.0f, r)), du2, r));
}
template <class T>
__device__ __forceinline__ float gelu_of(float x) {
  return Is16<T>::value ? __fmul_rn(x, gelu_sigmoid(x)) : gelu_value(x);
}
template <class T>
__device__ __forceinline__ float gelu_grad_of(float x) {
  return Is16<T>::value ? gelu_grad_sigmoid(x) : gelu_grad(x);
}

template <class T>
struct GeluForward {
  accel_nn_gelu_forward_args a;
  template <class I>
  __device__ __forceinline__ void vec(I v) const {
    float x[8];
    ld8f<T>(a.inp, v, x);
#pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = gelu_of<T>(x[k]);
    st8<T>(a.out, v, x);
  }
  __device__ __forceinline__ void one(long long i) const { store1<T>(a.out, i, gelu_of<T>(load1<T>(a.inp, i))); }
};
template <class T>
__device__ void gelu_forward(const accel_nn_gelu_forward_args& a) {
  elementwise8(a.n, al16(a.out) && al16(a.inp), GeluForward<T>{a});
}

template <class T>
struct GeluBackward {
  accel_nn_gelu_backward_args a;
  template <class I>
  __device__ __forceinline__ void vec(I v) const {
    float x[8], dy[8];
    ld8f<T>(a.inp, v, x);
    ld8f<T>(a.dout, v, dy);
#pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = __fmul_rn(gelu_grad_of<T>(x[k]), dy[k]);
    st8<T>(a.dinp, v, x);
  }
  __device__ __forceinline__ void one(long long i) const {
    store1<T>(a.dinp, i, __fmul_rn(gelu_grad_of<T>(load1<T>(a.inp, i)), load1<T>(a.dout, i)));
  }
};
template <class T>
__device__ void gelu_backward(const accel_nn_gelu_backward_args& a) {
  elementwise8(a.n, al16(a.dinp) && al16(a.inp) && al16(a.dout), GeluBackward<T>{a});
}

// ---- Cross-entropy (one warp per row) and the other elementwise kernels ---------------------------------

template <class T>
__device__ void cross_entropy(const accel_nn_cross_entropy_args& a) {
  const long long n = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (n >= a.N) return;
  const long long base = n * a.Vp;
  float mx = -3.402823466e38f;
  for (long long v = lane; v < a.V; v += 32) mx = fmaxf(mx, load1<T>(a.logits, base + v));
  mx = warp_max(mx);
  float sum = 0;
  for (long long v = lane; v < a.V; v += 32) sum = __fadd_rn(sum, expf(__fsub_rn(load1<T>(a.logits, base + v), mx)));
  sum = warp_sum(sum);
  const int target = a.targets[n];
  const float zt = load1<T>(a.logits, base + target);
  __syncwarp();
  if (lane == 0) a.losses[n] = __fsub_rn(__fadd_rn(logf(sum), mx), zt);
  if (a.write_grad != 0) {
    const float scale = __fdiv_rn(a.dloss, sum);
    for (long long v = lane; v < a.Vp; v += 32) {
      float g = 0;
      if (v < a.V) {
        g = __fmul_rn(expf(__fsub_rn(load1<T>(a.logits, base + v), mx)), scale);
        if (v == target) g = __fsub_rn(g, a.dloss);
      }
      store1<T>(a.logits, base + v, g);
    }
  }
}

template <class T>
struct Add {
  accel_nn_add_args a;
  template <class I>
  __device__ __forceinline__ void vec(I v) const {
    float x[8], y[8];
    ld8f<T>(a.a, v, x);
    ld8f<T>(a.b, v, y);
#pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = __fadd_rn(x[k], y[k]);
    st8<T>(a.out, v, x);
  }
  __device__ __forceinline__ void one(long long i) const {
    store1<T>(a.out, i, __fadd_rn(load1<T>(a.a, i), load1<T>(a.b, i)));
  }
};
template <class T>
__device__ void add(const accel_nn_add_args& a) {
  elementwise8(a.n, al16(a.out) && al16(a.a) && al16(a.b), Add<T>{a});
}

template <class T>
struct Dropout {
  accel_nn_dropout_args a;
  template <class I>
  __device__ __forceinline__ void vec(I v) const {
    float x[8];
    ld8f<T>(a.inp, v, x);
    const Raw8 b = reinterpret_cast<const Raw8*>(a.bits)[v];  // 8 words: two 16-byte accesses
    const unsigned int bits[8] = {b.lo.x, b.lo.y, b.lo.z, b.lo.w, b.hi.x, b.hi.y, b.hi.z, b.hi.w};
#pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = bits[k] >= a.threshold ? __fmul_rn(x[k], a.scale) : 0.0f;
    st8<T>(a.out, v, x);
  }
  __device__ __forceinline__ void one(long long i) const {
    store1<T>(a.out, i, a.bits[i] >= a.threshold ? __fmul_rn(load1<T>(a.inp, i), a.scale) : 0.0f);
  }
};
template <class T>
__device__ void dropout(const accel_nn_dropout_args& a) {
  elementwise8(a.n, al16(a.out) && al16(a.inp) && al16(a.bits), Dropout<T>{a});
}

template <class T>
struct Clip {
  void* data;
  float coef;
  template <class I>
  __device__ __forceinline__ void vec(I v) const {
    float x[8];
    ld8f<T>(data, v, x);
#pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = __fmul_rn(x[k], coef);
    st8<T>(data, v, x);
  }
  __device__ __forceinline__ void one(long long i) const { store1<T>(data, i, __fmul_rn(load1<T>(data, i), coef)); }
};
template <class T>
__device__ void clip(const accel_nn_clip_args& a) {
  const float coef = __fdiv_rn(a.max_norm, __fadd_rn(*a.norm, 1e-6f));
  if (!(coef < 1.0f)) return;
  elementwise8(a.n, al16(a.data), Clip<T>{a.data, coef});
}

}  // namespace

#define ACCEL_NN_KERNEL(name, args_type)                                                              \
  extern "C" __global__ void accel_nn_##name##_f32(const args_type a) { name<f32>(a); }              \
  extern "C" __global__ void accel_nn_##name##_bf16(const args_type a) { name<bf16>(a); }            \
  extern "C" __global__ void accel_nn_##name##_f16(const args_type a) { name<f16>(a); }
// With a block-size bound, so that the compiler keeps the registers a block of `threads` can have.
#define ACCEL_NN_KERNEL_BOUNDED(name, args_type, threads)                                                          \
  extern "C" __global__ void __launch_bounds__(threads) accel_nn_##name##_f32(const args_type a) { name<f32>(a); }   \
  extern "C" __global__ void __launch_bounds__(threads) accel_nn_##name##_bf16(const args_type a) { name<bf16>(a); } \
  extern "C" __global__ void __launch_bounds__(threads) accel_nn_##name##_f16(const args_type a) { name<f16>(a); }

ACCEL_NN_KERNEL(embedding_forward, accel_nn_embedding_forward_args)
ACCEL_NN_KERNEL_BOUNDED(embedding_backward, accel_nn_embedding_backward_args, emb_backward_threads)
extern "C" __global__ void accel_nn_layernorm_forward_f32(const accel_nn_layernorm_forward_args a) {
  layernorm_forward<f32>(a);
}
extern "C" __global__ void __launch_bounds__(ln_forward_threads, ln_forward_min_blocks_bf16)
    accel_nn_layernorm_forward_bf16(const accel_nn_layernorm_forward_args a) {
  layernorm_forward<bf16>(a);
}
extern "C" __global__ void accel_nn_layernorm_forward_f16(const accel_nn_layernorm_forward_args a) {
  layernorm_forward<f16>(a);
}
extern "C" __global__ void __launch_bounds__(ln_backward_threads_other)
    accel_nn_layernorm_backward_f32(const accel_nn_layernorm_backward_args a) {
  layernorm_backward<f32>(a);
}
extern "C" __global__ void __launch_bounds__(ln_backward_threads_bf16)
    accel_nn_layernorm_backward_bf16(const accel_nn_layernorm_backward_args a) {
  layernorm_backward<bf16>(a);
}
extern "C" __global__ void __launch_bounds__(ln_backward_threads_other)
    accel_nn_layernorm_backward_f16(const accel_nn_layernorm_backward_args a) {
  layernorm_backward<f16>(a);
}
ACCEL_NN_KERNEL(layernorm_backward_reduce, accel_nn_layernorm_backward_args)
ACCEL_NN_KERNEL(gelu_forward, accel_nn_gelu_forward_args)
ACCEL_NN_KERNEL(gelu_backward, accel_nn_gelu_backward_args)
ACCEL_NN_KERNEL(cross_entropy, accel_nn_cross_entropy_args)
ACCEL_NN_KERNEL(add, accel_nn_add_args)
ACCEL_NN_KERNEL(dropout, accel_nn_dropout_args)
ACCEL_NN_KERNEL(clip, accel_nn_clip_args)
