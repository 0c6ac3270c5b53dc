// accel/random/philox.hpp — Philox4x32-10 (Salmon et al., SC'11, as in Random123 and cuRAND):
// the block function, a counter-based engine, and the block layout of cuRAND's host generator.
//
// Usable in host and device code: functions are ACCEL_HOST_DEVICE, no CUDA header is included, and
// under NVRTC (__CUDACC_RTC__) no standard header either, so an op builder can hand this file to a
// JIT compile as it is. Everything here is integer arithmetic and gives the same bits everywhere.
//
// Word order follows Random123 and cuRAND: U32x4::x is counter word 0 (cuRAND's uint4.x). A
// (counter, subsequence) pair sits in the 128-bit counter as x,y = counter, z,w = subsequence,
// which is what cuRAND's curand_init(seed, subsequence, offset) builds.
#pragma once

#ifndef ACCEL_HOST_DEVICE
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ACCEL_HOST_DEVICE __host__ __device__
#else
#define ACCEL_HOST_DEVICE
#endif
#endif

#if !defined(__CUDACC_RTC__)
#include <cstdint>
#endif

namespace accel::rng {

// NVRTC has no <cstdint>; these are the same widths there.
#if defined(__CUDACC_RTC__)
using u32 = unsigned int;
using u64 = unsigned long long;
#else
using u32 = std::uint32_t;
using u64 = std::uint64_t;
#endif

/// Four 32-bit words: a Philox counter or one output block (x = word 0).
struct U32x4 {
  u32 x, y, z, w;
};

/// Two 32-bit words: a Philox key (x = low half of the 64-bit seed).
struct U32x2 {
  u32 x, y;
};

[[nodiscard]] ACCEL_HOST_DEVICE constexpr bool operator==(U32x4 a, U32x4 b) noexcept {
  return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w;
}
[[nodiscard]] ACCEL_HOST_DEVICE constexpr bool operator==(U32x2 a, U32x2 b) noexcept {
  return a.x == b.x && a.y == b.y;
}

/// Word i (0..3) of a block.
[[nodiscard]] ACCEL_HOST_DEVICE constexpr u32 word(U32x4 b, unsigned i) noexcept {
  return i == 0 ? b.x : i == 1 ? b.y : i == 2 ? b.z : b.w;
}

/// The 128-bit counter of block `counter` of subsequence `subsequence` (curand_init's layout).
[[nodiscard]] ACCEL_HOST_DEVICE constexpr U32x4 philox_counter(u64 counter, u64 subsequence) noexcept {
  return {static_cast<u32>(counter), static_cast<u32>(counter >> 32), static_cast<u32>(subsequence),
          static_cast<u32>(subsequence >> 32)};
}

/// The key for a 64-bit seed (low word first, as curand_init does).
[[nodiscard]] ACCEL_HOST_DEVICE constexpr U32x2 philox_key(u64 seed) noexcept {
  return {static_cast<u32>(seed), static_cast<u32>(seed >> 32)};
}

namespace detail {

inline constexpr u32 philox_m0 = 0xD2511F53u;  // round multipliers
inline constexpr u32 philox_m1 = 0xCD9E8D57u;
inline constexpr u32 philox_w0 = 0x9E3779B9u;  // key schedule (Weyl) increments
inline constexpr u32 philox_w1 = 0xBB67AE85u;

// One round. The 32x32->64 products are written as u64 multiplies: compilers turn them into
// mul.wide.u32 on the GPU and into vpmuludq when a loop of blocks is vectorised on the CPU.
[[nodiscard]] ACCEL_HOST_DEVICE constexpr U32x4 philox_round(U32x4 c, U32x2 k) noexcept {
  const u64 p0 = static_cast<u64>(philox_m0) * c.x;
  const u64 p1 = static_cast<u64>(philox_m1) * c.z;
  return {static_cast<u32>(p1 >> 32) ^ c.y ^ k.x, static_cast<u32>(p1), static_cast<u32>(p0 >> 32) ^ c.w ^ k.y,
          static_cast<u32>(p0)};
}

[[nodiscard]] ACCEL_HOST_DEVICE constexpr U32x2 philox_bump(U32x2 k) noexcept {
  return {k.x + philox_w0, k.y + philox_w1};
}

// 128-bit add of n to the (x, y, z, w) counter, carrying all the way (cuRAND's Philox_State_Incr).
[[nodiscard]] ACCEL_HOST_DEVICE constexpr U32x4 add_to_counter(U32x4 c, u64 n) noexcept {
  const u64 lo = (static_cast<u64>(c.y) << 32 | c.x) + n;
  const bool carry = lo < n;
  c.x = static_cast<u32>(lo);
  c.y = static_cast<u32>(lo >> 32);
  if (carry && ++c.z == 0) ++c.w;
  return c;
}

}  // namespace detail

/// The Philox4x32-10 block function: 10 rounds over `counter` under `key`.
/// Unrolled by hand so that a loop over many blocks is straight-line code the compiler vectorises.
[[nodiscard]] ACCEL_HOST_DEVICE constexpr U32x4 philox4x32_10(U32x4 counter, U32x2 key) noexcept {
  using detail::philox_bump;
  using detail::philox_round;
  U32x4 c = philox_round(counter, key);
  U32x2 k = philox_bump(key);
  c = philox_round(c, k);  // 2
  k = philox_bump(k);
  c = philox_round(c, k);  // 3
  k = philox_bump(k);
  c = philox_round(c, k);  // 4
  k = philox_bump(k);
  c = philox_round(c, k);  // 5
  k = philox_bump(k);
  c = philox_round(c, k);  // 6
  k = philox_bump(k);
  c = philox_round(c, k);  // 7
  k = philox_bump(k);
  c = philox_round(c, k);  // 8
  k = philox_bump(k);
  c = philox_round(c, k);  // 9
  k = philox_bump(k);
  return philox_round(c, k);  // 10
}

/// A counter-based Philox4x32-10 engine with cuRAND's device-API semantics: Philox4x32(seed, sub,
/// off) then operator() gives the same words as curand_init(seed, sub, off, &s) then curand(&s).
/// Satisfies std::uniform_random_bit_generator on the host. State: key, counter, cached block and
/// the index of the next word in it (44 bytes; copy it freely, e.g. one per GPU thread).
class Philox4x32 {
 public:
  using result_type = u32;

