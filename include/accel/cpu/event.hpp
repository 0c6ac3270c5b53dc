// accel/cpu/event.hpp — the CPU backend's events: markers in a stream that order and time work.
//
// `e.record(s)` captures everything enqueued on s so far; the event completes when s has run it. A
// timed event (`Event{true}`) enqueues a marker that takes a steady-clock (CLOCK_MONOTONIC) timestamp when
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
// Recording on a stream that captures a graph does what cudaEventRecord does (accel/core/
// event_options.hpp):
//   Event{} / Event{true}        a captured record: it marks a point of the graph and adds nothing to
//                                it. The capturing stream may wait on it (it is in stream order already);
//                                query(), synchronize(), elapsed_time() and a wait from another stream
//                                throw, naming the call, until the event is recorded outside a capture
//                                (an InvalidStateError, or NotSupportedError for the wait from another
//                                stream, which CUDA would turn into a second captured stream); while the
//                                capture is in progress, the call also invalidates it.
//   Event({.external = true})    the record is a step of the graph: every replay records the event at
//                                that point of the replayed work. The event is recorded when the replay
//                                is enqueued, completes with the replay (a CPU replay is one stream
//                                task, so not before the rest of it), and a timed one is stamped when
//                                the replay reaches the step, so elapsed_time() between two such events
//                                measures the work between them. Until the first replay the event keeps
//                                its previous record. A replay recorded into another capture may not
//                                record events (NotSupportedError).
//
// In a child process after fork(), an event recorded on a stream inherited from the parent answers
// query(), synchronize(), elapsed_time() and waits only when the work it captured had run at the fork;
// otherwise they throw InvalidStateError (that work runs only in the parent; cpu/stream.hpp).
//
// An Event is used by one thread at a time (record and query on one Event from two threads at once
// race, as with any object; replaying a graph that records an external event is a use of that event);
// the streams it is recorded on may run anywhere. Destroying an Event whose marker has not run yet is
// safe, and so is destroying an external event that a graph still records (the replays then record
// nothing anyone sees). Re-recording reuses the event's capture, unless a timed marker of the previous
// record is still queued (then it allocates a new one).
#pragma once

#include <accel/backend/event_base.hpp>
#include <accel/concepts/stream.hpp>
#include <accel/core/error.hpp>
#include <accel/core/event_options.hpp>
#include <accel/cpu/detail/event_capture.hpp>
#include <accel/cpu/detail/graph_recording.hpp>
#include <accel/cpu/detail/graph_replay.hpp>
#include <accel/cpu/detail/stream_state.hpp>
#include <accel/cpu/stream.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace accel::cpu {

/// A marker in a CPU stream; move-only. Constructors, flags, record() and the waits: EventBase.
class Event : public EventBase<Event, Streams> {
 public:
  using EventBase::EventBase;
  using EventBase::record;

  /// Captures the work enqueued so far on `stream`. Untimed: enqueues nothing (the capture is the
  /// stream's task count). Timed: enqueues a marker that takes the timestamp. On a stream that captures
  /// a graph: a captured record, or for an external event a step of the graph (see above).
  void record(StreamRef stream) {
    detail::StreamState& s = stream.state("Event::record");
    if (s.is_capturing()) {
      if (const std::shared_ptr<detail::GraphRecording> recording = s.capture()) {
        if (external()) {
          record_into_graph(s, *recording);
        } else {
          record_captured(s, recording);
        }
        return;
      }
    }
    detail::EventCapture*& latest = latest_record();
    // Reused when nothing else refers to it (no marker queued) and it holds no captured record; else a
    // fresh one. The previous record is dropped only once this one is enqueued: a record the stream
    // refuses (inherited across fork(), out of memory) leaves the event as it was.
    const bool reuse = latest != nullptr && latest->exclusive() && !latest->in_capture();
    detail::EventCapture* target = reuse ? latest : detail::EventCapture::create();
    try {
      const std::uint64_t ticket =
          timing_enabled() ? s.submit(detail::StreamTask(detail::EventMarker{detail::CaptureRef(target)})) : s.submitted();
      target->point = detail::StreamPoint(s, ticket);
    } catch (...) {
      if (!reuse) target->release();
      throw;
    }
    if (!reuse) {
      if (latest != nullptr) latest->release();
      latest = target;
    }
  }

