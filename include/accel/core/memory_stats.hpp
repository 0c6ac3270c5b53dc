// accel/core/memory_stats.hpp — accel::MemoryStats: torch's caching-allocator statistics, key for key.
//
// The same set as c10::CachingDeviceAllocator::DeviceStats, with the same meanings:
//   allocation, segment, active, inactive_split, allocated_bytes, reserved_bytes, active_bytes,
//   inactive_split_bytes, requested_bytes      one Stat per StatType (all, small_pool, large_pool)
//   oversize_allocations, oversize_segments     a single Stat each (no pool split)
//   num_alloc_retries, num_ooms, num_sync_all_streams, num_device_alloc, num_device_free   counters
//   max_split_size                              the configured limit; -1 when unlimited (SIZE_MAX cast)
// Each Stat has current, peak (highest current since the last reset_peak), allocated (sum of
// increases) and freed (sum of decreases). flat() spells the keys exactly as torch.cuda.memory_stats()
// does: "allocated_bytes.all.current", "reserved_bytes.large_pool.peak", "num_alloc_retries", ...
// reset_peak() sets peak = current on every Stat; reset_accumulated() zeroes allocated and freed and
// every num_* counter (torch's reset_peak_memory_stats / reset_accumulated_memory_stats).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace accel {

/// Free and total bytes of a device, as cudaMemGetInfo reports them (torch's mem_get_info).
struct MemoryInfo {
  std::size_t free = 0;
  std::size_t total = 0;
  friend bool operator==(const MemoryInfo&, const MemoryInfo&) = default;
};

/// One statistic: a current value, its peak, and the cumulative increases and decreases.
struct Stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;
  std::int64_t freed = 0;

  [[gnu::always_inline]] constexpr void increase(std::int64_t amount) noexcept {
    current += amount;
    if (current > peak) peak = current;
    allocated += amount;
  }
  [[gnu::always_inline]] constexpr void decrease(std::int64_t amount) noexcept {
    current -= amount;
    freed += amount;
  }
  constexpr void reset_peak() noexcept { peak = current; }
  constexpr void reset_accumulated() noexcept {
    allocated = 0;
    freed = 0;
  }
  friend bool operator==(const Stat&, const Stat&) = default;
};

/// Which blocks a Stat counts: every block, or those of the small (<= 1 MiB) or large pool.
enum class StatType : std::uint8_t { all = 0, small_pool = 1, large_pool = 2 };

inline constexpr std::size_t stat_type_count = 3;

/// torch's spelling of a StatType: "all", "small_pool", "large_pool".
[[nodiscard]] constexpr std::string_view to_string(StatType type) noexcept {
  switch (type) {
    case StatType::all: return "all";
    case StatType::small_pool: return "small_pool";
    case StatType::large_pool: return "large_pool";
  }
  return "unknown";
}

/// One Stat per StatType, indexed by StatType.
struct StatArray {
  std::array<Stat, stat_type_count> stats{};

  [[nodiscard]] constexpr Stat& operator[](StatType type) noexcept {
    return stats[static_cast<std::size_t>(type)];
  }
  [[nodiscard]] constexpr const Stat& operator[](StatType type) const noexcept {
    return stats[static_cast<std::size_t>(type)];
  }
  [[nodiscard]] constexpr Stat& all() noexcept { return stats[0]; }
  [[nodiscard]] constexpr const Stat& all() const noexcept { return stats[0]; }

  /// Adds `amount` to the aggregate and to `pool` (small_pool or large_pool).
  [[gnu::always_inline]] constexpr void increase(StatType pool, std::int64_t amount) noexcept {
    stats[0].increase(amount);
    stats[static_cast<std::size_t>(pool)].increase(amount);
  }
  [[gnu::always_inline]] constexpr void decrease(StatType pool, std::int64_t amount) noexcept {
    stats[0].decrease(amount);
    stats[static_cast<std::size_t>(pool)].decrease(amount);
  }
  constexpr void reset_peak() noexcept {
    for (Stat& s : stats) s.reset_peak();
  }
  constexpr void reset_accumulated() noexcept {
    for (Stat& s : stats) s.reset_accumulated();
  }
  friend bool operator==(const StatArray&, const StatArray&) = default;
};