  /// Subsequence `subsequence` (2^66 words each), skipping its first `offset` words.
  ACCEL_HOST_DEVICE constexpr explicit Philox4x32(u64 seed, u64 subsequence = 0, u64 offset = 0) noexcept
      : key_(philox_key(seed)), counter_(philox_counter(0, subsequence)) {
    discard(offset);
  }

  [[nodiscard]] ACCEL_HOST_DEVICE static constexpr result_type min() noexcept { return 0; }
  [[nodiscard]] ACCEL_HOST_DEVICE static constexpr result_type max() noexcept { return 0xFFFFFFFFu; }

  /// The next 32-bit word (curand()).
  ACCEL_HOST_DEVICE constexpr result_type operator()() noexcept {
    const u32 r = word(block_, index_);
    if (++index_ == 4) {
      counter_ = detail::add_to_counter(counter_, 1);
      block_ = philox4x32_10(counter_, key_);
      index_ = 0;
    }
    return r;
  }

  /// The next four words (curand4()): exactly four calls of operator(), in one block's time.
  ACCEL_HOST_DEVICE constexpr U32x4 next4() noexcept {
    const U32x4 cur = block_;
    counter_ = detail::add_to_counter(counter_, 1);
    block_ = philox4x32_10(counter_, key_);
    switch (index_) {
      case 1: return {cur.y, cur.z, cur.w, block_.x};
      case 2: return {cur.z, cur.w, block_.x, block_.y};
      case 3: return {cur.w, block_.x, block_.y, block_.z};
      default: return cur;
    }
  }

  /// Skips n words (skipahead()). O(1): one block computation.
  ACCEL_HOST_DEVICE constexpr void discard(u64 n) noexcept {
    const unsigned pos = index_ + static_cast<unsigned>(n & 3);
    counter_ = detail::add_to_counter(counter_, n / 4 + (pos >> 2));
    index_ = pos & 3;
    block_ = philox4x32_10(counter_, key_);
  }

  /// Skips n whole subsequences of 2^66 words (skipahead_sequence()).
  ACCEL_HOST_DEVICE constexpr void discard_subsequences(u64 n) noexcept {
    const u64 hi = (static_cast<u64>(counter_.w) << 32 | counter_.z) + n;
    counter_.z = static_cast<u32>(hi);
    counter_.w = static_cast<u32>(hi >> 32);
    block_ = philox4x32_10(counter_, key_);
  }

