// flash_attention.cuh — the engine's causal self-attention on CUDA tensor cores for 16-bit activations
// (bfloat16, float16), the scores kept on chip (FlashAttention-2's scheme, written for this engine):
// included by attention.cu, compiled by NVRTC for sm_80 and later. Arguments: gpt_attention_args
// (attention.h), with att = the rows' log-sum-exp (float, [B x NH x T], log2 units) and scratch = the
// rows' D = dy . y (float, [B x NH x T], written by the backward's first kernel, read by its second).
//
// Tiles of 64 queries x 64 keys; a block of 4 warps, each warp 16 rows of the tile, the products on
// mma.sync m16n8k16 (16-bit inputs, fp32 accumulators); the tiles of K, V (forward, dq) or Q, dy
// (dk, dv) staged in shared memory as [row][HS + 8] (the padding keeps the fragment loads free of bank
// conflicts). Forward: online softmax over the key tiles up to the diagonal. Backward in two kernels,
// both recomputing P from the log-sum-exp: per query tile dq (and D); per key tile dk and dv, walking
// the query tiles from the diagonal down, each tile in halves of 32. No atomics: each output element
// is written once, its sums taken in a fixed order, so results do not depend on the schedule.
// --flash-backward fused: one kernel per key tile instead (backward_fused, below), dq too, its float32
// sums across key tiles added in a fixed order. tests/engine/test_flash_host.cpp runs all of these on
// the CPU through an emulation of the PTX they use (tests/engine/flash_host.hpp), against float64.
// Attention dropout: the same random words and rule as the other kernels (attention.h).
//
// Speed (an H200, Nsight Compute, gpt2 bf16, us per call): these kernels were limited by instruction
// issue more than by the tensor cores or shared memory — the SASS of the dk/dv loop held ~2,500
// instructions per 128 mma. Cut to about half: the causal mask and the T bounds only on the tiles
// that need them (the diagonal, the last partial tile), p = 2^(s sl2 - m) as one fma, dropout's
// per-element branch compiled out when off, a tile's copies at a fixed trip count (the generic loop
// was a third of the loop's code), the dk/dv kernel's lse and D staged by cp.async with its tiles
// (plain loads stalled two warps a tile): dk/dv 205 -> 130, dq 124 -> 99, forward 90 -> 76, the
// step's attention 5.02 -> 3.66 ms. Resident blocks per SM (GPT_FLASH_*_BLOCKS below): the forward
// at 4 (128 registers) and dq at 3 (168) each ~2-3 % faster than at 3 and 4; dk/dv at 3 (168, a few
// spilled) — at 2 (254, none) the same, at 4 heavy spills. Tried before and not kept: 128-query
// forward tiles of 32 rows per warp (255 registers, 2 blocks), no faster.
#ifndef GPT_FLASH_ATTENTION_CUH
#define GPT_FLASH_ATTENTION_CUH

#include "attention.h"

namespace flash {

constexpr int tile = 64;       // queries (and keys) per tile
constexpr int threads = 128;   // 4 warps x 16 rows
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

struct bf16_tag {
  static constexpr bool bf16 = true;
};
struct f16_tag {
  static constexpr bool bf16 = false;
};

// The PTX primitives. With GPT_FLASH_HOST defined (the CPU tests, tests/engine/flash_host.hpp), the
// same calls come from an emulation of a block's warps on the host instead, so that the kernels below
// are checked without a GPU.
#ifndef GPT_FLASH_HOST
__device__ __forceinline__ void mma(float c[4], const unsigned a[4], unsigned b0, unsigned b1, bf16_tag) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma(float c[4], const unsigned a[4], unsigned b0, unsigned b1, f16_tag) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as one register of two 16-bit values, lo in the low half (round to nearest even).
__device__ __forceinline__ unsigned pack(float lo, float hi, bf16_tag) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ unsigned pack(float lo, float hi, f16_tag) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ float widen(unsigned short v, bf16_tag) { return __uint_as_float(((unsigned)v) << 16); }
__device__ __forceinline__ float widen(unsigned short v, f16_tag) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
  return f;
}

