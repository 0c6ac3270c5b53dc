// accel/memory/allocator_statistics.hpp — torch's memory-statistics functions, once for every backend.
//
// A backend's Memory struct derives from AllocatorStatistics<Memory, Devices> and provides
// `static CachingAllocator<...>& allocator(int device)`; this supplies memory_allocated,
// max_memory_allocated, memory_reserved, the legacy *_cached names, memory_stats, the resets and
// set_per_process_memory_fraction, each with and without a device index (default: the current one).
#pragma once

#include <accel/core/memory_stats.hpp>

#include <cstddef>
#include <cstdint>

namespace accel {

template <class Memory, class Devices>
struct AllocatorStatistics {
  [[nodiscard]] static std::size_t memory_allocated() { return memory_allocated(Devices::current_device()); }
  [[nodiscard]] static std::size_t memory_allocated(int dev) {
    return bytes(Memory::allocator(dev).allocated_bytes().current);
  }
  [[nodiscard]] static std::size_t max_memory_allocated() { return max_memory_allocated(Devices::current_device()); }
  [[nodiscard]] static std::size_t max_memory_allocated(int dev) {
    return bytes(Memory::allocator(dev).allocated_bytes().peak);
  }
  /// Resets every peak, as torch's reset_max_memory_allocated (now reset_peak_memory_stats) does.
  static void reset_max_memory_allocated() { reset_peak_memory_stats(); }
  static void reset_max_memory_allocated(int dev) { reset_peak_memory_stats(dev); }

  [[nodiscard]] static std::size_t memory_reserved() { return memory_reserved(Devices::current_device()); }
  [[nodiscard]] static std::size_t memory_reserved(int dev) {
    return bytes(Memory::allocator(dev).reserved_bytes().current);
  }
  [[nodiscard]] static std::size_t max_memory_reserved() { return max_memory_reserved(Devices::current_device()); }
  [[nodiscard]] static std::size_t max_memory_reserved(int dev) {
    return bytes(Memory::allocator(dev).reserved_bytes().peak);
  }

  /// Legacy names of memory_reserved and friends.
  [[nodiscard]] static std::size_t memory_cached() { return memory_reserved(); }
  [[nodiscard]] static std::size_t memory_cached(int dev) { return memory_reserved(dev); }
  [[nodiscard]] static std::size_t max_memory_cached() { return max_memory_reserved(); }
  [[nodiscard]] static std::size_t max_memory_cached(int dev) { return max_memory_reserved(dev); }
  static void reset_max_memory_cached() { reset_peak_memory_stats(); }
  static void reset_max_memory_cached(int dev) { reset_peak_memory_stats(dev); }

  [[nodiscard]] static MemoryStats memory_stats() { return memory_stats(Devices::current_device()); }
  [[nodiscard]] static MemoryStats memory_stats(int dev) { return Memory::allocator(dev).stats(); }
  static void reset_peak_memory_stats() { reset_peak_memory_stats(Devices::current_device()); }
  static void reset_peak_memory_stats(int dev) { Memory::allocator(dev).reset_peak_stats(); }
  static void reset_accumulated_memory_stats() { reset_accumulated_memory_stats(Devices::current_device()); }
  static void reset_accumulated_memory_stats(int dev) { Memory::allocator(dev).reset_accumulated_stats(); }

  /// Caps what `dev`'s allocator may reserve at fraction * total_memory (0 < fraction <= 1).
  static void set_per_process_memory_fraction(double fraction) {
    set_per_process_memory_fraction(fraction, Devices::current_device());
  }
  static void set_per_process_memory_fraction(double fraction, int dev) {
    Memory::allocator(dev).set_memory_fraction(fraction);
  }

 protected:
  static std::size_t bytes(std::int64_t n) noexcept { return n > 0 ? static_cast<std::size_t>(n) : 0; }
};

}  // namespace accel
