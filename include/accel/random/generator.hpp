// accel/random/generator.hpp — accel::Generator: a Philox4x32-10 stream position, (seed, offset).
//
// A Generator is the state torch's CUDA generator keeps: a 64-bit seed and a 64-bit offset counted
// in 32-bit words of the Philox output (cuRAND's curandSetGeneratorOffset unit). Fills do not live
// here: a backend's fill reserves words with reserve(n) at enqueue time and hands (seed, offset) to
// accel::rng::fill_* (random/fill.hpp) or to its kernel, so the numbers depend only on the order of
// the calls, never on when the stream runs them.
//
// Offsets are kept multiples of 4 (one Philox block): reserve(n) advances by n rounded up to a
// multiple of 4, and set_state() rejects an offset that is not one. So every fill starts on a block
// boundary and a fill of n words at offset o equals cuRAND's curandGenerate* of n values after
// curandSetGeneratorOffset(o). This is a deliberate difference from one cuRAND host generator used
// for consecutive calls: cuRAND advances its offset by exactly what it consumed, so a second call
// after an odd-length one starts mid-block (fill.hpp reproduces that for any offset when asked).
// Here up to 3 words per call are skipped instead — as torch does (its Philox offsets advance in
// multiples of 4) — which keeps the state torch-compatible.
//
// 64-bit outputs (double uniforms and normals) use two blocks per group of 4 outputs, and cuRAND's
// layout puts the second block 65536 blocks further on (CurandPhiloxLayout in philox.hpp): a double
// fill's blocks are not one contiguous range. reserve_wide(n) therefore advances the offset past the
// last block the n doubles use (about 65536 blocks more than 2n words), so no later fill reuses a
// block an earlier one drew from. cuRAND's host generator instead advances by n and reuses blocks.
//
// Thread safety: every member may be called from any thread; reserve() is one atomic step, so
// threads reserving concurrently get disjoint ranges.
#pragma once

#include <accel/core/error.hpp>
#include <accel/random/philox.hpp>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <utility>

#if __has_include(<sys/random.h>)
#include <sys/random.h>
#else
#include <random>
#endif

namespace accel {

class Generator {
 public:
  /// torch's default seed (torch.initial_seed() of a fresh process).
  static constexpr std::uint64_t default_seed = 67280421310721ULL;
  /// Bytes of get_state(): seed then offset, each little-endian (torch's CUDA generator state).
  static constexpr std::size_t state_size = 16;
  using State = std::array<std::byte, state_size>;

  Generator() noexcept = default;
  explicit Generator(std::uint64_t seed) noexcept : seed_(seed) {}
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  /// Sets the seed and rewinds the offset to 0.
  void manual_seed(std::uint64_t seed) noexcept {
    const std::lock_guard lock(mutex_);
    seed_ = seed;
    offset_ = 0;
  }

  /// Seeds from the operating system's entropy (64 bits) and rewinds; returns the new seed.
  std::uint64_t seed() {
    const std::uint64_t s = entropy64();
    manual_seed(s);
    return s;
  }

  /// The seed set last (by construction, manual_seed, seed or set_state).
  [[nodiscard]] std::uint64_t initial_seed() const noexcept {
    const std::lock_guard lock(mutex_);
    return seed_;
  }

  /// The offset the next reserve() returns (32-bit words, a multiple of 4).
  [[nodiscard]] std::uint64_t offset() const noexcept {
    const std::lock_guard lock(mutex_);
    return offset_;
  }

  /// Seed and offset as one consistent pair.
  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> position() const noexcept {
    const std::lock_guard lock(mutex_);
    return {seed_, offset_};
  }

  /// 16 bytes: the seed, then the offset, each little-endian.
  [[nodiscard]] State get_state() const noexcept {
    const auto [s, o] = position();
    State out{};
    for (std::size_t i = 0; i < 8; ++i) {
      out[i] = static_cast<std::byte>((s >> (8 * i)) & 0xFF);
      out[8 + i] = static_cast<std::byte>((o >> (8 * i)) & 0xFF);
    }
    return out;
  }