__device__ __forceinline__ float fast_exp2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// Global -> shared copies of 16 or 4 bytes by cp.async, zero-filled when !valid (asynchronous:
// cp_async_commit() closes the group, cp_async_wait<N>() waits until at most N groups are in flight).
__device__ __forceinline__ void cp_async16(unsigned short* dst, const unsigned short* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Four 8 x 8 matrices of 16-bit values from shared memory in one instruction (ldmatrix): lane L
// gives the address of row L % 8 of matrix L / 8; r[m] is this lane's part of matrix m, in the
// layout of an mma fragment register (.trans: of the transposed matrix).
__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const unsigned short* row) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned (&r)[4], const unsigned short* row) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
// float2 loads and stores at L2 (.cg): another SM wrote the partial sums, and this SM's L1 may hold an
// older copy of the line.
__device__ __forceinline__ float2 ld_cg2(const float* p) {
  float2 v;
  asm volatile("ld.global.cg.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_cg2(float* p, float2 v) {
  asm volatile("st.global.cg.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(v.x), "f"(v.y) : "memory");
}
__device__ __forceinline__ unsigned short narrow(float x, bf16_tag) {
  unsigned short r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ unsigned short narrow(float x, f16_tag) {
  unsigned short r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}
#else
using namespace ::flash_host::primitives;
#endif  // GPT_FLASH_HOST

__device__ __forceinline__ float lo_of(unsigned v, bf16_tag t) { return widen((unsigned short)(v & 0xFFFFu), t); }
__device__ __forceinline__ float hi_of(unsigned v, bf16_tag t) { return widen((unsigned short)(v >> 16), t); }
__device__ __forceinline__ float lo_of(unsigned v, f16_tag t) { return widen((unsigned short)(v & 0xFFFFu), t); }
__device__ __forceinline__ float hi_of(unsigned v, f16_tag t) { return widen((unsigned short)(v >> 16), t); }

__device__ __forceinline__ unsigned ld32(const unsigned short* p) { return *reinterpret_cast<const unsigned*>(p); }
// Two 16-bit values from two rows of a shared tile (the k-pairs of a B fragment read across rows).
__device__ __forceinline__ unsigned ld_pair(const unsigned short* p, int stride) {
  return (unsigned)p[0] | ((unsigned)p[stride] << 16);
}

// Rows [r0, r0 + 64) of a [rows x ld] 16-bit matrix, columns [0, HS), into a shared [64][HS + 8] tile
// by cp.async; rows at or past `rows` are zero-filled.
template <int HS>
__device__ __forceinline__ void load_tile(unsigned short* dst, const unsigned short* src, long long ld, int r0,
                                          int rows) {
  // Thread t copies column chunk t % chunks of rows t / chunks + k (threads / chunks): a fixed trip
  // count, so the copies unroll without a loop's bookkeeping (this runs once a tile, in the inner loop).
  constexpr int chunks = HS / 8, stride = HS + 8, step = threads / chunks, passes = tile / step;
  static_assert(threads % chunks == 0 && tile % step == 0, "flash: a tile's rows split evenly over the threads");
  const int r = threadIdx.x / chunks, c = (threadIdx.x % chunks) * 8;
  const unsigned short* from = src + (long long)(r0 + r) * ld + c;
  unsigned short* to = dst + r * stride + c;
#pragma unroll
  for (int k = 0; k < passes; ++k) {
    const bool valid = r0 + r + k * step < rows;
    cp_async16(to + k * step * stride, valid ? from + k * step * ld : src, valid);
  }
}

// The A fragments (16 rows x HS) of rows [r0, r0 + 16) of a [rows x ld] 16-bit matrix from global memory.
template <int HS>
__device__ __forceinline__ void load_a(unsigned (&f)[HS / 16][4], const unsigned short* src, long long ld, long long r0,
                                       long long rows) {
  const int lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
  const long long ra = r0 + g, rb = r0 + g + 8;
#pragma unroll
  for (int k = 0; k < HS / 16; ++k) {
    const int c = k * 16 + q * 2;
    f[k][0] = ra < rows ? ld32(src + ra * ld + c) : 0u;
    f[k][1] = rb < rows ? ld32(src + rb * ld + c) : 0u;
    f[k][2] = ra < rows ? ld32(src + ra * ld + c + 8) : 0u;
    f[k][3] = rb < rows ? ld32(src + rb * ld + c + 8) : 0u;
  }
}


// acc[n] (16 x 8 tiles n = 0..NT-1, a 16 x 8NT block) += A (16 x HS) x tile^T, the shared tile
// [8NT][HS + 8] holding the columns' rows (B[k][n] = tile[n][k]). One ldmatrix gives the B fragments
// of two k-steps of a column tile: matrices (columns 32j + 8m of its 8 rows), m = 0..3. The forward
// takes the 8 column tiles of a 64-key tile at once; the backward, a tile in halves (NT = 4), in the
// same order, so that its scores and their gradients live in half the registers.
template <int HS, int NT, class D>
__device__ __forceinline__ void mma_abt(float (&acc)[NT][4], const unsigned (&a)[HS / 16][4], const unsigned short* t) {
  constexpr int stride = HS + 8;
  const int lane = threadIdx.x % 32;
  const unsigned short* base = t + (lane % 8) * stride + (lane / 8) * 8;
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int j = 0; j < HS / 32; ++j) {
      unsigned b[4];
      ldsm_x4(b, base + n * 8 * stride + j * 32);
      mma(acc[n], a[2 * j], b[0], b[1], D());
      mma(acc[n], a[2 * j + 1], b[2], b[3], D());
    }
  }
}

// out[n] (16 x HS: HS / 8 tiles) += P (16 x 16NS, the accumulator layout of p) x tile, the shared tile
// [16NS][HS + 8] holding the rows (B[k][n] = tile[k][n]); p rounded to 16 bits first. One transposing
// ldmatrix gives the B fragments of two column tiles of a k-step: matrices (rows 16s + 8 (m % 2),
// columns 8 (n + m / 2)).
template <int HS, int NS, class D>
__device__ __forceinline__ void mma_pt(float (&out)[HS / 8][4], const float (&p)[2 * NS][4], const unsigned short* t) {
  constexpr int stride = HS + 8;
  const int lane = threadIdx.x % 32, m = lane / 8;
  const unsigned short* base = t + ((m % 2) * 8 + lane % 8) * stride + (m / 2) * 8;
#pragma unroll
  for (int s = 0; s < NS; ++s) {
    const unsigned a[4] = {pack(p[2 * s][0], p[2 * s][1], D()), pack(p[2 * s][2], p[2 * s][3], D()),
                           pack(p[2 * s + 1][0], p[2 * s + 1][1], D()), pack(p[2 * s + 1][2], p[2 * s + 1][3], D())};
#pragma unroll
    for (int n = 0; n < HS / 8; n += 2) {
      unsigned b[4];
      ldsm_x4_trans(b, base + s * 16 * stride + n * 8);
      mma(out[n], a, b[0], b[1], D());
      mma(out[n + 1], a, b[2], b[3], D());
    }
  }
}

__device__ __forceinline__ float keep(const gpt_attention_args& a, long long idx) {
  return a.bits == nullptr ? 1.0f : (a.bits[idx] >= a.threshold ? a.scale : 0.0f);
}

// Forward: block (query tile, head, batch); the heaviest tiles (the last, most keys) first.
// Shared memory: the entry points' (one copy for both instantiations, with and without dropout).
template <int HS>
struct Smem {
  static constexpr int words = tile * (HS + 8);
  unsigned short a[2 * words];  // two stages: tile t + 1 loads while t computes (forward, dq: K; dkv: q)
  unsigned short b[2 * words];  // forward, dq: V; dkv: dy
  float lse[2 * tile];          // dkv: the query tiles' log-sum-exp and D
  float dsum[2 * tile];
};

template <class D, int HS, bool Dropout>
__device__ void forward(const gpt_attention_args& a, Smem<HS>& sm) {
  constexpr int words = tile * (HS + 8);
  unsigned short* ks_buf = sm.a;
  unsigned short* vs_buf = sm.b;
  const int T = (int)a.T;
  const long long C = a.C, ld3 = 3 * C;
  const int tiles = (int)((T + tile - 1) / tile);
  const int qt = tiles - 1 - (int)blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
  const long long bh = (long long)b * a.NH + h;
  const unsigned short* qkv = static_cast<const unsigned short*>(a.qkv) + (long long)b * T * ld3 + h * HS;
  const int r0 = qt * tile + warp * 16;  // this warp's first query row
  const float sl2 = 1.4426950408889634f * rsqrtf((float)HS);  // softmax scale, log2 units

  load_tile<HS>(ks_buf, qkv + C, ld3, 0, T);
  load_tile<HS>(vs_buf, qkv + 2 * C, ld3, 0, T);
  cp_async_commit();
  unsigned qf[HS / 16][4];
  load_a<HS>(qf, qkv, ld3, r0, T);
  float o[HS / 8][4];
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {neg_inf(), neg_inf()}, l[2] = {0.0f, 0.0f};

  for (int kt = 0; kt <= qt; ++kt) {
    if (kt < qt) {  // the next tiles into the other stage (its last readers passed the loop's end barrier)
      load_tile<HS>(ks_buf + ((kt + 1) & 1) * words, qkv + C, ld3, (kt + 1) * tile, T);
      load_tile<HS>(vs_buf + ((kt + 1) & 1) * words, qkv + 2 * C, ld3, (kt + 1) * tile, T);
    }
    cp_async_commit();
    cp_async_wait<1>();  // tile kt has landed (only the group just issued may still be in flight)
    __syncthreads();
    const unsigned short* ks = ks_buf + (kt & 1) * words;
    const unsigned short* vs = vs_buf + (kt & 1) * words;
    float s[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
    mma_abt<HS, 8, D>(s, qf, ks);
    if (kt == qt) {  // the diagonal tile (and any columns past T, which lie in it): keys after the row out
#pragma unroll
      for (int n = 0; n < 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = r0 + g + (e >> 1) * 8, col = kt * tile + n * 8 + q * 2 + (e & 1);
          if (col > row) s[n][e] = neg_inf();
        }
      }
    }
    // The row maxima of the raw scores (scaling by sl2 > 0 keeps the order), then p = 2^(s sl2 - m) by
    // one fma an element.
    float mx[2] = {neg_inf(), neg_inf()};
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
      mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
    }
    float alpha[2], neg_m[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xFFFFFFFFu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xFFFFFFFFu, mx[r], 2));
      const float mn = fmaxf(m[r], __fmul_rn(mx[r], sl2));  // finite: every row sees its own key in its diagonal tile
      alpha[r] = fast_exp2(__fsub_rn(m[r], mn));
      m[r] = mn;
      neg_m[r] = -mn;
      l[r] = __fmul_rn(l[r], alpha[r]);
    }
