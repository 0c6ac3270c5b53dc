// flash_host.hpp — the engine's flash attention kernels (examples/engine/kernels/flash_attention.cuh)
// run on the CPU, for tests on machines without a GPU: tests/support/cuda_host.hpp runs a block's 128
// threads as fibers of one host thread; the PTX primitives the kernels call are emulated here with the
// semantics the PTX ISA gives them: the mma.sync m16n8k16 fragment layouts, ldmatrix's 8 x 8 matrices
// (plain and .trans), cvt's round to nearest even, cp.async's zero fill. Blocks run one after another in
// grid order, or several at once (`resident`), their fibers interleaved, so that blocks that wait for
// each other do.
//
// What this checks: the kernels' indexing, fragment layouts, masks, tile walks and the order of their
// sums (against a float64 reference), and that blocks waiting on each other neither deadlock nor change
// the bits at any number of resident blocks. What it cannot: timing, or the memory model (a fiber's
// stores are seen at once). The GPU runs of the CUDA test suite check those.
//
// Include it, define GPT_FLASH_HOST, then include the kernels (with -Wno-unknown-pragmas: #pragma unroll):
// flash_attention.cuh for the flash kernels' functions; attention.cu with GPT_FLASH_HOST_ENTRIES too for
// every entry point of the op (its row kernels' scores in the launch's dynamic shared memory).
#pragma once

#include <accel/core/bfloat16.hpp>
#include <accel/core/half.hpp>

#include "../support/emulated_cuda.hpp"  // (and cuda_host.hpp; accel's op launchers before its macros)