  /// Restores a get_state() blob. Throws InvalidArgumentError, changing nothing, for a blob that is
  /// not 16 bytes or whose offset is not a multiple of 4.
  void set_state(std::span<const std::byte> state) {
    if (state.size() != state_size) {
      throw InvalidArgumentError("Generator::set_state: expected a " + std::to_string(state_size) +
                                 "-byte state (seed then offset, little-endian), got " +
                                 std::to_string(state.size()) + " bytes");
    }
    std::uint64_t s = 0, o = 0;
    for (std::size_t i = 0; i < 8; ++i) {
      s |= static_cast<std::uint64_t>(state[i]) << (8 * i);
      o |= static_cast<std::uint64_t>(state[8 + i]) << (8 * i);
    }
    if (o % 4 != 0) {
      throw InvalidArgumentError("Generator::set_state: offset " + std::to_string(o) +
                                 " is not a multiple of 4 (offsets count 32-bit words and every fill starts "
                                 "on a Philox block boundary)");
    }
    const std::lock_guard lock(mutex_);
    seed_ = s;
    offset_ = o;
  }

  /// Takes n 32-bit words: returns the offset they start at and advances it by n rounded up to a
  /// multiple of 4. Throws InvalidArgumentError (changing nothing) if the offset would overflow.
  std::uint64_t reserve(std::uint64_t n) {
    const std::uint64_t step = round_up(n);
    const std::lock_guard lock(mutex_);
    check_advance(step);
    return std::exchange(offset_, offset_ + step);
  }

  /// As reserve(), returning the seed with the offset (both taken in the same step).
  std::pair<std::uint64_t, std::uint64_t> reserve_position(std::uint64_t n) {
    const std::uint64_t step = round_up(n);
    const std::lock_guard lock(mutex_);
    check_advance(step);
    return {seed_, std::exchange(offset_, offset_ + step)};
  }

  /// Takes the blocks n 64-bit outputs (double fills) use at the current offset: returns that offset
  /// and advances past the last of them (wide_words() words).
  std::uint64_t reserve_wide(std::uint64_t n) { return reserve_wide_position(n).second; }

  /// As reserve_wide(), returning the seed with the offset.
  std::pair<std::uint64_t, std::uint64_t> reserve_wide_position(std::uint64_t n) {
    const std::lock_guard lock(mutex_);
    const std::uint64_t step = wide_words(offset_, n);
    check_advance(step);
    return {seed_, std::exchange(offset_, offset_ + step)};
  }

  /// Reserves n outputs as reserve_position(n) (wide: reserve_wide_position(n)) and calls
  /// launch(seed, offset) with them. If launch throws, the reservation is given back — when no other
  /// reservation followed it, which would have to keep its numbers — and the exception goes on: a fill
  /// that fails to launch leaves the generator as it found it.
  template <class Launch>
  void reserve_then(std::uint64_t n, bool wide, Launch&& launch) {
    std::uint64_t seed = 0, from = 0, to = 0;
    {
      const std::uint64_t rounded = wide ? 0 : round_up(n);
      const std::lock_guard lock(mutex_);
      const std::uint64_t step = wide ? wide_words(offset_, n) : rounded;
      check_advance(step);
      seed = seed_;
      from = offset_;
      to = offset_ += step;
    }
    try {
      launch(seed, from);
    } catch (...) {
      (void)give_back(seed, from, to);
      throw;
    }
  }

  /// Gives back the reservation [from, to) made under `seed` when it is still the last one — no
  /// reservation followed it (those would have to keep their numbers) and the seed was not changed —
  /// so that work which reserved and then failed leaves the generator as it found it. Returns whether
  /// it did.
  bool give_back(std::uint64_t seed, std::uint64_t from, std::uint64_t to) noexcept {
    const std::lock_guard lock(mutex_);
    if (seed_ != seed || offset_ != to || from > to) return false;
    offset_ = from;
    return true;
  }

  /// One draw of a sequence reserved at once (a graph replay's fills): n outputs of 32 bits
  /// (reserve) or of 64 bits (reserve_wide).
  struct Draw {
    std::uint64_t n = 0;
    bool wide = false;
  };