#pragma unroll
    for (int n = 0; n < 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = fast_exp2(__fmaf_rn(s[n][e], sl2, neg_m[e >> 1]));
        l[e >> 1] = __fadd_rn(l[e >> 1], p);
        s[n][e] = p;
        if constexpr (Dropout) {
          const int row = r0 + g + (e >> 1) * 8, col = kt * tile + n * 8 + q * 2 + (e & 1);
          s[n][e] = row < T && col < T ? __fmul_rn(p, keep(a, (bh * T + row) * T + col)) : 0.0f;
        }
      }
    }
#pragma unroll
    for (int n = 0; n < HS / 8; ++n) {
      o[n][0] = __fmul_rn(o[n][0], alpha[0]);
      o[n][1] = __fmul_rn(o[n][1], alpha[0]);
      o[n][2] = __fmul_rn(o[n][2], alpha[1]);
      o[n][3] = __fmul_rn(o[n][3], alpha[1]);
    }
    mma_pt<HS, 4, D>(o, s, vs);
    __syncthreads();  // this stage is read: the next iteration's loads may overwrite it
  }

  unsigned short* y = static_cast<unsigned short*>(a.y) + (long long)b * T * C + h * HS;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] = __fadd_rn(l[r], __shfl_xor_sync(0xFFFFFFFFu, l[r], 1));
    l[r] = __fadd_rn(l[r], __shfl_xor_sync(0xFFFFFFFFu, l[r], 2));
    const long long row = r0 + g + r * 8;
    if (row >= T) continue;
    const float inv = __fdiv_rn(1.0f, l[r]);
#pragma unroll
    for (int n = 0; n < HS / 8; ++n) {
      *reinterpret_cast<unsigned*>(y + row * C + n * 8 + q * 2) =
          pack(__fmul_rn(o[n][2 * r], inv), __fmul_rn(o[n][2 * r + 1], inv), D());
    }
    if (q == 0) a.att[bh * T + row] = __fadd_rn(m[r], __log2f(l[r]));
  }
}