namespace flash_host {

using cuda_host::Dim;
using cuda_host::warp_step;

/// The flash kernels' launch: blocks of 128 threads (flash::threads), `resident` at once (see
/// cuda_host::launch).
template <class Shared, class Body>
void launch(Dim grid, Body&& body, unsigned resident = 1, unsigned jitter = 0) {
  cuda_host::launch<Shared>(grid, Dim{128, 1, 1}, std::forward<Body>(body), resident, jitter);
}

// 16-bit floats, round to nearest even: accel's own conversions (accel/core/half.hpp, bfloat16.hpp).
inline unsigned short to_bf16(float x) { return accel::bfloat16(x).bits(); }
inline float from_bf16(unsigned short v) { return static_cast<float>(accel::bfloat16::from_bits(v)); }
inline unsigned short to_f16(float x) { return accel::half(x).bits(); }
inline float from_f16(unsigned short v) { return static_cast<float>(accel::half::from_bits(v)); }

namespace primitives {

template <class D>
float widen(unsigned short v, D) {
  return D::bf16 ? from_bf16(v) : from_f16(v);
}
template <class D>
unsigned short narrow(float x, D) {
  return D::bf16 ? to_bf16(x) : to_f16(x);
}
template <class D>
unsigned pack(float lo, float hi, D) {
  return static_cast<unsigned>(narrow(lo, D())) | (static_cast<unsigned>(narrow(hi, D())) << 16);
}
inline float half_of(std::uint32_t word, unsigned upper, bool bf16) {
  const auto v = static_cast<unsigned short>(upper != 0 ? word >> 16 : word & 0xFFFFu);
  return bf16 ? from_bf16(v) : from_f16(v);
}

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: D (16 x 8) = A (16 x 16) B (16 x 8) + C. Lane
// (g, q) = (lane / 4, lane % 4) holds A[g][2q, 2q+1], A[g+8][..], A[g][2q+8, 2q+9], A[g+8][..] (a[0..3]),
// B[2q, 2q+1][g] and B[2q+8, 2q+9][g] (b0, b1), C and D at [g][2q], [g][2q+1], [g+8][2q], [g+8][2q+1].
// The products are summed in double and rounded once (the tensor cores' order is not specified).
template <class D>
void mma(float c[4], const unsigned a[4], unsigned b0, unsigned b1, D) {
  std::uint32_t in[10] = {a[0], a[1], a[2], a[3], b0, b1};
  for (int e = 0; e < 4; ++e) in[6 + e] = std::bit_cast<std::uint32_t>(c[e]);
  std::uint32_t out[4];
  warp_step(in, 10, out, 4, [](const std::uint32_t (*i)[12], std::uint32_t (*o)[4], unsigned) {
    // A and B widened once (not once per product: 384 conversions instead of 4,096 an instruction).
    float A[16][16], B[16][8];
    for (unsigned r = 0; r < 16; ++r) {
      for (unsigned k = 0; k < 16; ++k) {
        A[r][k] = half_of(i[(r % 8) * 4 + (k % 8) / 2][(r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k % 2, D::bf16);
      }
    }
    for (unsigned k = 0; k < 16; ++k) {
      for (unsigned n = 0; n < 8; ++n) B[k][n] = half_of(i[n * 4 + (k % 8) / 2][4 + (k >= 8 ? 1 : 0)], k % 2, D::bf16);
    }
    for (unsigned lane = 0; lane < 32; ++lane) {
      const unsigned g = lane / 4, q = lane % 4;
      for (unsigned e = 0; e < 4; ++e) {
        const unsigned row = g + 8 * (e / 2), col = 2 * q + e % 2;
        double acc = std::bit_cast<float>(i[lane][6 + e]);
        for (unsigned k = 0; k < 16; ++k) acc += static_cast<double>(A[row][k]) * B[k][col];
        o[lane][e] = std::bit_cast<std::uint32_t>(static_cast<float>(acc));
      }
    }
  });
  for (int e = 0; e < 4; ++e) c[e] = std::bit_cast<float>(out[e]);
}

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lane 8m + r gives the address of row r of matrix m;
// lane (g, q) gets M_m[g][2q, 2q+1] in r[m] (.trans: M_m[2q][g], M_m[2q+1][g]), the lower column low.
inline void ldsm(unsigned (&r)[4], const unsigned short* row, bool trans) {
  std::uint32_t in[2];
  std::memcpy(in, &row, sizeof row);
  std::uint32_t out[4];
  warp_step(in, 2, out, 4, [trans](const std::uint32_t (*i)[12], std::uint32_t (*o)[4], unsigned) {
    const auto row_of = [&](unsigned m, unsigned r8) {
      const unsigned short* p;
      std::memcpy(&p, i[8 * m + r8], sizeof p);
      return p;
    };
    for (unsigned lane = 0; lane < 32; ++lane) {
      const unsigned g = lane / 4, q = lane % 4;
      for (unsigned m = 0; m < 4; ++m) {
        const unsigned lo = trans ? row_of(m, 2 * q)[g] : row_of(m, g)[2 * q];
        const unsigned hi = trans ? row_of(m, 2 * q + 1)[g] : row_of(m, g)[2 * q + 1];
        o[lane][m] = lo | (hi << 16);
      }
    }
  });
  for (int m = 0; m < 4; ++m) r[m] = out[m];
}
inline void ldsm_x4(unsigned (&r)[4], const unsigned short* row) { ldsm(r, row, false); }
inline void ldsm_x4_trans(unsigned (&r)[4], const unsigned short* row) { ldsm(r, row, true); }

inline float fast_exp2(float x) { return std::exp2(x); }

// cp.async: done at once here (the kernels' waits are then no-ops); zero-filled when !valid.
inline void cp_async16(unsigned short* dst, const unsigned short* src, bool valid) {
  if (valid) std::memcpy(dst, src, 16);
  else std::memset(dst, 0, 16);
}
inline void cp_async4(float* dst, const float* src, bool valid) { *dst = valid ? *src : 0.0f; }
inline void cp_async_commit() {}
template <int N>
void cp_async_wait() {}

inline unsigned ld_acquire(const unsigned* p) { return *p; }
inline void st_release(unsigned* p, unsigned v) { *p = v; }
inline float2 ld_cg2(const float* p) { return float2{p[0], p[1]}; }
inline void st_cg2(float* p, float2 v) {
  p[0] = v.x;
  p[1] = v.y;
}

}  // namespace primitives

}  // namespace flash_host
