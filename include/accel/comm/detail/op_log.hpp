// accel/comm/detail/op_log.hpp — ACCEL_COMM_LOG: a per-operation summary printed at exit, as
// DeepSpeed's comms logger prints (but in nccl-tests' units: algbw = S / t and busbw in GB/s, where
// DeepSpeed prints Gbps and an all_reduce "tput" of 2S / t).
//
// Each operation that ran adds its latency (start to completion on its engine) under (engine, op,
// bytes). The process-wide table is created on first use and never destroyed.
#pragma once

#include <accel/comm/detail/op.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace accel::comm::detail {

class OpLog {
 public:
  struct Stats {
    std::uint64_t count = 0;
    double total_s = 0, min_s = 0, max_s = 0;
    double busbw_factor = 0;
  };

  [[nodiscard]] bool enabled() const noexcept { return enabled_.load(std::memory_order_relaxed); }
  void enable() noexcept { enabled_.store(true, std::memory_order_relaxed); }
  void disable() noexcept { enabled_.store(false, std::memory_order_relaxed); }

  void record(const char* engine, const Op& op, int size, double seconds) {
    const auto bytes = static_cast<std::uint64_t>(algbw_bytes(op, size));
    const std::lock_guard<std::mutex> lock(mutex_);
    Stats& s = table_[{engine, static_cast<int>(op.kind), bytes}];
    s.min_s = s.count == 0 ? seconds : std::min(s.min_s, seconds);
    s.max_s = std::max(s.max_s, seconds);
    s.total_s += seconds;
    ++s.count;
    s.busbw_factor = busbw_factor(op.kind, size);
  }

  /// The table as text (empty when nothing was recorded).
  [[nodiscard]] std::string format(const std::string& header) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (table_.empty()) return {};
    std::string out = header + "\n";
    char line[256];
    std::snprintf(line, sizeof line, "  %-6s %-15s %12s %8s %11s %11s %11s %11s %10s %10s\n", "engine", "op", "bytes",
                  "count", "total ms", "avg us", "min us", "max us", "algbw GB/s", "busbw GB/s");
    out += line;
    for (const auto& [key, s] : table_) {
      const auto& [engine, kind, bytes] = key;
      const double avg = s.total_s / static_cast<double>(s.count);
      const double algbw = avg > 0 ? static_cast<double>(bytes) / avg / 1e9 : 0;
      std::snprintf(line, sizeof line, "  %-6s %-15s %12llu %8llu %11.3f %11.2f %11.2f %11.2f %10.3f %10.3f\n",
                    engine.c_str(), std::string(name(static_cast<OpKind>(kind))).c_str(),
                    static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(s.count), s.total_s * 1e3,
                    avg * 1e6, s.min_s * 1e6, s.max_s * 1e6, algbw, algbw * s.busbw_factor);
      out += line;
    }
    return out;
  }

  void clear() {
    const std::lock_guard<std::mutex> lock(mutex_);
    table_.clear();
  }

 private:
  std::atomic<bool> enabled_{false};
  mutable std::mutex mutex_;
  std::map<std::tuple<std::string, int, std::uint64_t>, Stats> table_;
};

/// Created on first use, never destroyed (operations may finish during static destruction).
inline OpLog& op_log() {
  static OpLog* const log = new OpLog();
  return *log;
}

}  // namespace accel::comm::detail