// Backward, first kernel: block (query tile, head, batch). D = dy . y per row (into scratch), then
// dq = scale sum over the key tiles of dS K, dS = P (dP - D), dP = (dy v^T) x the dropout's factors.
template <class D, int HS, bool Dropout>
__device__ void backward_dq(const gpt_attention_args& a, Smem<HS>& sm) {
  constexpr int words = tile * (HS + 8);
  unsigned short* ks_buf = sm.a;
  unsigned short* vs_buf = sm.b;
  const int T = (int)a.T;
  const long long C = a.C, ld3 = 3 * C;
  const int tiles = (int)((T + tile - 1) / tile);
  const int qt = tiles - 1 - (int)blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
  const long long bh = (long long)b * a.NH + h;
  const unsigned short* qkv = static_cast<const unsigned short*>(a.qkv) + (long long)b * T * ld3 + h * HS;
  const unsigned short* dy = static_cast<const unsigned short*>(a.dy) + (long long)b * T * C + h * HS;
  const unsigned short* y = static_cast<const unsigned short*>(a.y) + (long long)b * T * C + h * HS;
  const int r0 = qt * tile + warp * 16;
  const float sl2 = 1.4426950408889634f * rsqrtf((float)HS);

  load_tile<HS>(ks_buf, qkv + C, ld3, 0, T);
  load_tile<HS>(vs_buf, qkv + 2 * C, ld3, 0, T);
  cp_async_commit();
  unsigned qf[HS / 16][4], df[HS / 16][4], yf[HS / 16][4];
  load_a<HS>(qf, qkv, ld3, r0, T);
  load_a<HS>(df, dy, C, r0, T);
  load_a<HS>(yf, y, C, r0, T);
  float dsum[2] = {0.0f, 0.0f}, neg_lse[2];
#pragma unroll
  for (int k = 0; k < HS / 16; ++k) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float& acc = dsum[e & 1];  // registers 0 and 2: row g; 1 and 3: row g + 8
      acc = __fmaf_rn(lo_of(df[k][e], D()), lo_of(yf[k][e], D()), acc);
      acc = __fmaf_rn(hi_of(df[k][e], D()), hi_of(yf[k][e], D()), acc);
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    dsum[r] = __fadd_rn(dsum[r], __shfl_xor_sync(0xFFFFFFFFu, dsum[r], 1));
    dsum[r] = __fadd_rn(dsum[r], __shfl_xor_sync(0xFFFFFFFFu, dsum[r], 2));
    const long long row = r0 + g + r * 8;
    neg_lse[r] = row < T ? -a.att[bh * T + row] : 0.0f;
    if (row < T && q == 0) a.scratch[bh * T + row] = dsum[r];
  }
  float dq[HS / 8][4];
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

  for (int kt = 0; kt <= qt; ++kt) {
    if (kt < qt) {
      load_tile<HS>(ks_buf + ((kt + 1) & 1) * words, qkv + C, ld3, (kt + 1) * tile, T);
      load_tile<HS>(vs_buf + ((kt + 1) & 1) * words, qkv + 2 * C, ld3, (kt + 1) * tile, T);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const unsigned short* ks = ks_buf + (kt & 1) * words;
    const unsigned short* vs = vs_buf + (kt & 1) * words;
    const bool masked = kt == qt || (qt + 1) * tile > T;  // the diagonal tile, or rows past T
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // keys [32 half, 32 half + 32) of the tile
      float s[4][4], dp[4][4];
#pragma unroll
      for (int n = 0; n < 4; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.0f;
      }
      mma_abt<HS, 4, D>(s, qf, ks + half * 32 * (HS + 8));
      mma_abt<HS, 4, D>(dp, df, vs + half * 32 * (HS + 8));
      if (masked) {  // keys after the row, and rows past T, out (p = 0)
#pragma unroll
        for (int n = 0; n < 4; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int row = r0 + g + (e >> 1) * 8, col = kt * tile + half * 32 + n * 8 + q * 2 + (e & 1);
            if (!(col <= row && row < T)) s[n][e] = neg_inf();
          }
        }
      }
#pragma unroll
      for (int n = 0; n < 4; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1;
          const float p = fast_exp2(__fmaf_rn(s[n][e], sl2, neg_lse[r]));
          float d = dp[n][e];
          if constexpr (Dropout) {
            const int row = r0 + g + r * 8, col = kt * tile + half * 32 + n * 8 + q * 2 + (e & 1);
            d = col <= row && row < T ? __fmul_rn(d, keep(a, (bh * T + row) * T + col)) : 0.0f;
          }
          s[n][e] = __fmul_rn(p, __fsub_rn(d, dsum[r]));
        }
      }
      mma_pt<HS, 2, D>(dq, s, ks + half * 32 * (HS + 8));
    }
    __syncthreads();
  }

  unsigned short* out = static_cast<unsigned short*>(a.dqkv) + (long long)b * T * ld3 + h * HS;
  const float scale = rsqrtf((float)HS);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const long long row = r0 + g + r * 8;
    if (row >= T) continue;
#pragma unroll
    for (int n = 0; n < HS / 8; ++n) {
      *reinterpret_cast<unsigned*>(out + row * ld3 + n * 8 + q * 2) =
          pack(__fmul_rn(dq[n][2 * r], scale), __fmul_rn(dq[n][2 * r + 1], scale), D());
    }
  }
}