  [[nodiscard]] ACCEL_HOST_DEVICE constexpr U32x2 key() const noexcept { return key_; }
  /// Counter of the block the next word comes from.
  [[nodiscard]] ACCEL_HOST_DEVICE constexpr U32x4 counter() const noexcept { return counter_; }
  /// Index (0..3) of the next word in that block.
  [[nodiscard]] ACCEL_HOST_DEVICE constexpr unsigned index() const noexcept { return index_; }

  [[nodiscard]] friend ACCEL_HOST_DEVICE constexpr bool operator==(const Philox4x32& a,
                                                                   const Philox4x32& b) noexcept {
    return a.key_ == b.key_ && a.counter_ == b.counter_ && a.index_ == b.index_;
  }

 private:
  U32x2 key_;
  U32x4 counter_;
  U32x4 block_{};
  unsigned index_ = 0;
};

/// Where cuRAND's host generator CURAND_RNG_PSEUDO_PHILOX4_32_10 takes its blocks, so that host
/// and device fills can reproduce curandGenerate*() after curandSetGeneratorOffset(offset).
/// Established by probing libcurand 10 (CUDA 13) against philox4x32_10(); the ordering is
/// CURAND_ORDERING_PSEUDO_DEFAULT, which there gives the same output as _BEST and _LEGACY:
///
/// - cuRAND runs 65536 subsequences side by side. A fill is a series of *groups* of 4 outputs;
///   group g is served by subsequence (s0 + g) % 65536, on its visit number (s0 + g) / 65536.
/// - A group of 32-bit outputs (bits, float uniform, float normal) uses one block; a group of
///   64-bit outputs (double uniform, double normal) uses two consecutive counters of the same
///   subsequence. Each visit moves the subsequence's counter on by that many blocks.
/// - The offset positions every subsequence as if `offset` 32-bit words had been drawn: with
///   B = offset / 4, subsequence t starts at counter B / 65536, plus one if t < s0 = B % 65536.
///   The first offset % 4 outputs of group 0 are skipped.
///
/// So for 32-bit outputs the fill is one fixed stream (word p = word p % 4 of counter p / 2^18,
/// subsequence (p / 4) % 65536) and offset o simply starts at word o. For 64-bit outputs the
/// positions depend on the offset: a double fill at offset o is *not* the tail of one at offset 0.
/// cuRAND advances its offset by the number of outputs of any type, so it reuses blocks after a
/// double fill; a generator built on this layout must decide whether to copy that.
class CurandPhiloxLayout {
 public:
  static constexpr u64 subsequences = 65536;

  /// `blocks_per_group`: 1 for 32-bit outputs, 2 for 64-bit outputs.
  ACCEL_HOST_DEVICE constexpr CurandPhiloxLayout(u64 offset, u32 blocks_per_group) noexcept
      : first_subsequence_((offset / 4) % subsequences),
        first_counter_((offset / 4) / subsequences),
        skip_(static_cast<u32>(offset % 4)),
        blocks_per_group_(blocks_per_group) {}

  /// Outputs of group 0 that are skipped (offset % 4): output j belongs to group (skip() + j) / 4,
  /// at position (skip() + j) % 4 in it.
  [[nodiscard]] ACCEL_HOST_DEVICE constexpr u32 skip() const noexcept { return skip_; }
  [[nodiscard]] ACCEL_HOST_DEVICE constexpr u32 blocks_per_group() const noexcept { return blocks_per_group_; }

  /// The Philox counter of block k (< blocks_per_group()) of group g.
  [[nodiscard]] ACCEL_HOST_DEVICE constexpr U32x4 counter(u64 g, u32 k = 0) const noexcept {
    const u64 t = first_subsequence_ + g;
    const u64 sub = t % subsequences;
    const u64 visit = t / subsequences;
    // Subsequences before s0 start one block later, so their first visit is visit 1.
    const u64 late = sub < first_subsequence_ ? 1 : 0;
    return philox_counter(first_counter_ + late + (visit - late) * blocks_per_group_ + k, sub);
  }

  /// How many groups from g on share g's counter with consecutive subsequences: group g + i uses
  /// counter(g, k) with z + i, for i < run_length(g). Lets a fill vectorise over plain 32-bit lanes.
  [[nodiscard]] ACCEL_HOST_DEVICE constexpr u64 run_length(u64 g) const noexcept {
    const u64 sub = (first_subsequence_ + g) % subsequences;
    return sub < first_subsequence_ ? first_subsequence_ - sub : subsequences - sub;
  }

 private:
  u64 first_subsequence_;
  u64 first_counter_;
  u32 skip_;
  u32 blocks_per_group_;
};

}  // namespace accel::rng
