// accel::MemoryStats on its own (the value type every backend's memory_stats() returns, and what a
// user's allocator can keep its statistics in), and the caching allocator's live form of it
// (memory/detail/live_stats.hpp) against it: the same updates must give the same numbers, key for key.
#include <accel/core/memory_stats.hpp>
#include <accel/memory/detail/live_stats.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using accel::MemoryStats;
using accel::Stat;
using accel::StatArray;
using accel::StatType;

// torch's key stems (reference/torch-accelerator.md §3.6), in the order MemoryStats declares them.
constexpr std::array<const char*, 9> array_stems = {
    "allocation",     "segment",      "active",       "inactive_split",      "allocated_bytes",
    "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes"};
constexpr std::array<const char*, 3> pools = {"all", "small_pool", "large_pool"};
constexpr std::array<const char*, 4> fields = {"current", "peak", "allocated", "freed"};
constexpr std::array<const char*, 6> counters = {"num_alloc_retries",    "num_ooms",         "num_sync_all_streams",
                                                 "num_device_alloc",     "num_device_free",  "max_split_size"};

std::array<StatArray*, 9> arrays_of(MemoryStats& s) {
  return {&s.allocation,     &s.segment,      &s.active,       &s.inactive_split,      &s.allocated_bytes,
          &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes};
}
std::array<std::int64_t*, 6> counters_of(MemoryStats& s) {
  return {&s.num_alloc_retries, &s.num_ooms,        &s.num_sync_all_streams,
          &s.num_device_alloc,  &s.num_device_free, &s.max_split_size};
}

/// Every field of every Stat and every counter a value of its own (no two alike, none zero).
MemoryStats distinct_values() {
  MemoryStats s;
  std::int64_t next = 1;
  for (StatArray* a : arrays_of(s)) {
    for (Stat& st : a->stats) st = {next, next + 1, next + 2, next + 3}, next += 4;
  }
  s.oversize_allocations = {next, next + 1, next + 2, next + 3};
  s.oversize_segments = {next + 4, next + 5, next + 6, next + 7};
  next += 8;
  for (std::int64_t* c : counters_of(s)) *c = next++;
  return s;
}

std::int64_t field_of(const Stat& s, std::size_t f) {
  const std::int64_t values[] = {s.current, s.peak, s.allocated, s.freed};
  return values[f];
}

}  // namespace

TEST_CASE("MemoryStats::flat(): torch's 122 keys, each with its own member's value") {
  MemoryStats s = distinct_values();
  const std::map<std::string, std::int64_t> flat = s.flat();
  std::map<std::string, std::int64_t> expected;
  const auto arrays = arrays_of(s);
  for (std::size_t a = 0; a < arrays.size(); ++a) {
    for (std::size_t p = 0; p < pools.size(); ++p) {
      for (std::size_t f = 0; f < fields.size(); ++f) {
        expected[std::string(array_stems[a]) + "." + pools[p] + "." + fields[f]] = field_of(arrays[a]->stats[p], f);
      }
    }
  }
  for (std::size_t f = 0; f < fields.size(); ++f) {
    expected[std::string("oversize_allocations.") + fields[f]] = field_of(s.oversize_allocations, f);
    expected[std::string("oversize_segments.") + fields[f]] = field_of(s.oversize_segments, f);
  }
  const auto counter_values = counters_of(s);
  for (std::size_t c = 0; c < counters.size(); ++c) expected[counters[c]] = *counter_values[c];
  CHECK(expected.size() == 122);
  CHECK(flat.size() == 122);
  for (const auto& entry : expected) {
    const std::string& key = entry.first;  // not a structured binding: clang 14's doctest macros cannot capture one
    const std::int64_t value = entry.second;
    const auto it = flat.find(key);
    REQUIRE_MESSAGE(it != flat.end(), "flat() lacks " << key);
    CHECK_MESSAGE(it->second == value, key << " = " << it->second << ", its member holds " << value);
  }
  CHECK(MemoryStats{}.flat().at("max_split_size") == -1);  // unlimited, as torch's SIZE_MAX cast reads
  CHECK(accel::to_string(StatType::all) == "all");
  CHECK(accel::to_string(StatType::small_pool) == "small_pool");
  CHECK(accel::to_string(StatType::large_pool) == "large_pool");
  // mem_get_info's pair compares both halves.
  CHECK(accel::MemoryInfo{1, 2} == accel::MemoryInfo{1, 2});
  CHECK(accel::MemoryInfo{1, 2} != accel::MemoryInfo{1, 3});
  CHECK(accel::MemoryInfo{0, 2} != accel::MemoryInfo{1, 2});
}