// Backward, second kernel: block (key tile, head, batch), the heaviest (the first, most queries)
// first. Over the query tiles from the diagonal: dv += Pd^T dy, dk += scale dS^T q (the transposed
// products: rows of the accumulators are keys).
template <class D, int HS, bool Dropout>
__device__ void backward_dkv(const gpt_attention_args& a, Smem<HS>& sm) {
  constexpr int words = tile * (HS + 8);
  unsigned short* qs_buf = sm.a;
  unsigned short* dys_buf = sm.b;  // dy of the query tile
  float* lse_buf = sm.lse;
  float* dsum_buf = sm.dsum;
  const int T = (int)a.T;
  const long long C = a.C, ld3 = 3 * C;
  const int tiles = (int)((T + tile - 1) / tile);
  const int kt = (int)blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
  const long long bh = (long long)b * a.NH + h;
  const unsigned short* qkv = static_cast<const unsigned short*>(a.qkv) + (long long)b * T * ld3 + h * HS;
  const unsigned short* dy = static_cast<const unsigned short*>(a.dy) + (long long)b * T * C + h * HS;
  const int k0 = kt * tile + warp * 16;  // this warp's first key row
  const float sl2 = 1.4426950408889634f * rsqrtf((float)HS);

  // Stage (qt & 1) of the query tile qt: q and dy by cp.async, the rows' lse and D
  const auto stage = [&](int qt) {
    const int st = qt & 1;
    load_tile<HS>(qs_buf + st * words, qkv, ld3, qt * tile, T);
    load_tile<HS>(dys_buf + st * words, dy, C, qt * tile, T);
    // by cp.async too (4 bytes a thread; rows past T zero-filled): a plain load would stall the
    // thread until it lands, before it computes this tile
    static_assert(threads == 2 * tile, "flash: one thread a row's lse or D");
    {
      const int i = threadIdx.x, r = i % tile, row = qt * tile + r;
      const bool valid = row < T;
      const float* src = (i < tile ? a.att : a.scratch) + (valid ? bh * T + row : 0);
      cp_async4((i < tile ? lse_buf : dsum_buf) + st * tile + r, src, valid);
    }
  };
  stage(kt);
  cp_async_commit();
  unsigned kf[HS / 16][4], vf[HS / 16][4];
  load_a<HS>(kf, qkv + C, ld3, k0, T);
  load_a<HS>(vf, qkv + 2 * C, ld3, k0, T);
  float dk[HS / 8][4], dv[HS / 8][4];
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.0f;
  }

  for (int qt = kt; qt < tiles; ++qt) {
    if (qt + 1 < tiles) stage(qt + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const unsigned short* qs = qs_buf + (qt & 1) * words;
    const unsigned short* ds_tile = dys_buf + (qt & 1) * words;
    const float* lse_s = lse_buf + (qt & 1) * tile;
    const float* dsum_s = dsum_buf + (qt & 1) * tile;
    const bool masked = qt == kt || (qt + 1) * tile > T;  // the diagonal tile, or rows past T
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // queries [32 half, 32 half + 32) of the tile
      float s[4][4], dp[4][4];  // rows: keys; columns: queries
#pragma unroll
      for (int n = 0; n < 4; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.0f;
      }
      mma_abt<HS, 4, D>(s, kf, qs + half * 32 * (HS + 8));
      mma_abt<HS, 4, D>(dp, vf, ds_tile + half * 32 * (HS + 8));
      if (masked) {  // queries before the key, and rows past T, out (p = 0)
#pragma unroll
        for (int n = 0; n < 4; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = k0 + g + (e >> 1) * 8, row = qt * tile + half * 32 + n * 8 + q * 2 + (e & 1);
            if (!(key <= row && row < T)) s[n][e] = neg_inf();
          }
        }
      }
      // s becomes Pd (P x the dropout's factors), dp becomes dS, in place (fewer live registers). The
      // columns' log-sum-exp and D in pairs (columns 2q, 2q + 1 of each 8).
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        const int c0 = half * 32 + n * 8 + q * 2;
        const float2 lse2 = *reinterpret_cast<const float2*>(lse_s + c0);
        const float2 dsum2 = *reinterpret_cast<const float2*>(dsum_s + c0);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float lse = (e & 1) ? lse2.y : lse2.x, dsum = (e & 1) ? dsum2.y : dsum2.x;
          const float p = fast_exp2(__fmaf_rn(s[n][e], sl2, -lse));
          float pdv = p, d = dp[n][e];
          if constexpr (Dropout) {
            const int key = k0 + g + (e >> 1) * 8, row = qt * tile + c0 + (e & 1);
            const float kv = key <= row && row < T ? keep(a, (bh * T + row) * T + key) : 0.0f;
            pdv = __fmul_rn(p, kv);
            d = __fmul_rn(d, kv);
          }
          s[n][e] = pdv;
          dp[n][e] = __fmul_rn(p, __fsub_rn(d, dsum));
        }
      }
      mma_pt<HS, 2, D>(dv, s, ds_tile + half * 32 * (HS + 8));
      mma_pt<HS, 2, D>(dk, dp, qs + half * 32 * (HS + 8));
    }
    __syncthreads();
  }

  unsigned short* out = static_cast<unsigned short*>(a.dqkv) + (long long)b * T * ld3 + h * HS;
  const float scale = rsqrtf((float)HS);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const long long key = k0 + g + r * 8;
    if (key >= T) continue;
#pragma unroll
    for (int n = 0; n < HS / 8; ++n) {
      *reinterpret_cast<unsigned*>(out + key * ld3 + C + n * 8 + q * 2) =
          pack(__fmul_rn(dk[n][2 * r], scale), __fmul_rn(dk[n][2 * r + 1], scale), D());
      *reinterpret_cast<unsigned*>(out + key * ld3 + 2 * C + n * 8 + q * 2) = pack(dv[n][2 * r], dv[n][2 * r + 1], D());
    }
  }
}

