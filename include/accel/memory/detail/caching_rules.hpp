// accel/memory/detail/caching_rules.hpp — the size rules of accel::CachingAllocator (torch's).
//
//   round_size(n)          requests are rounded up to a multiple of 512 B (512 minimum), or, when
//                          roundup_power2_divisions gives d > 1 for n and n > 512 * d, up to the next
//                          of d equal steps between two powers of two (torch's code: 1200 B with
//                          d = 4 stays below 2048 = 512 * 4, so it rounds to 1536, not 1280 as torch's
//                          documentation says).
//   segment_size(rounded)  bytes asked of the raw allocator when no cached block fits: 2 MiB for
//                          the small pool (rounded <= 1 MiB), 20 MiB for 1-10 MiB, else rounded up
//                          to a multiple of 2 MiB.
//   format_size(bytes)     torch's "12.00 MiB" spelling for messages.
//   out_of_memory_message  what OutOfMemoryError says: the request and every figure.
// Requests above max_request are refused before any rounding, so no arithmetic here overflows.
#pragma once

#include <accel/memory/allocator_config.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

namespace accel::caching {

inline constexpr std::size_t min_block_size = 512;           ///< kMinBlockSize
inline constexpr std::size_t small_size = std::size_t{1} << 20;     ///< kSmallSize: small pool limit
inline constexpr std::size_t small_buffer = std::size_t{2} << 20;   ///< kSmallBuffer: small segments
inline constexpr std::size_t min_large_alloc = std::size_t{10} << 20;  ///< kMinLargeAlloc
inline constexpr std::size_t large_buffer = std::size_t{20} << 20;  ///< kLargeBuffer: mid-size segments
inline constexpr std::size_t round_large = std::size_t{2} << 20;    ///< kRoundLarge
/// Largest request the allocator tries to serve; anything above is an immediate OutOfMemoryError.
inline constexpr std::size_t max_request = std::numeric_limits<std::size_t>::max() / 4;

/// Rounds a request up (torch's roundup_power2_next_division). size <= max_request, divisions >= 2.
[[nodiscard]] constexpr std::size_t roundup_power2_next_division(std::size_t size, std::size_t divisions) noexcept {
  if (std::has_single_bit(size)) return size;
  const std::size_t power2_floor = std::bit_floor(size);
  const std::size_t power2_division = power2_floor >> (std::bit_width(divisions) - 1);
  if (power2_division == 0) return power2_floor << 1;
  const std::size_t round_size_floor = size & ~(power2_division - 1);
  return round_size_floor == size ? size : round_size_floor + power2_division;
}

/// The block size that serves a request of `size` bytes (size <= max_request).
[[nodiscard]] constexpr std::size_t round_size(std::size_t size, const AllocatorConfig& config) noexcept {
  if (size < min_block_size) return min_block_size;
  const std::size_t divisions = config.divisions_for(size);
  // size > min_block_size * divisions, written so that it cannot overflow (divisions may be 2^63).
  if (divisions > 1 && divisions < (size + min_block_size - 1) / min_block_size) {
    return roundup_power2_next_division(size, divisions);
  }
  return min_block_size * ((size + min_block_size - 1) / min_block_size);
}

/// Whether a rounded size is served from the small pool.
[[nodiscard]] constexpr bool is_small(std::size_t rounded) noexcept { return rounded <= small_size; }

/// Bytes of a new segment for a rounded request (torch's get_allocation_size).
[[nodiscard]] constexpr std::size_t segment_size(std::size_t rounded) noexcept {
  if (rounded <= small_size) return small_buffer;
  if (rounded < min_large_alloc) return large_buffer;
  return round_large * ((rounded + round_large - 1) / round_large);
}

/// torch's format_size: "512 bytes", "1.50 KiB", "20.00 MiB", "1.25 GiB".
[[nodiscard]] inline std::string format_size(std::uint64_t size) {
  char buf[64];
  if (size <= 1024) {
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(size));
  } else if (size <= 1048576) {
    std::snprintf(buf, sizeof buf, "%.2f KiB", static_cast<double>(size) / 1024.0);
  } else if (size <= 1073741824ULL) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(size) / 1048576.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(size) / 1073741824.0);
  }
  return buf;
}

/// What an out-of-memory message states.
struct OomFigures {
  std::string device;          ///< "cuda:0"
  std::size_t requested = 0;   ///< bytes asked for
  std::size_t alloc_size = 0;  ///< bytes of the segment that could not be had; 0: the bookkeeping
  std::size_t free = 0;        ///< the device's free bytes
  std::size_t total = 0;       ///< the device's capacity
  double fraction = -1.0;      ///< the memory fraction, or < 0 when none is set
  std::size_t allowed = 0;     ///< the fraction's limit in bytes
  std::size_t allocated = 0;   ///< bytes allocated by the caching allocator
  std::size_t reserved = 0;    ///< bytes reserved by the caching allocator
  std::string hint;            ///< the raw policy's advice, if any
};

/// torch's out-of-memory message, with accel's names.
[[nodiscard]] inline std::string out_of_memory_message(const OomFigures& f) {
  std::string msg = f.device + " out of memory: tried to allocate " + format_size(f.alloc_size);
  if (f.alloc_size == 0) {
    msg = f.device + " out of memory: the caching allocator could not grow its own bookkeeping for a request of " +
          std::to_string(f.requested) + " bytes (the process is out of address space or heap: see `ulimit -v`)";
  } else if (f.alloc_size != f.requested) {
    msg += " (a segment for a request of " + std::to_string(f.requested) + " bytes)";
  } else {
    msg += " (" + std::to_string(f.requested) + " bytes)";
  }
  msg += ". " + f.device + " has a total capacity of " + format_size(f.total) + " of which " + format_size(f.free) +
         " is free. ";
  if (f.fraction >= 0.0) {
    char fraction[32];
    std::snprintf(fraction, sizeof fraction, "%.3g", f.fraction);
    msg += "The limit is " + format_size(f.allowed) + " (memory fraction " + fraction + "). ";
  } else {
    msg += "No memory fraction limit is set. ";
  }
  msg += "Of the reserved memory " + format_size(f.reserved) + ", " + format_size(f.allocated) + " is allocated and " +
         format_size(f.reserved - f.allocated) +
         " is reserved but unallocated. If reserved but unallocated memory is large, try "
         "ACCEL_ALLOC_CONF=max_split_size_mb:<MiB> to limit fragmentation.";
  if (!f.hint.empty()) msg += " " + f.hint;
  return msg;
}

}  // namespace accel::caching