  /// True when the latest recorded work has completed, or when the event was never recorded.
  /// InvalidStateError for a record made during a graph capture (unless the event is external).
  [[nodiscard]] bool query() const {
    const detail::EventCapture* c = current();
    if (c == nullptr) return true;
    if (c->in_capture()) detail::refuse_captured_event(*c, "query");
    return c->point.done_checked("cpu Event::query()");
  }

  /// Blocks (a short spin, then a condition variable) until the latest recorded work has completed;
  /// returns at once if never recorded. Throws InvalidStateError when called from a task of the
  /// stream the event waits for (it could never return), and for a record made during a graph capture
  /// (unless the event is external).
  void synchronize() const {
    const detail::EventCapture* c = current();
    if (c == nullptr) return;
    if (c->in_capture()) detail::refuse_captured_event(*c, "synchronize");
    c->point.refuse_unless_ran_before_fork("cpu Event::synchronize()");
    c->point.wait();
  }

  /// Milliseconds from this event's marker to `end`'s (negative if `end` ran first).
  [[nodiscard]] float elapsed_time(const Event& end) const {
    check_timed("start", *this);
    check_timed("end", end);
    const auto ns = end.current()->stamp_ns() - current()->stamp_ns();
    return static_cast<float>(static_cast<double>(ns) / 1.0e6);
  }

  /// True once the event was recorded (for an external event recorded only into a graph: once a
  /// replay of that graph was enqueued).
  [[nodiscard]] bool recorded() const noexcept { return current() != nullptr; }

 private:
  friend class StreamRef;
  friend struct HostMemory;
  friend struct PinnedHostMemory;

  // For the caching allocator's record_stream events: like query() and synchronize(), but in a
  // child process work of a stream inherited across fork() counts as done (it never touches the
  // child's copy of the memory), so the allocator may reuse the block instead of failing.
  [[nodiscard]] bool done_or_lost_in_fork() const {
    const detail::EventCapture* c = current();
    if (c == nullptr) return true;
    if (c->in_capture()) detail::refuse_captured_event(*c, "query");
    return c->point.done_or_lost_in_fork();
  }
  void wait_done_or_lost_in_fork() const {
    const detail::EventCapture* c = current();
    if (c == nullptr) return;
    if (c->in_capture()) detail::refuse_captured_event(*c, "synchronize");
    c->point.wait();
  }

  /// The latest record, null when never recorded.
  [[nodiscard]] const detail::EventCapture* current() const noexcept {
    if (!external()) return own_.latest();
    return slot_ ? slot_->latest() : nullptr;
  }
  /// Where the latest record is kept: in the Event, or for an external event in its slot.
  detail::EventCapture*& latest_record() {
    if (!external()) return own_.latest();
    if (!slot_) slot_ = std::make_shared<detail::EventSlot>();
    return slot_->latest();
  }

  // A record of an external event on a capturing stream: the graph records the event at each replay.
  void record_into_graph(detail::StreamState& s, detail::GraphRecording& recording) {
    if (!slot_) slot_ = std::make_shared<detail::EventSlot>();
    const std::size_t index = recording.add_event_record(slot_);
    s.submit(detail::StreamTask(detail::GraphEventRecord{index}));
  }

  // A record of an event that is not external on a capturing stream: a point of the capture.
  void record_captured(detail::StreamState& s, const std::shared_ptr<detail::GraphRecording>& recording) {
    detail::EventCapture*& capture = own_.latest();
    if (capture == nullptr || !capture->exclusive()) own_.install(detail::EventCapture::create());
    capture->set_captured(recording, s);
  }

  static void check_timed(const char* role, const Event& e) {
    const std::string which = std::string("cpu Event::elapsed_time: the ") + role + " event ";
    if (!e.timing_enabled()) throw InvalidStateError(which + "was created without timing (use Event{true})");
    const detail::EventCapture* c = e.current();
    if (c == nullptr) throw InvalidStateError(which + "was never recorded");
    if (c->in_capture()) detail::refuse_captured_event(*c, "elapsed_time");
    if (!c->point.done_checked("cpu Event::elapsed_time()")) {
      throw InvalidStateError(which + "has not completed yet (synchronize() it first)");
    }
  }

  detail::EventSlot own_;                    // the latest record (an event that is not external)
  std::shared_ptr<detail::EventSlot> slot_;  // the latest record of an external event, shared with graphs
};

}  // namespace accel::cpu