// ---- The one-kernel backward (--flash-backward fused; attention.h, GPT_FLASH_FUSED_SCRATCH_FLOATS) ----
// The two kernels above compute S and dP twice, once per query tile (for dq) and once per key tile (for
// dk, dv): 7 products of a tile pair where 5 would do. This kernel is the key-tile kernel plus dq:
// dq^T (head dims x queries) += K^T dS^T's transpose, i.e. dq^T = K^T dS, from dS rounded to 16 bits in
// shared memory ([key][query]) and K^T's A fragments held in registers. Its dq tile goes to a float32
// partial sum in global memory; a query tile's partial sums are added in a fixed order — key tiles from
// the diagonal down (kt = qt, qt - 1, ..., 0), the order in which the blocks reach the tile when they
// start together — each block waiting for a per-(b, h, query tile) counter, so the bits do not depend on
// the schedule (no atomics on the sums). The last (kt = 0) writes dq, scaled and rounded, into dqkv.
// Blocks take their tile from a ticket counter in the order the dependencies point (a group's key tiles
// from the last), so a block only ever waits for a block that is already running: no deadlock at any
// occupancy. backward_prep (launched first on the stream) computes D and zeroes the counters.
// Its loop over a tile pair repeats backward_dkv's, plus the dS store, rather than sharing a helper:
// factored out, backward_dkv's SASS changed (3,144 -> 3,120 instructions, other spills), and that kernel's
// schedule is the one timed on an H200; this one's is not yet.


// Where the one-kernel backward's scratch puts its parts (attention.h).
struct FusedScratch {
  float* dsum;        // [B x NH x T]: D = dy . y per row
  float* partial;     // [B x NH x tiles][HS][64]: dq^T partial sums of each query tile
  unsigned* counters; // [B x NH x tiles]: the key tiles added to each query tile's sum; then the ticket
  unsigned* ticket;
};
__device__ __forceinline__ FusedScratch fused_scratch(const gpt_attention_args& a, int HS) {
  const long long bhs = a.B * a.NH, tiles = GPT_FLASH_TILES(a.T);
  FusedScratch f;
  f.dsum = a.scratch;
  f.partial = a.scratch + GPT_FLASH_DSUM_FLOATS(a.B, a.NH, a.T);
  f.counters = reinterpret_cast<unsigned*>(f.partial + bhs * tiles * 64 * HS);
  f.ticket = f.counters + bhs * tiles;
  return f;
}

// Block (query tile, head, batch) of 128 threads, two a row: D = dy . y of the tile's rows; the tile's
// counter (and, in block 0, the ticket) to zero.
template <class D, int HS>
__device__ void backward_prep(const gpt_attention_args& a) {
  const int T = (int)a.T;
  const long long C = a.C;
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const long long bh = (long long)b * a.NH + h;
  const FusedScratch f = fused_scratch(a, HS);
  const int r = threadIdx.x / 2, part = threadIdx.x % 2;
  const long long row = (long long)qt * tile + r;
  float acc = 0.0f;
  if (row < T) {
    const long long at = ((long long)b * T + row) * C + h * HS + part * (HS / 2);
    const uint4* dy = reinterpret_cast<const uint4*>(static_cast<const unsigned short*>(a.dy) + at);
    const uint4* y = reinterpret_cast<const uint4*>(static_cast<const unsigned short*>(a.y) + at);
#pragma unroll
    for (int k = 0; k < HS / 16; ++k) {  // 8 values a load
      const uint4 u = dy[k], v = y[k];
      const unsigned uw[4] = {u.x, u.y, u.z, u.w}, vw[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc = __fmaf_rn(lo_of(uw[e], D()), lo_of(vw[e], D()), acc);
        acc = __fmaf_rn(hi_of(uw[e], D()), hi_of(vw[e], D()), acc);
      }
    }
  }
  acc = __fadd_rn(acc, __shfl_xor_sync(0xFFFFFFFFu, acc, 1));
  if (row < T && part == 0) f.dsum[bh * T + row] = acc;
  if (threadIdx.x == 0) f.counters[bh * gridDim.x + qt] = 0u;
  if (threadIdx.x == 0 && qt == 0 && h == 0 && b == 0) *f.ticket = 0u;
}

template <int HS>
struct SmemFused : Smem<HS> {
  static constexpr int ds_stride = tile + 8;
  unsigned short ds[tile * ds_stride];  // dS of the query tile, [key][query]; at the start, the K tile
  unsigned ticket;
};

