// accel/backend/event_base.hpp — accel::EventBase<Event, Streams>: what every backend's Event shares,
// one definition: its constructors (StreamApi: Event{}, Event{enable_timing}, Event(EventOptions)),
// its two flags, record() on the current stream and the waits.
//
// A backend's Event derives from EventBase<Event, Streams>, inherits the constructors
// (`using EventBase::EventBase;`) and the record overload (`using EventBase::record;`), and defines
// what differs: record(s), query(), synchronize(), elapsed_time(). Its native state lives in members
// that move themselves (RAII handles), so the Event's moves are the defaulted ones: a moved-from
// Event is never recorded and keeps its flags.
#pragma once

#include <accel/backend/detail/stream_ref_of.hpp>
#include <accel/core/event_options.hpp>

namespace accel {

template <class Event, class Streams>
class EventBase {
 public:
  /// An event without timing (the cheapest to record and wait on).
  EventBase() noexcept = default;
  /// An event that elapsed_time() accepts when `enable_timing` is true.
  explicit EventBase(bool enable_timing) noexcept : timing_(enable_timing) {}
  /// `Event({.enable_timing = true, .external = true})`: see accel/core/event_options.hpp.
  explicit EventBase(EventOptions options) noexcept : timing_(options.enable_timing), external_(options.external) {}

  [[nodiscard]] bool timing_enabled() const noexcept { return timing_; }
  /// True when a record during a graph capture is a step of the graph (EventOptions::external).
  [[nodiscard]] bool external() const noexcept { return external_; }

  /// Captures the work enqueued so far on the calling thread's current stream.
  void record() { self().record(Streams::current_stream()); }

  /// Makes later work on `stream` (default: the current stream) wait for this event.
  void wait(detail::stream_ref_of<Streams> stream) const { stream.wait(self()); }
  void wait() const { wait(Streams::current_stream()); }

 private:
  Event& self() noexcept { return static_cast<Event&>(*this); }
  const Event& self() const noexcept { return static_cast<const Event&>(*this); }

  bool timing_ = false;
  bool external_ = false;
};

}  // namespace accel