TEST_CASE("Stat and StatArray: current, peak, allocated and freed as torch's Stat keeps them") {
  Stat s;
  s.increase(5);
  s.increase(3);
  s.decrease(6);
  s.increase(2);
  CHECK(s == Stat{4, 8, 10, 6});
  s.increase(1);  // 5: below the peak of 8, which stays
  CHECK(s == Stat{5, 8, 11, 6});
  s.reset_peak();
  CHECK(s == Stat{5, 5, 11, 6});
  s.increase(1);  // a new peak one above the reset one
  CHECK(s.peak == 6);
  s.reset_accumulated();
  CHECK(s == Stat{6, 6, 0, 0});

  StatArray a;
  a.increase(StatType::small_pool, 3);
  a.increase(StatType::large_pool, 5);
  a.decrease(StatType::small_pool, 2);
  a.increase(StatType::small_pool, 1);
  CHECK(a.all() == Stat{7, 8, 9, 2});  // the aggregate's peak is the sum's (8), not a sum of peaks
  CHECK(a[StatType::small_pool] == Stat{2, 3, 4, 2});
  CHECK(a[StatType::large_pool] == Stat{5, 5, 5, 0});
  CHECK(&a[StatType::all] == &a.all());
  a.reset_peak();
  CHECK(a.all().peak == 7);
  CHECK(a[StatType::small_pool].peak == 2);
  a.reset_accumulated();
  CHECK(a.all() == Stat{7, 7, 0, 0});
  CHECK(a[StatType::large_pool] == Stat{5, 5, 0, 0});
}

TEST_CASE("MemoryStats: reset_peak and reset_accumulated touch what torch's resets touch, on every statistic") {
  const MemoryStats before = distinct_values();
  const auto before_flat = before.flat();
  const auto ends_with = [](const std::string& key, const std::string& tail) {
    return key.size() > tail.size() && key.compare(key.size() - tail.size(), tail.size(), tail) == 0;
  };
  const auto current_of = [&](const std::map<std::string, std::int64_t>& flat, const std::string& key,
                              const std::string& tail) {
    return flat.at(key.substr(0, key.size() - tail.size()) + ".current");
  };

  MemoryStats peaks = before;
  peaks.reset_peak();
  for (const auto& entry : peaks.flat()) {
    const std::string& key = entry.first;
    const std::int64_t value = entry.second;
    if (ends_with(key, ".peak")) {
      CHECK_MESSAGE(value == current_of(before_flat, key, ".peak"), key);
    } else {
      CHECK_MESSAGE(value == before_flat.at(key), key << " changed by reset_peak");
    }
  }

  MemoryStats accumulated = before;
  accumulated.reset_accumulated();
  for (const auto& entry : accumulated.flat()) {
    const std::string& key = entry.first;
    const std::int64_t value = entry.second;
    const bool zeroed = ends_with(key, ".allocated") || ends_with(key, ".freed") || key.rfind("num_", 0) == 0;
    CHECK_MESSAGE(value == (zeroed ? 0 : before_flat.at(key)), key);
  }
  CHECK(accumulated.max_split_size == before.max_split_size);  // a setting, not a counter
}

