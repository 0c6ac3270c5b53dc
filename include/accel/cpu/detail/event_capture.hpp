// accel/cpu/detail/event_capture.hpp — what one Event::record captures.
//
// A capture is a stream_point (the stream and the count of tasks enqueued on it at record time) plus,
// for a timed event, the timestamp a marker task takes when the stream reaches it. Completion is the
// stream's own counter (query: one atomic load), so an event and its stream always agree. Untimed
// records enqueue nothing. A capture is reference counted — the Event and a pending marker hold it —
// so destroying an Event whose marker has not run yet is safe, and an Event re-recorded after its
// marker ran reuses its capture without allocating. Internal to the CPU backend.
#pragma once

#include <accel/cpu/detail/stream_state.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <utility>

namespace accel::cpu::detail {

/// Steady-clock nanoseconds, the time base of event timestamps.
[[nodiscard]] inline std::int64_t steady_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class event_capture {
 public:
  static event_capture* create() { return new event_capture(); }

  void retain() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  /// True when the caller holds the only reference: no marker can touch it, so it can be recorded
  /// again without allocating.
  [[nodiscard]] bool exclusive() const noexcept { return refs_.load(std::memory_order_acquire) == 1; }

  /// The captured work; done() is one atomic load.
  stream_point point;

  /// Run by the marker task of a timed record, when the stream reaches it.
  void stamp() noexcept { stamp_ns_ = steady_now_ns(); }
  /// Valid once point.done() returned true for a timed record (the stream's counter orders it).
  [[nodiscard]] std::int64_t stamp_ns() const noexcept { return stamp_ns_; }

 private:
  event_capture() = default;
  ~event_capture() = default;

  std::atomic<std::uint32_t> refs_{1};
  std::int64_t stamp_ns_ = 0;
};

/// An owned reference to a capture, for the marker that carries one.
class capture_ref {
 public:
  explicit capture_ref(event_capture* c) noexcept : c_(c) { c_->retain(); }
  capture_ref(capture_ref&& other) noexcept : c_(std::exchange(other.c_, nullptr)) {}
  capture_ref& operator=(capture_ref&&) = delete;
  capture_ref(const capture_ref&) = delete;
  capture_ref& operator=(const capture_ref&) = delete;
  ~capture_ref() {
    if (c_ != nullptr) c_->release();
  }
  [[nodiscard]] event_capture* get() const noexcept { return c_; }

 private:
  event_capture* c_;
};

/// The task a timed Event::record enqueues: takes the timestamp when the stream reaches it.
struct event_marker {
  capture_ref capture;
  void operator()() const noexcept { capture.get()->stamp(); }
};

}  // namespace accel::cpu::detail