template <class D, int HS, bool Dropout>
__device__ void backward_fused(const gpt_attention_args& a, SmemFused<HS>& sm) {
  constexpr int words = tile * (HS + 8), ds_stride = SmemFused<HS>::ds_stride;
  // dq^T's split over the warps: HS / 16 groups of head dims, the 64 queries shared by the rest
  constexpr int hs_groups = HS / 16, q_parts = 4 / hs_groups, QN = tile / 8 / q_parts;
  static_assert(4 % hs_groups == 0 && QN % 2 == 0, "flash: dq^T's tiles split evenly over the 4 warps");
  unsigned short* qs_buf = sm.a;
  unsigned short* dys_buf = sm.b;
  float* lse_buf = sm.lse;
  float* dsum_buf = sm.dsum;
  const int T = (int)a.T;
  const long long C = a.C, ld3 = 3 * C;
  const int tiles = (int)((T + tile - 1) / tile);
  const FusedScratch f = fused_scratch(a, HS);
  if (threadIdx.x == 0) sm.ticket = atomicAdd(f.ticket, 1u);
  __syncthreads();
  const int ticket = (int)sm.ticket, group = ticket / tiles;
  const int kt = tiles - 1 - ticket % tiles, h = group % (int)a.NH, b = group / (int)a.NH;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
  const int hg = warp % hs_groups, q0 = (warp / hs_groups) * QN * 8;  // this warp's dq^T: head dims 16 hg.., queries q0..
  const long long bh = (long long)b * a.NH + h;
  const unsigned short* qkv = static_cast<const unsigned short*>(a.qkv) + (long long)b * T * ld3 + h * HS;
  const unsigned short* dy = static_cast<const unsigned short*>(a.dy) + (long long)b * T * C + h * HS;
  const int k0 = kt * tile + warp * 16;
  const float sl2 = 1.4426950408889634f * rsqrtf((float)HS);

  const auto stage = [&](int qt) {
    const int st = qt & 1;
    load_tile<HS>(qs_buf + st * words, qkv, ld3, qt * tile, T);
    load_tile<HS>(dys_buf + st * words, dy, C, qt * tile, T);
    const int i = threadIdx.x, r = i % tile, row = qt * tile + r;
    const bool valid = row < T;
    const float* src = (i < tile ? a.att : f.dsum) + (valid ? bh * T + row : 0);
    cp_async4((i < tile ? lse_buf : dsum_buf) + st * tile + r, src, valid);
  };
  stage(kt);
  load_tile<HS>(sm.ds, qkv + C, ld3, kt * tile, T);  // K, for K^T's fragments
  cp_async_commit();
  unsigned kf[HS / 16][4], vf[HS / 16][4], kT[tile / 16][4];
  load_a<HS>(kf, qkv + C, ld3, k0, T);
  load_a<HS>(vf, qkv + 2 * C, ld3, k0, T);
  cp_async_wait<0>();
  __syncthreads();
  {  // K^T (head dims 16 hg.. x the tile's 64 keys) as A fragments: transposed 8 x 8 loads of K
    const int m = lane / 8;
    const unsigned short* base = sm.ds + ((m / 2) * 8 + lane % 8) * (HS + 8) + 16 * hg + (m % 2) * 8;
#pragma unroll
    for (int s = 0; s < tile / 16; ++s) ldsm_x4_trans(kT[s], base + s * 16 * (HS + 8));
  }
  float dk[HS / 8][4], dv[HS / 8][4];
#pragma unroll
  for (int n = 0; n < HS / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.0f;
  }
  const float scale = rsqrtf((float)HS);
  unsigned short* dqkv = static_cast<unsigned short*>(a.dqkv) + (long long)b * T * ld3 + h * HS;

  for (int qt = kt; qt < tiles; ++qt) {
    if (qt + 1 < tiles) stage(qt + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // tile qt landed; every warp has read K (first pass) and the last dS (later passes)
    const unsigned short* qs = qs_buf + (qt & 1) * words;
    const unsigned short* ds_tile = dys_buf + (qt & 1) * words;
    const float* lse_s = lse_buf + (qt & 1) * tile;
    const float* dsum_s = dsum_buf + (qt & 1) * tile;
    const bool masked = qt == kt || (qt + 1) * tile > T;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float s[4][4], dp[4][4];
#pragma unroll
      for (int n = 0; n < 4; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.0f;
      }
      mma_abt<HS, 4, D>(s, kf, qs + half * 32 * (HS + 8));
      mma_abt<HS, 4, D>(dp, vf, ds_tile + half * 32 * (HS + 8));
      if (masked) {
#pragma unroll
        for (int n = 0; n < 4; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = k0 + g + (e >> 1) * 8, row = qt * tile + half * 32 + n * 8 + q * 2 + (e & 1);
            if (!(key <= row && row < T)) s[n][e] = neg_inf();
          }
        }
      }
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        const int c0 = half * 32 + n * 8 + q * 2;
        const float2 lse2 = *reinterpret_cast<const float2*>(lse_s + c0);
        const float2 dsum2 = *reinterpret_cast<const float2*>(dsum_s + c0);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float lse = (e & 1) ? lse2.y : lse2.x, dsum = (e & 1) ? dsum2.y : dsum2.x;
          const float p = fast_exp2(__fmaf_rn(s[n][e], sl2, -lse));
          float pdv = p, d = dp[n][e];
          if constexpr (Dropout) {
            const int key = k0 + g + (e >> 1) * 8, row = qt * tile + c0 + (e & 1);
            const float kv = key <= row && row < T ? keep(a, (bh * T + row) * T + key) : 0.0f;
            pdv = __fmul_rn(p, kv);
            d = __fmul_rn(d, kv);
          }
          s[n][e] = pdv;
          dp[n][e] = __fmul_rn(p, __fsub_rn(d, dsum));
        }
        // dS rounded to 16 bits (as the dk product takes it) into [key][query] for dq
        unsigned short* at = sm.ds + (warp * 16 + g) * ds_stride + c0;
        *reinterpret_cast<unsigned*>(at) = pack(dp[n][0], dp[n][1], D());
        *reinterpret_cast<unsigned*>(at + 8 * ds_stride) = pack(dp[n][2], dp[n][3], D());
      }
      mma_pt<HS, 2, D>(dv, s, ds_tile + half * 32 * (HS + 8));
      mma_pt<HS, 2, D>(dk, dp, qs + half * 32 * (HS + 8));
    }
    __syncthreads();  // dS complete (and this stage read)

    // dq^T of this key tile: head dims [16 hg, 16 hg + 16) x queries [q0, q0 + 8 QN), over the 64 keys
    float dq[QN][4];
