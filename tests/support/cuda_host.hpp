// cuda_host.hpp — CUDA kernels' own source run on the CPU, for tests on machines without a GPU. A
// block's threads (up to 1,024, in up to three dimensions) are fibers (fiber.hpp) of one host thread,
// switched at every collective step: each warp-wide instruction (shuffles, votes, __syncwarp and what a
// test adds with warp_step) and each __syncthreads. A warp-wide instruction is resolved once every lane
// of the warp has reached it, by the last to arrive, for all its lanes at once, as the hardware does; a
// barrier releases when every thread that has not exited reaches it.
//
// Include it after every other header (it defines CUDA's keywords as macros: __global__, __shared__,
// threadIdx, ...), then the kernels' source, with -Wno-unknown-pragmas (#pragma unroll). What differs
// from a GPU, and why it is enough for what the tests check:
//  - `__shared__` variables declared in a kernel are function statics: blocks that use them must run one
//    after another (launch()'s default). Kernels given their shared memory as an object (launch<Shared>)
//    may run several blocks at once, at uneven speeds, to exercise blocks that wait for each other.
//  - A fiber's stores are seen at once (no memory model, no timing); the math functions are the host's
//    (a few ulps from CUDA's), rounding intrinsics (__fmul_rn, ...) exact.
//  - Mistakes a GPU would hide or hang on are reported and abort: a warp-wide instruction that a lane of
//    the warp has exited before, a shuffle from a lane the block does not have, a barrier that no thread
//    will reach (no fiber of any block can move), a launch shape CUDA refuses.
// tests/engine/flash_host.hpp adds the tensor-core instructions (mma.sync, ldmatrix, cp.async) the
// engine's flash kernels use.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <random>
#include <vector>

#include <math.h>

#include "fiber.hpp"

// ---- CUDA's keywords and vector types as host C++ ----
#define __global__
#define __host__
#define __device__ inline
#define __forceinline__
// On the device __noinline__ keeps float16's long conversions out of line for NVRTC's compile time; here it
// is dropped: g++ 12.2 at -O1 (not -O0, -O2 or -O3, nor clang++ 14 at any level) computed wrong values
// for nn_ops.cu's float16 embedding forward through those out-of-line helpers (a struct by value each
// way), right again with -fno-ipa-modref or -fno-ipa-pure-const — a compiler fault by every sign.
#define __noinline__
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static

struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(16) double2 {
  double x, y;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline double2 make_double2(double x, double y) { return double2{x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }

inline float __int_as_float(int v) { return std::bit_cast<float>(v); }
inline float __int_as_float(unsigned v) { return std::bit_cast<float>(v); }
inline float __uint_as_float(unsigned v) { return std::bit_cast<float>(v); }
inline unsigned __float_as_uint(float v) { return std::bit_cast<unsigned>(v); }
inline int __float_as_int(float v) { return std::bit_cast<int>(v); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline float __log2f(float x) { return std::log2(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline int __popc(unsigned v) { return std::popcount(v); }
inline int __popcll(unsigned long long v) { return std::popcount(v); }

namespace cuda_host {

struct Dim {
  unsigned x = 1, y = 1, z = 1;
  [[nodiscard]] unsigned count() const { return x * y * z; }
};

constexpr unsigned kMaxThreads = 1024;
// Bytes of 0xFF past a block's dynamic shared memory, checked when the block ends: a write past the launch's
// size is reported (a read gives NaN). Under AddressSanitizer none, so that ASan sees both at the exact end.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::size_t kSharedGuard = 0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr std::size_t kSharedGuard = 0;
#else
constexpr std::size_t kSharedGuard = 256;
#endif
#else
constexpr std::size_t kSharedGuard = 256;
#endif
constexpr std::size_t kStack = 128 * 1024;

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "cuda_host: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

struct Lane {
  fiber::Context ctx;
  char* stack = nullptr;
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

// Fiber stacks, reused from block to block (a launch makes thousands of blocks).
inline std::vector<std::unique_ptr<char[]>>& stack_pool() {
  static std::vector<std::unique_ptr<char[]>> pool;
  return pool;
}
inline char* take_stack() {
  auto& pool = stack_pool();
  if (pool.empty()) return new char[kStack];
  char* s = pool.back().release();
  pool.pop_back();
  return s;
}

// What moved since the launch started: a barrier or warp step resolved, a thread finished.
inline unsigned long long& progress() {
  static unsigned long long p = 0;
  return p;
}

struct Block {
  Dim index, grid, dim;
  unsigned threads = 0, live = 0;
  std::vector<Lane> lanes;
  fiber::Context scheduler;
  unsigned current = 0;
  unsigned block_generation = 0, block_arrived = 0;
  int block_vote = 0, block_vote_result = 0;  // __syncthreads_or / _and / _count: the threads voting 1
  unsigned block_arrivals_result = 0;          // and the threads that arrived
  std::vector<unsigned> warp_generation, warp_arrived, warp_exited;
  std::vector<std::array<Slot, 2>> slots;
  std::unique_ptr<std::byte[]> dynamic_shared;  // the launch's dynamic shared memory (extern __shared__)
  std::size_t dynamic_bytes = 0;
  std::function<void()> body;

  Block() = default;
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block() {
    for (Lane& l : lanes) stack_pool().emplace_back(l.stack);
  }
  [[nodiscard]] unsigned warp_size(unsigned w) const { return threads - 32 * w < 32 ? threads - 32 * w : 32; }
};

inline Block*& running() {
  static Block* b = nullptr;
  return b;
}
inline Lane& self() { return running()->lanes[running()->current]; }
inline unsigned linear_thread() { return running()->current; }
inline void yield() {
  Block& b = *running();
  fiber::switch_to(b.lanes[b.current].ctx, b.scheduler);
}

// A thread that exits no longer holds a barrier back (as on the GPU, where exited threads count as
// arrived).
inline void release_barrier_if_complete(Block& b) {
  if (b.block_arrived != 0 && b.block_arrived == b.live) {
    b.block_vote_result = b.block_vote;
    b.block_arrivals_result = b.block_arrived;
    b.block_arrived = 0;
    b.block_vote = 0;
    ++b.block_generation;
    ++progress();
  }
}
inline void lane_main() {
  running()->body();
  Block& b = *running();
  b.lanes[b.current].done = true;  // then back to the scheduler (the fiber's link)
  --b.live;
  ++b.warp_exited[b.current / 32];
  ++progress();
  release_barrier_if_complete(b);
}

/// A block of `grid` with `dim` threads about to run body() on each of them, with `dynamic_bytes` of
/// dynamic shared memory (0xFF bytes: NaN where no thread wrote).
inline std::unique_ptr<Block> make_block(Dim index, Dim grid, Dim dim, std::function<void()> body,
                                         std::size_t dynamic_bytes = 0) {
  auto b = std::make_unique<Block>();
  if (dynamic_bytes > 0) {
    b->dynamic_shared = std::make_unique<std::byte[]>(dynamic_bytes + kSharedGuard);  // 16-byte aligned, as the GPU's
    std::memset(b->dynamic_shared.get(), 0xFF, dynamic_bytes + kSharedGuard);
    b->dynamic_bytes = dynamic_bytes;
  }
  b->index = index;
  b->grid = grid;
  b->dim = dim;
  b->threads = b->live = dim.count();
  b->body = std::move(body);
  const unsigned warps = (b->threads + 31) / 32;
  b->warp_generation.assign(warps, 0);
  b->warp_arrived.assign(warps, 0);
  b->warp_exited.assign(warps, 0);
  b->slots.resize(warps);
  b->lanes.resize(b->threads);
  for (unsigned i = 0; i < b->threads; ++i) {
    Lane& l = b->lanes[i];
    l.thread = Dim{i % dim.x, i / dim.x % dim.y, i / (dim.x * dim.y)};
    l.stack = take_stack();
    fiber::start(l.ctx, l.stack, kStack, lane_main, b->scheduler);
  }
  return b;
}

/// Resumes each unfinished fiber of b once; whether all have finished.
inline bool step_block(Block& b) {
  bool all_done = true;
  for (unsigned i = 0; i < b.threads; ++i) {
    Lane& l = b.lanes[i];
    if (l.done) continue;
    running() = &b;
    b.current = i;
    fiber::switch_to(b.scheduler, l.ctx);
    all_done = all_done && l.done;
  }
  running() = nullptr;
  return all_done;
}

/// CUDA's limits on a launch's shape: what cuLaunchKernel would refuse is a test failure here too.
inline void check_shape(Dim grid, Dim block) {
  if (block.count() == 0 || block.count() > kMaxThreads || block.z > 64) fail("a block of 0 or more than 1024 threads");
  if (grid.count() == 0 || grid.y > 65535 || grid.z > 65535) fail("a grid with no blocks or more than 65535 in y or z");
}

/// A launch: the blocks of `grid` in order (x fastest), `block` threads each, at most `resident` of them
/// at once — a block starts when one finishes, as an SM takes the next block — their fibers interleaved
/// (each block one collective step at a time). Each block gets a fresh shared-memory object of type
/// Shared filled with 0xFF bytes (NaN in 16 and 32 bits: a read of what no thread wrote shows), passed
/// to body. resident = 1 runs the blocks one after another. jitter != 0 seeds uneven speeds: each block
/// moves every 1st to 4th round (drawn when it starts), so that a block falls behind one that started
/// after it (as on an SM shared with other work) and waits between blocks are exercised. dynamic_bytes:
/// each block's dynamic shared memory (dynamic_shared<T>()).
template <class Shared, class Body>
void launch(Dim grid, Dim block, Body&& body, unsigned resident = 1, unsigned jitter = 0, std::size_t dynamic_bytes = 0) {
  check_shape(grid, block);
  if (dynamic_bytes > 48 * 1024) fail("more dynamic shared memory than a launch gets without opting in (48 KiB)");
  std::mt19937 speed(jitter);
  struct Live {
    std::unique_ptr<Shared> shared;
    std::unique_ptr<Block> block;
    unsigned every = 1;  // rounds a step
  };
  unsigned round = 0, still = 0;
  std::vector<Live> live;
  const unsigned total = grid.count();
  unsigned next = 0;
  while (next < total || !live.empty()) {
    while (live.size() < resident && next < total) {
      const unsigned n = next++;
      Live l;
      l.shared = std::make_unique<Shared>();
      std::memset(static_cast<void*>(l.shared.get()), 0xFF, sizeof(Shared));
      Shared* sh = l.shared.get();
      l.block = make_block(Dim{n % grid.x, n / grid.x % grid.y, n / (grid.x * grid.y)}, grid, block,
                           [&body, sh] { body(*sh); }, dynamic_bytes);
      l.every = jitter == 0 ? 1u : 1u + speed() % 4u;
      live.push_back(std::move(l));
    }
    ++round;
    const unsigned long long before = progress();
    for (std::size_t i = 0; i < live.size();) {
      if (round % live[i].every != 0) {
        ++i;
        continue;
      }
      if (step_block(*live[i].block)) {
        const Block& done = *live[i].block;
        for (std::size_t g = 0; g < kSharedGuard && done.dynamic_bytes > 0; ++g) {
          if (done.dynamic_shared[done.dynamic_bytes + g] != std::byte{0xFF}) fail("a write past the launch's dynamic shared memory");
        }
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    // Every live block stepped at least once in 4 rounds: nothing moved in 8 means nothing will (a
    // counter wait that yields through __nanosleep reports itself sooner).
    still = progress() == before ? still + 1 : 0;
    if (still > 8) fail("no thread can move: each waits at a barrier, a warp-wide instruction or a counter that no other will reach or set");
  }
}

/// The same for kernels without a shared-memory object (their __shared__ variables are statics: the
/// blocks run one after another).
template <class Body>
void launch(Dim grid, Dim block, Body&& body, std::size_t dynamic_bytes = 0) {
  struct None {};
  launch<None>(grid, block, [&body](None&) { body(); }, 1, 0, dynamic_bytes);
}

/// Device memory as kernels see it: 256-byte aligned (as CUDA's allocations), `offset` bytes in, 0xFF bytes
/// (NaN in 16 and 32 bits) where nothing was written; freed with the arena.
class Arena {
 public:
  void* take(std::size_t bytes, std::size_t offset = 0) {
    auto& b = blocks_.emplace_back(static_cast<std::byte*>(::operator new(bytes + offset, std::align_val_t{256})));
    std::memset(b.get(), 0xFF, bytes + offset);
    return b.get() + offset;
  }

 private:
  struct Delete {
    void operator()(std::byte* p) const { ::operator delete(p, std::align_val_t{256}); }
  };
  std::vector<std::unique_ptr<std::byte, Delete>> blocks_;
};

/// The running block's dynamic shared memory, as T (what `extern __shared__ T name[]` names on a GPU).
template <class T>
T* dynamic_shared() {
  Block& b = *running();
  if (b.dynamic_bytes == 0) fail("dynamic shared memory that the launch did not give");
  return reinterpret_cast<T*>(b.dynamic_shared.get());
}

/// A warp-wide step: this lane posts n_in words; the last lane of its warp to arrive runs
/// resolve(in, out, lanes) for the whole warp (lanes: the warp's size); each lane gets its n_out words.
template <class Resolve>
void warp_step(const std::uint32_t* in, int n_in, std::uint32_t* out, int n_out, Resolve&& resolve) {
  Block& b = *running();
  Lane& me = self();
  const unsigned t = linear_thread(), w = t / 32, l = t % 32, lanes = b.warp_size(w);
  if (b.warp_exited[w] != 0) fail("a warp-wide instruction after a lane of the warp exited");
  Slot& slot = b.slots[w][me.collectives++ & 1u];
  std::memcpy(slot.in[l], in, static_cast<std::size_t>(n_in) * 4);
  const unsigned generation = b.warp_generation[w];
  if (++b.warp_arrived[w] == lanes) {
    resolve(slot.in, slot.out, lanes);
    b.warp_arrived[w] = 0;
    ++b.warp_generation[w];
    ++progress();
  } else {
    while (b.warp_generation[w] == generation) yield();
  }
  std::memcpy(out, slot.out[l], static_cast<std::size_t>(n_out) * 4);
}

/// __syncthreads with a vote: the number of threads whose `vote` was non-zero (all_voted: whether every
/// thread that arrived voted so).
inline int syncthreads_count(int vote, bool* all_voted = nullptr) {
  Block& b = *running();
  const unsigned generation = b.block_generation;
  b.block_vote += vote != 0 ? 1 : 0;
  ++b.block_arrived;
  release_barrier_if_complete(b);
  while (b.block_generation == generation) yield();
  if (all_voted != nullptr) *all_voted = static_cast<unsigned>(b.block_vote_result) == b.block_arrivals_result;
  return b.block_vote_result;
}

// Shuffles of 4- and 8-byte values. kind: 0 index, 1 up, 2 down, 3 xor; width divides 32.
template <class T>
T shuffle(T v, int kind, int arg, int width) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "cuda_host: shuffles of 4- and 8-byte values");
  constexpr int words = sizeof(T) / 4;
  std::uint32_t in[2] = {}, out[2] = {};
  std::memcpy(in, &v, sizeof(T));
  warp_step(in, words, out, words, [kind, arg, width](const std::uint32_t (*i)[12], std::uint32_t (*o)[4], unsigned lanes) {
    for (unsigned lane = 0; lane < lanes; ++lane) {
      const int me = static_cast<int>(lane), base = me / width * width, pos = me % width;
      int src = me;
      if (kind == 0) src = base + ((arg % width) + width) % width;
      if (kind == 1 && pos >= arg) src = me - arg;
      if (kind == 2 && pos + arg < width) src = me + arg;
      if (kind == 3 && ((me ^ arg) / width) == me / width) src = me ^ arg;
      if (src >= static_cast<int>(lanes)) fail("a shuffle from a lane the block does not have");
      for (int k = 0; k < words; ++k) o[lane][k] = i[src][k];
    }
  });
  T r;
  std::memcpy(&r, out, sizeof(T));
  return r;
}

// Votes: word 0 of the result has bit k set when lane k's predicate is; word 1 is 1 when every lane's is.
inline std::array<std::uint32_t, 2> vote(int predicate) {
  const std::uint32_t in[1] = {predicate != 0 ? 1u : 0u};
  std::array<std::uint32_t, 2> out{};
  warp_step(in, 1, out.data(), 2, [](const std::uint32_t (*i)[12], std::uint32_t (*o)[4], unsigned lanes) {
    unsigned bits = 0;
    for (unsigned lane = 0; lane < lanes; ++lane) bits |= i[lane][0] << lane;
    const unsigned all = std::popcount(bits) == static_cast<int>(lanes) ? 1u : 0u;
    for (unsigned lane = 0; lane < lanes; ++lane) {
      o[lane][0] = bits;
      o[lane][1] = all;
    }
  });
  return out;
}

}  // namespace cuda_host

#define threadIdx (::cuda_host::self().thread)
#define blockIdx (::cuda_host::running()->index)
#define gridDim (::cuda_host::running()->grid)
#define blockDim (::cuda_host::running()->dim)
inline void __syncthreads() { (void)::cuda_host::syncthreads_count(0); }
inline int __syncthreads_or(int p) { return ::cuda_host::syncthreads_count(p) != 0; }
inline int __syncthreads_and(int p) {
  bool all = false;
  (void)::cuda_host::syncthreads_count(p, &all);
  return all;
}
inline int __syncthreads_count(int p) { return ::cuda_host::syncthreads_count(p); }
inline void __syncwarp(unsigned = 0xFFFFFFFFu) { (void)::cuda_host::vote(1); }
inline unsigned __ballot_sync(unsigned, int p) { return ::cuda_host::vote(p)[0]; }
inline int __any_sync(unsigned, int p) { return ::cuda_host::vote(p)[0] != 0; }
inline int __all_sync(unsigned, int p) { return static_cast<int>(::cuda_host::vote(p)[1]); }
template <class T>
T __shfl_sync(unsigned, T v, int src, int width = 32) {
  return ::cuda_host::shuffle(v, 0, src, width);
}
template <class T>
T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
  return ::cuda_host::shuffle(v, 1, static_cast<int>(delta), width);
}
template <class T>
T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
  return ::cuda_host::shuffle(v, 2, static_cast<int>(delta), width);
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
  return ::cuda_host::shuffle(v, 3, mask, width);
}
inline void __threadfence() {}
inline void __threadfence_block() {}
template <class T>
T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
// A wait that never ends here (no block that could signal is running or to come): fail instead of
// spinning forever.
inline void __nanosleep(unsigned) {
  if (++::cuda_host::self().spins > 100000) {
    ::cuda_host::fail("a thread waited 100000 times for a counter that never came (a missed signal)");
  }
  ::cuda_host::yield();
}
