// accel/cpu/detail/steady_now.hpp — the CPU backend's monotonic clock, read without <chrono>.
// Internal to the CPU backend.
#pragma once

#include <cstdint>

#include <time.h>

namespace accel::cpu::detail {

/// Steady-clock nanoseconds, the time base of event timestamps and of waits' spin deadlines:
/// CLOCK_MONOTONIC, the clock behind libstdc++'s std::chrono::steady_clock (called directly: g++ 12's
/// <chrono> brings <sstream> and the locales, a tenth of what including the backend costs).
[[nodiscard]] inline std::int64_t steady_now_ns() noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

}  // namespace accel::cpu::detail