  /// Reserves `draws` in one step, exactly as consecutive reserve()/reserve_wide() calls would (no
  /// other thread's reservation lands between them): writes each draw's offset to offsets[i] and
  /// returns the seed. Throws InvalidArgumentError, changing nothing, if the offset would overflow or
  /// offsets is shorter than draws.
  std::uint64_t reserve_draws(std::span<const Draw> draws, std::span<std::uint64_t> offsets) {
    if (offsets.size() < draws.size()) {
      throw InvalidArgumentError("Generator::reserve_draws: " + std::to_string(draws.size()) + " draws but room for " +
                                 std::to_string(offsets.size()) + " offsets");
    }
    return reserve_draws(draws.data(), draws.size(), offsets.data());
  }
  /// The same for `count` draws at `draws`, writing count offsets to `offsets` (for callers holding
  /// vectors: a vector-to-span conversion instantiates the ranges concepts, which nvcc pays for), and,
  /// when `end` is not null, the offset after the last draw to *end (what give_back needs).
  std::uint64_t reserve_draws(const Draw* draws, std::size_t count, std::uint64_t* offsets,
                              std::uint64_t* end = nullptr) {
    const std::lock_guard lock(mutex_);
    std::uint64_t at = offset_;
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint64_t step = draws[i].wide ? wide_words(at, draws[i].n) : round_up(draws[i].n);
      if (at > std::numeric_limits<std::uint64_t>::max() - step) {
        throw InvalidArgumentError("Generator::reserve_draws: draw " + std::to_string(i) + " overflows the 64-bit offset");
      }
      offsets[i] = at;
      at += step;
    }
    if (end != nullptr) *end = at;
    offset_ = at;
    return seed_;
  }

  /// fork() support for the owner of process-wide generators (random/default_generators.hpp): its
  /// pthread_atfork prepare handler takes the mutex so that no thread is inside a reservation at the
  /// fork, and the parent and child handlers give it back. Not for other use.
  void lock_for_fork() const noexcept { mutex_.lock(); }
  void unlock_after_fork() const noexcept { mutex_.unlock(); }

  /// 32-bit words from `offset` (a multiple of 4) to just past the last block that n 64-bit outputs
  /// drawn at `offset` use (0 for n == 0).
  [[nodiscard]] static std::uint64_t wide_words(std::uint64_t offset, std::uint64_t n) {
    if (n == 0) return 0;
    if (n > std::numeric_limits<std::uint64_t>::max() / 8) {
      throw InvalidArgumentError("Generator::reserve_wide: " + std::to_string(n) + " outputs overflow the offset");
    }
    // Block index b = counter * 65536 + subsequence grows with the group, so the last group's
    // second block is the last one used.
    const rng::CurandPhiloxLayout layout(offset, 2);
    const std::uint64_t groups = (n + 3) / 4;
    const rng::U32x4 c = layout.counter(groups - 1, 1);
    const std::uint64_t counter = (static_cast<std::uint64_t>(c.y) << 32) | c.x;
    const std::uint64_t last = counter * rng::CurandPhiloxLayout::subsequences + c.z;
    return 4 * (last + 1) - offset;
  }

 private:
  void check_advance(std::uint64_t step) const {  // mutex_ held
    if (offset_ > std::numeric_limits<std::uint64_t>::max() - step) {
      throw InvalidArgumentError("Generator::reserve: " + std::to_string(step) + " words past offset " +
                                 std::to_string(offset_) + " overflow the 64-bit offset");
    }
  }

  static std::uint64_t entropy64() {
#if __has_include(<sys/random.h>)
    std::uint64_t value = 0;
    auto* bytes = reinterpret_cast<unsigned char*>(&value);
    std::size_t got = 0;
    while (got < sizeof value) {
      const auto n = ::getrandom(bytes + got, sizeof value - got, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw InvalidStateError("Generator::seed: getrandom() failed to provide entropy");
      got += static_cast<std::size_t>(n);
    }
    return value;
#else
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ static_cast<std::uint64_t>(rd());
#endif
  }

  static std::uint64_t round_up(std::uint64_t n) {
    if (n > std::numeric_limits<std::uint64_t>::max() - 3) {
      throw InvalidArgumentError("Generator::reserve: " + std::to_string(n) + " words overflow the offset");
    }
    return (n + 3) & ~std::uint64_t{3};
  }

  mutable std::mutex mutex_;
  std::uint64_t seed_ = default_seed;
  std::uint64_t offset_ = 0;
};

}  // namespace accel