TEST_CASE("LiveStats: the allocator's live form gives, value for value, what MemoryStats gives after the same updates") {
  // A random run of every update the allocator makes, applied to both; compared after each.
  std::mt19937_64 rng(0x5EED'57A7);
  MemoryStats reference;
  accel::detail::LiveStats live;
  const std::int64_t max_split_size = 20 << 20;
  const auto pool_type = [](std::size_t p) { return p == 0 ? StatType::small_pool : StatType::large_pool; };
  const auto live_arrays = [&live] {
    return std::array<accel::detail::LiveStatArray*, 9>{
        &live.allocation,     &live.segment,      &live.active,       &live.inactive_split, &live.allocated_bytes,
        &live.reserved_bytes, &live.active_bytes, &live.inactive_split_bytes, &live.requested_bytes};
  };
  const auto live_counters = [&live] {
    return std::array<std::int64_t*, 5>{&live.num_alloc_retries, &live.num_ooms, &live.num_sync_all_streams,
                                        &live.num_device_alloc, &live.num_device_free};
  };
  std::size_t mismatches = 0, resets = 0, fused = 0;
  for (int step = 0; step < 20000; ++step) {
    const std::size_t a = rng() % 9;
    const std::size_t p = rng() % 2;
    StatArray& ref = *arrays_of(reference)[a];
    accel::detail::LiveStatArray& lv = *live_arrays()[a];
    const std::int64_t current = ref[pool_type(p)].current;
    const auto amount = static_cast<std::int64_t>(rng() % (1u << 20)) + 1;
    const auto down = current == 0 ? 0 : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(current)) + 1;
    switch (rng() % 12) {
      case 0: case 1: case 2:
        ref.increase(pool_type(p), amount);
        lv.increase(p, amount);
        break;
      case 3: case 4:
        ref.decrease(pool_type(p), down);
        lv.decrease(p, down);
        break;
      case 5:  // the block freed last handed out again: a decrease, then restore() of the same amount
        ref.decrease(pool_type(p), down);
        lv.decrease(p, down);
        ref.increase(pool_type(p), down);
        lv.restore(p, down);
        ++fused;
        break;
      case 6:
        ref.decrease(pool_type(p), down);
        ref.increase(pool_type(p), down);
        lv.decrease_then_increase(p, down);
        ++fused;
        break;
      case 7:
        ref.increase(pool_type(p), amount);
        ref.decrease(pool_type(p), amount);
        lv.increase_then_decrease(p, amount);
        ++fused;
        break;
      case 8:
        ref.decrease(pool_type(p), down);
        ref.increase(pool_type(p), amount);
        lv.decrease_then_increase(p, down, amount);
        ++fused;
        break;
      case 9: {
        Stat& ro = p == 0 ? reference.oversize_allocations : reference.oversize_segments;
        accel::detail::LiveStat& lo = p == 0 ? live.oversize_allocations : live.oversize_segments;
        if (rng() % 2 == 0 || ro.current == 0) {
          ro.increase(1);
          lo.increase(1);
        } else {
          ro.decrease(1);
          lo.decrease(1);
        }
        break;
      }
      case 10: {
        const std::size_t c = rng() % 5;
        ++*counters_of(reference)[c];
        ++*live_counters()[c];
        break;
      }
      default:
        ++resets;
        if (rng() % 2 == 0) {
          reference.reset_peak();
          live.reset_peak();
        } else {
          reference.reset_accumulated();
          live.reset_accumulated();
        }
    }
    reference.max_split_size = max_split_size;
    const MemoryStats got = live.snapshot(max_split_size);
    if (!(got == reference)) {
      if (++mismatches <= 3) {
        const auto want = reference.flat();
        for (const auto& entry : got.flat()) {
          const std::string& key = entry.first;
          const std::int64_t value = entry.second;
          if (want.at(key) != value) MESSAGE("step " << step << ": " << key << " = " << value << ", expected " << want.at(key));
        }
      }
    }
  }
  CHECK(mismatches == 0);
  CHECK(resets > 1000);  // every kind of update ran many times
  CHECK(fused > 4000);
  CHECK(reference.allocated_bytes.all().peak > 0);
}