#pragma unroll
    for (int n = 0; n < QN; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
    {
      const int m = lane / 8;
      const unsigned short* base = sm.ds + ((m % 2) * 8 + lane % 8) * ds_stride + (m / 2) * 8 + q0;
#pragma unroll
      for (int s = 0; s < tile / 16; ++s) {
#pragma unroll
        for (int n = 0; n < QN; n += 2) {
          unsigned bfr[4];
          ldsm_x4_trans(bfr, base + s * 16 * ds_stride + n * 8);
          mma(dq[n], kT[s], bfr[0], bfr[1], D());
          mma(dq[n + 1], kT[s], bfr[2], bfr[3], D());
        }
      }
    }
    // Added to the query tile's sum after the key tiles (qt, qt - 1, ..., kt + 1) that come before
    unsigned* counter = f.counters + bh * tiles + qt;
    if (qt > kt) {
      if (threadIdx.x == 0) {
        while (ld_acquire(counter) != (unsigned)(qt - kt)) __nanosleep(32);
        __threadfence();  // as cooperative groups' grid sync: the block's reads below come after the signal
      }
      __syncthreads();
    }
    float* part = f.partial + (bh * tiles + qt) * (long long)(HS * tile);
#pragma unroll
    for (int n = 0; n < QN; ++n) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int d = 16 * hg + g + 8 * r, col = q0 + n * 8 + q * 2;  // head dim; query in the tile
        float2 v = make_float2(dq[n][2 * r], dq[n][2 * r + 1]);
        if (qt > kt) {
          const float2 before = ld_cg2(part + d * tile + col);
          v = make_float2(__fadd_rn(before.x, v.x), __fadd_rn(before.y, v.y));
        }
        if (kt > 0) {
          st_cg2(part + d * tile + col, v);
        } else {  // the last key tile: dq = scale x the sum, into dqkv
          const long long row = (long long)qt * tile + col;
          if (row < T) dqkv[row * ld3 + d] = narrow(__fmul_rn(v.x, scale), D());
          if (row + 1 < T) dqkv[(row + 1) * ld3 + d] = narrow(__fmul_rn(v.y, scale), D());
        }
      }
    }
    if (kt > 0) {
      __threadfence();
      __syncthreads();
      if (threadIdx.x == 0) st_release(counter, (unsigned)(qt - kt + 1));
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const long long key = k0 + g + r * 8;
    if (key >= T) continue;
#pragma unroll
    for (int n = 0; n < HS / 8; ++n) {
      *reinterpret_cast<unsigned*>(dqkv + key * ld3 + C + n * 8 + q * 2) =
          pack(__fmul_rn(dk[n][2 * r], scale), __fmul_rn(dk[n][2 * r + 1], scale), D());
      *reinterpret_cast<unsigned*>(dqkv + key * ld3 + 2 * C + n * 8 + q * 2) = pack(dv[n][2 * r], dv[n][2 * r + 1], D());
    }
  }
}

}  // namespace flash

// The entry points; on the CPU (GPT_FLASH_HOST) only with GPT_FLASH_HOST_ENTRIES, where a test launches them
// through the engine's GptKernels.
#if !defined(GPT_FLASH_HOST) || defined(GPT_FLASH_HOST_ENTRIES)
// Resident blocks per SM the register allocation aims at (measured on an H200: see the header).
#ifndef GPT_FLASH_FORWARD_BLOCKS
#define GPT_FLASH_FORWARD_BLOCKS 4
#endif
#ifndef GPT_FLASH_DQ_BLOCKS
#define GPT_FLASH_DQ_BLOCKS 3
#endif
#ifndef GPT_FLASH_DKV_BLOCKS
#define GPT_FLASH_DKV_BLOCKS 3
#endif
#ifndef GPT_FLASH_FUSED_BLOCKS
#define GPT_FLASH_FUSED_BLOCKS 2
#endif

// Entry points gpt_flash_{forward,backward_dq,backward_dkv}_{bf16,f16}_{32,64}: grid (ceil(T / 64),
// NH, B) of 128 threads (flash::tile, flash::threads).
#define GPT_FLASH_ENTRY(fn, blocks, D, name, HS)                       \
  extern "C" __global__ void __launch_bounds__(flash::threads, blocks) \
      gpt_flash_##fn##_##name##_##HS(const gpt_attention_args a) {     \
    __shared__ __align__(16) flash::Smem<HS> sm;                       \
    if (a.bits == nullptr) flash::fn<flash::D, HS, false>(a, sm);      \
    else flash::fn<flash::D, HS, true>(a, sm);                         \
  }
// The one-kernel backward: gpt_flash_backward_prep_* then gpt_flash_backward_fused_*, the same grid.
#define GPT_FLASH_FUSED_ENTRIES(D, name, HS)                                                            \
  extern "C" __global__ void __launch_bounds__(flash::threads)                                          \
      gpt_flash_backward_prep_##name##_##HS(const gpt_attention_args a) {                               \
    flash::backward_prep<flash::D, HS>(a);                                                              \
  }                                                                                                     \
  extern "C" __global__ void __launch_bounds__(flash::threads, GPT_FLASH_FUSED_BLOCKS)                  \
      gpt_flash_backward_fused_##name##_##HS(const gpt_attention_args a) {                              \
    __shared__ __align__(16) flash::SmemFused<HS> sm;                                                   \
    if (a.bits == nullptr) flash::backward_fused<flash::D, HS, false>(a, sm);                           \
    else flash::backward_fused<flash::D, HS, true>(a, sm);                                              \
  }
#define GPT_FLASH_ENTRIES(D, name, HS)                                  \
  GPT_FLASH_ENTRY(forward, GPT_FLASH_FORWARD_BLOCKS, D, name, HS)       \
  GPT_FLASH_ENTRY(backward_dq, GPT_FLASH_DQ_BLOCKS, D, name, HS)        \
  GPT_FLASH_ENTRY(backward_dkv, GPT_FLASH_DKV_BLOCKS, D, name, HS)      \
  GPT_FLASH_FUSED_ENTRIES(D, name, HS)

GPT_FLASH_ENTRIES(bf16_tag, bf16, 32)
GPT_FLASH_ENTRIES(bf16_tag, bf16, 64)
GPT_FLASH_ENTRIES(f16_tag, f16, 32)
GPT_FLASH_ENTRIES(f16_tag, f16, 64)

#endif  // !GPT_FLASH_HOST || GPT_FLASH_HOST_ENTRIES

#endif  // GPT_FLASH_ATTENTION_CUH
