// Invariants of the caching allocator's statistics, checked in any snapshot, and a monitor thread
// that samples cpu:0's statistics while a stress case runs.
#pragma once

#include <accel/cpu/memory.hpp>
#include <accel/core/memory_stats.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace accel_test {

using accel::cpu::Memory;

// Every Stat of a snapshot of the statistics, by torch's key prefix ("allocated_bytes.all").
template <class F>
inline void for_each_stat(const accel::MemoryStats& s, F&& f) {
  const std::pair<const char*, const accel::StatArray*> arrays[] = {
      {"allocation", &s.allocation},         {"segment", &s.segment},
      {"active", &s.active},                 {"inactive_split", &s.inactive_split},
      {"allocated_bytes", &s.allocated_bytes}, {"reserved_bytes", &s.reserved_bytes},
      {"active_bytes", &s.active_bytes},     {"inactive_split_bytes", &s.inactive_split_bytes},
      {"requested_bytes", &s.requested_bytes}};
  for (const auto& [name, array] : arrays) {
    for (std::size_t t = 0; t < accel::stat_type_count; ++t) {
      const auto type = static_cast<accel::StatType>(t);
      f(std::string(name) + "." + std::string(accel::to_string(type)), (*array)[type]);
    }
  }
  f(std::string("oversize_allocations"), s.oversize_allocations);
  f(std::string("oversize_segments"), s.oversize_segments);
}

// What must hold in any snapshot of the statistics, at any moment (the lock makes each consistent):
// currents are non-negative and never above their peaks, current == allocated - freed (nothing
// resets the accumulated counts during a run), and all == small_pool + large_pool. Returns the
// first violation, or "".
inline std::string check_invariants(const accel::MemoryStats& s) {
  std::string broken;
  for_each_stat(s, [&](const std::string& name, const accel::Stat& st) {
    if (!broken.empty()) return;
    if (st.current < 0) broken = name + ".current < 0";
    if (st.peak < st.current) broken = name + ".peak < current";
    if (st.allocated - st.freed != st.current) broken = name + ": allocated - freed != current";
  });
  const std::pair<const char*, const accel::StatArray*> arrays[] = {
      {"allocation", &s.allocation}, {"segment", &s.segment}, {"allocated_bytes", &s.allocated_bytes},
      {"reserved_bytes", &s.reserved_bytes}, {"active_bytes", &s.active_bytes}};
  for (const auto& [name, a] : arrays) {
    using accel::StatType;
    if (broken.empty() && (*a)[StatType::all].current != (*a)[StatType::small_pool].current + (*a)[StatType::large_pool].current) {
      broken = std::string(name) + ": all != small_pool + large_pool";
    }
  }
  if (broken.empty() && s.allocated_bytes.all().current > s.reserved_bytes.all().current) broken = "allocated > reserved";
  if (broken.empty() && s.allocated_bytes.all().current > s.active_bytes.all().current) broken = "allocated > active";
  return broken;
}

// Peaks only grow between resets: every peak of `now` is >= the same peak of `before`.
inline std::string check_monotone(const accel::MemoryStats& before, const accel::MemoryStats& now) {
  std::vector<std::int64_t> peaks;
  for_each_stat(before, [&](const std::string&, const accel::Stat& st) { peaks.push_back(st.peak); });
  std::string broken;
  std::size_t i = 0;
  for_each_stat(now, [&](const std::string& name, const accel::Stat& st) {
    if (broken.empty() && st.peak < peaks[i]) broken = name + ".peak decreased";
    ++i;
  });
  return broken;
}

// Samples the statistics of cpu:0 every millisecond while a stress case runs, checking the
// invariants of each sample and that peaks are monotone from one sample to the next.
class StatsMonitor {
 public:
  StatsMonitor()
      : thread_([this] {
          accel::MemoryStats previous = Memory::memory_stats(0);
          while (!stop_.load(std::memory_order_acquire)) {
            const accel::MemoryStats now = Memory::memory_stats(0);
            std::string broken = check_invariants(now);
            if (broken.empty()) broken = check_monotone(previous, now);
            if (!broken.empty()) {
              std::lock_guard lock(mutex_);
              if (first_violation_.empty()) first_violation_ = broken;
            }
            previous = now;
            ++samples_;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }) {}
  StatsMonitor(const StatsMonitor&) = delete;
  StatsMonitor& operator=(const StatsMonitor&) = delete;
  ~StatsMonitor() { stop(); }

  void stop() {
    stop_.store(true, std::memory_order_release);
    if (thread_.joinable()) thread_.join();
  }
  [[nodiscard]] std::uint64_t samples() const { return samples_.load(); }
  [[nodiscard]] std::string violation() {
    std::lock_guard lock(mutex_);
    return first_violation_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> samples_{0};
  std::mutex mutex_;
  std::string first_violation_;
  std::thread thread_;
};

}  // namespace accel_test
