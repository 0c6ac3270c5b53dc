// flash_host.hpp — the engine's flash attention kernels (examples/engine/kernels/flash_attention.cuh)
// run on the CPU, for tests on machines without a GPU: a block's 128 threads are fibers (ucontext) of
// one host thread, switched at every collective step — each warp-wide instruction (mma.sync, ldmatrix,
// shuffles) and __syncthreads — and the PTX primitives the kernels call are emulated here with the
// semantics the PTX ISA gives them: the mma.sync m16n8k16 fragment layouts, ldmatrix's 8 x 8 matrices
// (plain and .trans), cvt's round to nearest even, cp.async's zero fill. A warp-wide instruction is
// resolved once every lane of the warp has reached it, by the last to arrive, for all 32 lanes at once,
// as the hardware does. Blocks run one after another in grid order, or several at once (`resident`),
// their fibers interleaved, so that blocks that wait for each other do.
//
// What this checks: the kernels' indexing, fragment layouts, masks, tile walks and the order of their
// sums (against a float64 reference), and that blocks waiting on each other neither deadlock nor change
// the bits at any number of resident blocks. What it cannot: timing, or the memory model (a fiber's
// stores are seen at once). The GPU runs of the CUDA test suite check those.
//
// Include it, define GPT_FLASH_HOST, then include the kernels (with -Wno-unknown-pragmas: #pragma unroll).
#pragma once

#include <accel/core/bfloat16.hpp>
#include <accel/core/half.hpp>

#include <ucontext.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#define __device__ inline
#define __forceinline__

struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }

inline float __int_as_float(int v) { return std::bit_cast<float>(v); }
inline float __int_as_float(unsigned v) { return std::bit_cast<float>(v); }
inline float __uint_as_float(unsigned v) { return std::bit_cast<float>(v); }
inline unsigned __float_as_uint(float v) { return std::bit_cast<unsigned>(v); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __log2f(float x) { return std::log2(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

namespace flash_host {

struct Dim {
  unsigned x = 0, y = 0, z = 0;
};

constexpr int kThreads = 128;
constexpr std::size_t kStack = 128 * 1024;

struct Lane {
  ucontext_t ctx{};
  std::unique_ptr<char[]> stack;
  Dim thread;
  unsigned collectives = 0;  // warp-wide steps taken: their slots alternate
  long spins = 0;
  bool done = false;
};

// One warp-wide step's inputs and outputs, 32 lanes.
struct Slot {
  std::uint32_t in[32][12];
  std::uint32_t out[32][4];
};

struct Block {
  Dim index, grid;
  std::array<Lane, kThreads> lanes;
  ucontext_t scheduler{};
  int current = 0;
  unsigned block_generation = 0, block_arrived = 0;
  std::array<unsigned, kThreads / 32> warp_generation{}, warp_arrived{};
  Slot slots[kThreads / 32][2];
  std::function<void()> body;
};

inline Block*& running() {
  static Block* b = nullptr;
  return b;
}
inline Lane& self() { return running()->lanes[static_cast<std::size_t>(running()->current)]; }
inline void yield() {
  Block& b = *running();
  swapcontext(&b.lanes[static_cast<std::size_t>(b.current)].ctx, &b.scheduler);
}
inline void lane_main() {
  running()->body();
  self().done = true;  // then uc_link: back to the scheduler
}

/// A block of `grid` about to run body() on each of its 128 fibers.
inline std::unique_ptr<Block> make_block(Dim index, Dim grid, std::function<void()> body) {
  auto b = std::make_unique<Block>();
  b->index = index;
  b->grid = grid;
  b->body = std::move(body);
  for (int i = 0; i < kThreads; ++i) {
    Lane& l = b->lanes[static_cast<std::size_t>(i)];
    l.thread.x = static_cast<unsigned>(i);
    l.stack = std::make_unique<char[]>(kStack);
    getcontext(&l.ctx);
    l.ctx.uc_stack.ss_sp = l.stack.get();
    l.ctx.uc_stack.ss_size = kStack;
    l.ctx.uc_link = &b->scheduler;
    makecontext(&l.ctx, lane_main, 0);
  }
  return b;
}

/// Resumes each unfinished fiber of b once; whether all have finished.
inline bool step_block(Block& b) {
  bool all_done = true;
  for (int i = 0; i < kThreads; ++i) {
    Lane& l = b.lanes[static_cast<std::size_t>(i)];
    if (l.done) continue;
    running() = &b;
    b.current = i;
    swapcontext(&b.scheduler, &l.ctx);
    all_done = all_done && l.done;
  }
  running() = nullptr;
  return all_done;
}

/// A launch: the blocks of `grid` in order (x fastest), at most `resident` of them at once — a block
/// starts when one finishes, as an SM takes the next block — their fibers interleaved (each block
/// one collective step at a time). Each block gets a fresh shared-memory object of type Shared filled
/// with 0xFF bytes (NaN in 16 and 32 bits: a read of what no thread wrote shows). resident = 1 runs
/// the blocks one after another. jitter != 0 seeds uneven speeds: each block moves every 1st to 4th
/// round (drawn when it starts), so that a block falls behind one that started after it (as on an SM
/// shared with other work) and waits between blocks are exercised.
template <class Shared, class Body>
void launch(Dim grid, Body&& body, unsigned resident = 1, unsigned jitter = 0) {
  std::mt19937 speed(jitter);
  struct Live {
    std::unique_ptr<Shared> shared;
    std::unique_ptr<Block> block;
    unsigned every = 1;  // rounds a step
  };
  unsigned round = 0;
  std::vector<Live> live;
  const unsigned total = grid.x * grid.y * grid.z;
  unsigned next = 0;
  while (next < total || !live.empty()) {
    while (live.size() < resident && next < total) {
      const unsigned n = next++;
      Live l;
      l.shared = std::make_unique<Shared>();
      std::memset(static_cast<void*>(l.shared.get()), 0xFF, sizeof(Shared));
      Shared* sh = l.shared.get();
      l.block = make_block(Dim{n % grid.x, n / grid.x % grid.y, n / (grid.x * grid.y)}, grid, [&body, sh] { body(*sh); });
      l.every = jitter == 0 ? 1u : 1u + speed() % 4u;
      live.push_back(std::move(l));
    }
    ++round;
    for (std::size_t i = 0; i < live.size();) {
      if (round % live[i].every != 0) {
        ++i;
        continue;
      }
      if (step_block(*live[i].block)) {
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
}

/// A warp-wide step: this lane posts n_in words; the last lane to arrive runs resolve(in, out) for the
/// whole warp; each lane gets its n_out words.
template <class Resolve>
void warp_step(const std::uint32_t* in, int n_in, std::uint32_t* out, int n_out, Resolve&& resolve) {
  Block& b = *running();
  Lane& me = self();
  const unsigned w = me.thread.x / 32, l = me.thread.x % 32;
  Slot& slot = b.slots[w][me.collectives++ & 1u];
  std::memcpy(slot.in[l], in, static_cast<std::size_t>(n_in) * 4);
  const unsigned generation = b.warp_generation[w];
  if (++b.warp_arrived[w] == 32) {
    resolve(slot.in, slot.out);
    b.warp_arrived[w] = 0;
    ++b.warp_generation[w];
  } else {
    while (b.warp_generation[w] == generation) yield();
  }
  std::memcpy(out, slot.out[l], static_cast<std::size_t>(n_out) * 4);
}

inline void syncthreads() {
  Block& b = *running();
  const unsigned generation = b.block_generation;
  if (++b.block_arrived == kThreads) {
    b.block_arrived = 0;
    ++b.block_generation;
  } else {
    while (b.block_generation == generation) yield();
  }
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
  warp_step(in, 10, out, 4, [](const std::uint32_t (*i)[12], std::uint32_t (*o)[4]) {
    const auto A = [&](unsigned r, unsigned k) {
      return half_of(i[(r % 8) * 4 + (k % 8) / 2][(r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k % 2, D::bf16);
    };
    const auto B = [&](unsigned k, unsigned n) { return half_of(i[n * 4 + (k % 8) / 2][4 + (k >= 8 ? 1 : 0)], k % 2, D::bf16); };
    for (unsigned lane = 0; lane < 32; ++lane) {
      const unsigned g = lane / 4, q = lane % 4;
      for (unsigned e = 0; e < 4; ++e) {
        const unsigned row = g + 8 * (e / 2), col = 2 * q + e % 2;
        double acc = std::bit_cast<float>(i[lane][6 + e]);
        for (unsigned k = 0; k < 16; ++k) acc += static_cast<double>(A(row, k)) * B(k, col);
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
  warp_step(in, 2, out, 4, [trans](const std::uint32_t (*i)[12], std::uint32_t (*o)[4]) {
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

inline float shfl_xor(float v, int mask) {
  std::uint32_t in[1] = {std::bit_cast<std::uint32_t>(v)}, out[1];
  warp_step(in, 1, out, 1, [mask](const std::uint32_t (*i)[12], std::uint32_t (*o)[4]) {
    for (unsigned lane = 0; lane < 32; ++lane) o[lane][0] = i[lane ^ static_cast<unsigned>(mask)][0];
  });
  return std::bit_cast<float>(out[0]);
}

}  // namespace flash_host

#define threadIdx (::flash_host::self().thread)
#define blockIdx (::flash_host::running()->index)
#define gridDim (::flash_host::running()->grid)
inline void __syncthreads() { ::flash_host::syncthreads(); }
inline void __threadfence() {}
inline float __shfl_xor_sync(unsigned, float v, int mask) { return ::flash_host::shfl_xor(v, mask); }
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p = old + v;
  return old;
}
// A wait that never ends here (no block that could signal is running or to come): fail instead of
// spinning forever.
inline void __nanosleep(unsigned) {
  if (++::flash_host::self().spins > 100000) {
    std::fprintf(stderr, "flash_host: a thread waited 100000 times for a counter that never came (a missed signal)\n");
    std::abort();
  }
  ::flash_host::yield();
}
