// accel/cpu/event.hpp — the CPU backend's events: markers in a stream that order and time work.
//
// `e.record(s)` captures everything enqueued on s so far; the event completes when s has run it. A
// timed event (`Event{true}`) enqueues a marker that takes a std::chrono::steady_clock timestamp when
// the stream reaches it — not at record time. On a device's default stream (which runs tasks inline)
// the capture is complete at once. Recording again starts a new capture; query() and synchronize()
// see the latest one, while waits enqueued earlier keep the capture they saw.
//
//   e.query()          one atomic load; true when the latest capture completed, or never recorded
//   e.synchronize()    blocks (a short spin, then a condition variable) until it completed
//   s.wait(e)          tasks enqueued on s afterwards wait for the capture (StreamRef::wait)
//   e.elapsed_time(f)  milliseconds from e's marker to f's; InvalidStateError unless both are timed,
//                      recorded and completed
//
// An Event is used by one thread at a time (record and query on one Event from two threads at once
// race, as with any object); the streams it is recorded on may run anywhere. Destroying an Event whose
// marker has not run yet is safe. Re-recording reuses the event's capture, unless a timed marker
// of the previous record is still queued (then it allocates a new one).
#pragma once

#include <accel/concepts/stream.hpp>
#include <accel/core/error.hpp>
#include <accel/cpu/detail/event_capture.hpp>
#include <accel/cpu/detail/stream_state.hpp>
#include <accel/cpu/stream.hpp>

#include <cstdint>
#include <string>
#include <utility>

namespace accel::cpu {

/// A marker in a CPU stream; move-only.
class Event {
 public:
  /// An event without timing (cheapest: no timestamp is taken).
  Event() noexcept = default;
  /// An event that elapsed_time() accepts when `enable_timing` is true.
  explicit Event(bool enable_timing) noexcept : timing_(enable_timing) {}

  Event(Event&& other) noexcept : capture_(std::exchange(other.capture_, nullptr)), timing_(other.timing_) {}
  Event& operator=(Event&& other) noexcept {
    if (this != &other) {
      drop();
      capture_ = std::exchange(other.capture_, nullptr);
      timing_ = other.timing_;
    }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { drop(); }

  /// Captures the work enqueued so far on the calling thread's current stream.
  void record() { record(Streams::current_stream()); }

  /// Captures the work enqueued so far on `stream`. Untimed: enqueues nothing (the capture is the
  /// stream's task count). Timed: enqueues a marker that takes the timestamp.
  void record(StreamRef stream) {
    detail::stream_state& s = stream.state("Event::record");
    if (s.is_capturing()) {
      throw NotSupportedError(s.name() + ": Event::record on a stream that is capturing a graph (the CPU backend "
                              "records no event nodes; record the event before or after the capture)");
    }
    if (capture_ == nullptr || !capture_->exclusive()) {  // else: nothing else refers to it, reuse it
      detail::event_capture* fresh = detail::event_capture::create();  // first record, or a marker queued
      drop();
      capture_ = fresh;
    }
    try {
      const std::uint64_t ticket =
          timing_ ? s.submit(detail::stream_task(detail::event_marker{detail::capture_ref(capture_)})) : s.submitted();
      capture_->point = detail::stream_point(s, ticket);
    } catch (...) {
      std::exchange(capture_, nullptr)->release();  // not recorded after all
      throw;
    }
  }

  /// True when the latest recorded work has completed, or when the event was never recorded.
  [[nodiscard]] bool query() const noexcept { return capture_ == nullptr || capture_->point.done(); }

  /// Blocks (a short spin, then a condition variable) until the latest recorded work has completed;
  /// returns at once if never recorded. Throws InvalidStateError when called from a task of the
  /// stream the event waits for (it could never return).
  void synchronize() const {
    if (capture_ != nullptr) capture_->point.wait();
  }

  /// Makes later work on `stream` (default: the current stream) wait for this event.
  void wait(StreamRef stream) const { stream.wait(*this); }
  void wait() const { wait(Streams::current_stream()); }

  /// Milliseconds from this event's marker to `end`'s (negative if `end` ran first).
  [[nodiscard]] float elapsed_time(const Event& end) const {
    check_timed("start", *this);
    check_timed("end", end);
    const auto ns = end.capture_->stamp_ns() - capture_->stamp_ns();
    return static_cast<float>(static_cast<double>(ns) / 1.0e6);
  }

  [[nodiscard]] bool timing_enabled() const noexcept { return timing_; }
  /// True once record() was called.
  [[nodiscard]] bool recorded() const noexcept { return capture_ != nullptr; }

 private:
  friend class StreamRef;

  static void check_timed(const char* role, const Event& e) {
    const std::string which = std::string("cpu Event::elapsed_time: the ") + role + " event ";
    if (!e.timing_) throw InvalidStateError(which + "was created without timing (use Event{true})");
    if (e.capture_ == nullptr) throw InvalidStateError(which + "was never recorded");
    if (!e.capture_->point.done()) {
      throw InvalidStateError(which + "has not completed yet (synchronize() it first)");
    }
  }

  void drop() noexcept {
    if (capture_ != nullptr) std::exchange(capture_, nullptr)->release();
  }

  detail::event_capture* capture_ = nullptr;  // the latest record
  bool timing_ = false;
};

}  // namespace accel::cpu
