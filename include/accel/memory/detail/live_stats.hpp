// accel/memory/detail/live_stats.hpp — how CachingAllocator keeps torch's statistics while it runs:
// the same keys and values as MemoryStats (core/memory_stats.hpp), stored so that the hot path does less.
//
// MemoryStats holds, per statistic, four numbers for each of all / small_pool / large_pool, and an
// update touches two of them (the pool's and the aggregate's): ~8 memory operations per increase and
// 4 per decrease. Here each pool keeps only what cannot be derived:
//   current, peak, allocated (sum of increases), and `base` (current at the last reset_accumulated);
//   freed     = base + allocated - current  (current == base + allocated - freed at all times)
//   all       = the sum of the pools, except its peak, which is the peak of the sum and kept live.
// So an increase updates current, peak and allocated of one pool and the aggregate peak; a decrease
// only subtracts from current. snapshot() turns this back into a MemoryStats, value for value.
#pragma once

#include <accel/core/memory_stats.hpp>

#include <cstddef>
#include <cstdint>

namespace accel::detail {

/// One statistic without a pool split (oversize_allocations, oversize_segments).
struct LiveStat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;
  std::int64_t base = 0;  // current at the last reset_accumulated

  [[gnu::always_inline]] void increase(std::int64_t amount) noexcept {
    current += amount;
    if (current > peak) [[unlikely]] peak = current;  // a new peak is rare once a workload runs
    allocated += amount;
  }
  [[gnu::always_inline]] void decrease(std::int64_t amount) noexcept { current -= amount; }
  void reset_peak() noexcept { peak = current; }
  void reset_accumulated() noexcept {
    allocated = 0;
    base = current;
  }
  [[nodiscard]] Stat get() const noexcept { return {current, peak, allocated, base + allocated - current}; }
};

/// One statistic per pool (index 0: small pool, 1: large pool) and the aggregate's peak.
struct LiveStatArray {
  LiveStat pool[2];
  std::int64_t all_peak = 0;

  [[gnu::always_inline]] void increase(std::size_t p, std::int64_t amount) noexcept {
    pool[p].increase(amount);
    const std::int64_t all = pool[0].current + pool[1].current;
    if (all > all_peak) [[unlikely]] all_peak = all;
  }
  [[gnu::always_inline]] void decrease(std::size_t p, std::int64_t amount) noexcept { pool[p].decrease(amount); }
  // The allocator's re-allocation of the block it freed last folds a decrease and the increase that
  // undoes it (or the other way round) into one update; no reset_peak() came between them.
  /// increase() of an amount that takes current back to a value it held since the last reset_peak():
  /// no peak can be passed, so none is checked.
  [[gnu::always_inline]] void restore(std::size_t p, std::int64_t amount) noexcept {
    pool[p].current += amount;
    pool[p].allocated += amount;
  }
  /// decrease(amount) then increase(amount): current ends where it was, `amount` more allocated and freed.
  [[gnu::always_inline]] void decrease_then_increase(std::size_t p, std::int64_t amount) noexcept {
    pool[p].allocated += amount;
  }
  /// increase(amount) then decrease(amount): the same, and current + amount counts for the peaks.
  [[gnu::always_inline]] void increase_then_decrease(std::size_t p, std::int64_t amount) noexcept {
    LiveStat& s = pool[p];
    s.allocated += amount;
    if (s.current + amount > s.peak) s.peak = s.current + amount;
    const std::int64_t all = pool[0].current + pool[1].current + amount;
    if (all > all_peak) all_peak = all;
  }
  /// decrease(removed) then increase(added).
  [[gnu::always_inline]] void decrease_then_increase(std::size_t p, std::int64_t removed, std::int64_t added) noexcept {
    LiveStat& s = pool[p];
    s.current -= removed;
    increase(p, added);
  }
  void reset_peak() noexcept {
    pool[0].reset_peak();
    pool[1].reset_peak();
    all_peak = pool[0].current + pool[1].current;
  }
  void reset_accumulated() noexcept {
    pool[0].reset_accumulated();
    pool[1].reset_accumulated();
  }
  [[nodiscard]] std::int64_t current() const noexcept { return pool[0].current + pool[1].current; }
  [[nodiscard]] Stat all() const noexcept {
    const Stat s = pool[0].get();
    const Stat l = pool[1].get();
    return {s.current + l.current, all_peak, s.allocated + l.allocated, s.freed + l.freed};
  }
  [[nodiscard]] StatArray get() const noexcept {
    StatArray out;
    out[StatType::all] = all();
    out[StatType::small_pool] = pool[0].get();
    out[StatType::large_pool] = pool[1].get();
    return out;
  }
};

/// Every statistic of MemoryStats, in the live form.
struct LiveStats {
  LiveStatArray allocation;
  LiveStatArray segment;
  LiveStatArray active;
  LiveStatArray inactive_split;
  LiveStatArray allocated_bytes;
  LiveStatArray reserved_bytes;
  LiveStatArray active_bytes;
  LiveStatArray inactive_split_bytes;
  LiveStatArray requested_bytes;
  LiveStat oversize_allocations;
  LiveStat oversize_segments;
  std::int64_t num_alloc_retries = 0;
  std::int64_t num_ooms = 0;
  std::int64_t num_sync_all_streams = 0;
  std::int64_t num_device_alloc = 0;
  std::int64_t num_device_free = 0;

  void reset_peak() noexcept {
    for_each_array([](LiveStatArray& a) { a.reset_peak(); });
    oversize_allocations.reset_peak();
    oversize_segments.reset_peak();
  }
  void reset_accumulated() noexcept {
    for_each_array([](LiveStatArray& a) { a.reset_accumulated(); });
    oversize_allocations.reset_accumulated();
    oversize_segments.reset_accumulated();
    num_alloc_retries = 0;
    num_ooms = 0;
    num_sync_all_streams = 0;
    num_device_alloc = 0;
    num_device_free = 0;
  }

  /// The MemoryStats these numbers stand for.
  [[nodiscard]] MemoryStats snapshot(std::int64_t max_split_size) const noexcept {
    MemoryStats out;
    out.allocation = allocation.get();
    out.segment = segment.get();
    out.active = active.get();
    out.inactive_split = inactive_split.get();
    out.allocated_bytes = allocated_bytes.get();
    out.reserved_bytes = reserved_bytes.get();
    out.active_bytes = active_bytes.get();
    out.inactive_split_bytes = inactive_split_bytes.get();
    out.requested_bytes = requested_bytes.get();
    out.oversize_allocations = oversize_allocations.get();
    out.oversize_segments = oversize_segments.get();
    out.num_alloc_retries = num_alloc_retries;
    out.num_ooms = num_ooms;
    out.num_sync_all_streams = num_sync_all_streams;
    out.num_device_alloc = num_device_alloc;
    out.num_device_free = num_device_free;
    out.max_split_size = max_split_size;
    return out;
  }

 private:
  template <class F>
  void for_each_array(F&& f) {
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

}  // namespace accel::detail