/// A caching allocator's statistics for one device (torch's DeviceStats).
struct MemoryStats {
  StatArray allocation;            ///< allocation requests currently served
  StatArray segment;               ///< segments obtained from the raw allocator
  StatArray active;                ///< allocated blocks plus freed blocks still awaiting stream events
  StatArray inactive_split;        ///< free blocks that are pieces of a split segment
  StatArray allocated_bytes;       ///< rounded bytes of allocated blocks (memory_allocated)
  StatArray reserved_bytes;        ///< bytes of all segments (memory_reserved)
  StatArray active_bytes;          ///< bytes of active blocks
  StatArray inactive_split_bytes;  ///< bytes of inactive split blocks (fragmentation)
  StatArray requested_bytes;       ///< unrounded requested bytes of active blocks
  Stat oversize_allocations;       ///< allocations of at least max_split_size bytes
  Stat oversize_segments;          ///< segments of at least max_split_size bytes
  std::int64_t num_alloc_retries = 0;     ///< raw allocations retried after flushing the whole cache
  std::int64_t num_ooms = 0;              ///< OutOfMemoryErrors thrown
  std::int64_t num_sync_all_streams = 0;  ///< flushes that synchronized every pending event
  std::int64_t num_device_alloc = 0;      ///< raw segment allocations
  std::int64_t num_device_free = 0;       ///< raw segment frees
  std::int64_t max_split_size = -1;       ///< blocks this large are never split; -1 = unlimited

  /// Sets peak = current on every Stat.
  constexpr void reset_peak() noexcept {
    for_each_array([](StatArray& a) { a.reset_peak(); });
    oversize_allocations.reset_peak();
    oversize_segments.reset_peak();
  }

  /// Zeroes allocated/freed of every Stat and every num_* counter.
  constexpr void reset_accumulated() noexcept {
    for_each_array([](StatArray& a) { a.reset_accumulated(); });
    oversize_allocations.reset_accumulated();
    oversize_segments.reset_accumulated();
    num_alloc_retries = 0;
    num_ooms = 0;
    num_sync_all_streams = 0;
    num_device_alloc = 0;
    num_device_free = 0;
  }

  /// torch.cuda.memory_stats()'s flat, sorted "a.b.c" -> value map (122 keys).
  [[nodiscard]] std::map<std::string, std::int64_t> flat() const {
    std::map<std::string, std::int64_t> out;
    const auto add_stat = [&out](const std::string& prefix, const Stat& s) {
      out.emplace(prefix + ".current", s.current);
      out.emplace(prefix + ".peak", s.peak);
      out.emplace(prefix + ".allocated", s.allocated);
      out.emplace(prefix + ".freed", s.freed);
    };
    const auto add_array = [&](std::string_view name, const StatArray& a) {
      for (std::size_t t = 0; t < stat_type_count; ++t) {
        const auto type = static_cast<StatType>(t);
        add_stat(std::string(name) + "." + std::string(to_string(type)), a[type]);
      }
    };
    add_array("allocation", allocation);
    add_array("segment", segment);
    add_array("active", active);
    add_array("inactive_split", inactive_split);
    add_array("allocated_bytes", allocated_bytes);
    add_array("reserved_bytes", reserved_bytes);
    add_array("active_bytes", active_bytes);
    add_array("inactive_split_bytes", inactive_split_bytes);
    add_array("requested_bytes", requested_bytes);
    add_stat("oversize_allocations", oversize_allocations);
    add_stat("oversize_segments", oversize_segments);
    out.emplace("num_alloc_retries", num_alloc_retries);
    out.emplace("num_ooms", num_ooms);
    out.emplace("num_sync_all_streams", num_sync_all_streams);
    out.emplace("num_device_alloc", num_device_alloc);
    out.emplace("num_device_free", num_device_free);
    out.emplace("max_split_size", max_split_size);
    return out;
  }

  friend bool operator==(const MemoryStats&, const MemoryStats&) = default;

 private:
  template <class F>
  constexpr void for_each_array(F&& f) {
    f(allocation);
    f(segment);
    f(active);
    f(inactive_split);
    f(allocated_bytes);
    f(reserved_bytes);
    f(active_bytes);
    f(inactive_split_bytes);
    f(requested_bytes);
  }
};

}  // namespace accel
