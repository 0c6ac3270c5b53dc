// accel/cpu/detail/adaptive_spin.hpp — how long one side of a CPU stream polls before it sleeps, learnt
// from the waits it has seen.
//
// A poll pays off when the wait ends within it: the wake-up it saves (6-45 us on an idle VM) costs the
// poll's CPU time. A wait longer than the whole budget — a host thread synchronizing on a training step
// of 18 ms, a worker whose next task comes 200 us later — pays the full poll and then sleeps anyway.
// So, as KVM's halt-polling does for a vCPU: after a wait that slept and lasted longer than the full
// budget (ACCEL_CPU_SPIN_US), the budget halves, down to none after six halvings; after a wait that
// slept but ended within the full budget (a poll would have saved its wake-up), the full budget is back
// at once. Waits that end while polling change nothing. A run of long waits then costs the CPU no poll,
// a run of short ones polls as before, and a short wait after long ones pays one wake-up.
//
// A wait's length is measured to the moment the awaited thing happened (stamped by the thread that
// wakes the sleeper), not to when the sleeper woke: counting the wake-up itself would make every short
// wait after a sleep look long and the budget would never come back.
// Internal to the CPU backend.
#pragma once

#include <atomic>
#include <cstdint>

namespace accel::cpu::detail {

class AdaptiveSpin {
 public:
  /// Halvings after which the budget is none.
  static constexpr int none = 6;

  /// The poll to make now, in nanoseconds: `full_ns` (the process's budget) halved once per long
  /// wait seen since the last short one; 0 after `none` of them.
  [[nodiscard]] std::int64_t budget_ns(std::int64_t full_ns) const noexcept {
    const int h = halvings_.load(std::memory_order_relaxed);
    return h >= none ? 0 : full_ns >> h;
  }

  /// After a wait that slept: it lasted `waited_ns`, from its start to the event that ended it.
  void slept(std::int64_t waited_ns, std::int64_t full_ns) noexcept {
    const int h = halvings_.load(std::memory_order_relaxed);
    if (waited_ns <= full_ns) {
      if (h != 0) halvings_.store(0, std::memory_order_relaxed);
    } else if (h < none) {
      halvings_.store(h + 1, std::memory_order_relaxed);
    }
  }

  /// Halvings in force (0: the full budget; `none`: no poll). Diagnostics and tests.
  [[nodiscard]] int halvings() const noexcept { return halvings_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int> halvings_{0};
};

}  // namespace accel::cpu::detail
