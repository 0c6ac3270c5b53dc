// accel/cpu/detail/event_capture.hpp — what one Event::record captures.
//
// A capture is a StreamPoint (the stream and the count of tasks enqueued on it at record time) plus,
// for a timed event, the timestamp a marker task takes when the stream reaches it. Completion is the
// stream's own counter (query: one atomic load), so an event and its stream always agree. Untimed
// records enqueue nothing. A capture is reference counted — the Event and a pending marker hold it —
// so destroying an Event whose marker has not run yet is safe, and an Event re-recorded after its
// marker ran reuses its capture without allocating.
//
// During a graph capture (CUDA's semantics, accel/core/event_options.hpp):
//   - A record of an event that is not external is a *captured* record: it marks a point of the graph
//     and adds nothing to it. The capture remembers the graph capture (weakly) and the stream; a wait
//     on the same capturing stream is already in stream order (wait_for_event lets it pass), anything
//     else — query, synchronize, elapsed_time, a wait from another stream — is refused with an error
//     naming the call (refuse_captured_event, wait_for_event), which also invalidates the graph
//     capture while it is still in progress.
//   - An external event keeps its latest record in an EventSlot, shared with the graphs that recorded
//     it: each replay installs a fresh capture there (cpu/detail/graph_replay.hpp).
// Internal to the CPU backend.
#pragma once

#include <accel/core/error.hpp>
#include <accel/cpu/detail/graph_recording.hpp>
#include <accel/cpu/detail/steady_now.hpp>
#include <accel/cpu/detail/stream_state.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace accel::cpu::detail {

class EventCapture {
 public:
  static EventCapture* create() { return new EventCapture(); }

  void retain() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  /// True when the caller holds the only reference: no marker can touch it, so it can be recorded
  /// again without allocating.
  [[nodiscard]] bool exclusive() const noexcept { return refs_.load(std::memory_order_acquire) == 1; }

  /// The captured work; done() is one atomic load. Empty (done) for a captured record.
  StreamPoint point;

  /// Run by the marker task of a timed record, when the stream reaches it (or by the step of an
  /// external event record, when a replay reaches it).
  void stamp() noexcept { stamp_ns_ = steady_now_ns(); }
  /// Valid once point.done() returned true for a timed record (the stream's counter orders it).
  [[nodiscard]] std::int64_t stamp_ns() const noexcept { return stamp_ns_; }

  // ---- a record during a graph capture of an event that is not external ----------------------------

  /// Makes this a captured record: a point of `recording`, the capture in progress on stream `s`.
  void set_captured(const std::shared_ptr<GraphRecording>& recording, const StreamState& s) {
    std::string name = s.name();
    point = StreamPoint();
    captured_in_ = recording;
    captured_name_ = std::move(name);
    captured_stream_ = s.id();
    in_capture_ = true;
  }
  [[nodiscard]] bool in_capture() const noexcept { return in_capture_; }
  /// The graph capture this record belongs to while it is still in progress; null once it ended.
  [[nodiscard]] std::shared_ptr<GraphRecording> active_capture() const {
    std::shared_ptr<GraphRecording> recording = captured_in_.lock();
    if (recording && recording->ended()) recording.reset();
    return recording;
  }
  /// The id and the name of the stream that was capturing.
  [[nodiscard]] std::uint64_t captured_stream() const noexcept { return captured_stream_; }
  [[nodiscard]] const std::string& captured_name() const noexcept { return captured_name_; }

 private:
  EventCapture() = default;
  ~EventCapture() = default;

  std::atomic<std::uint32_t> refs_{1};
  std::int64_t stamp_ns_ = 0;
  bool in_capture_ = false;
  std::uint64_t captured_stream_ = 0;
  std::weak_ptr<GraphRecording> captured_in_;
  std::string captured_name_;
};

/// An owned reference to a capture, for the marker that carries one.
class CaptureRef {
 public:
  explicit CaptureRef(EventCapture* c) noexcept : c_(c) { c_->retain(); }
  CaptureRef(CaptureRef&& other) noexcept : c_(std::exchange(other.c_, nullptr)) {}
  CaptureRef& operator=(CaptureRef&&) = delete;
  CaptureRef(const CaptureRef&) = delete;
  CaptureRef& operator=(const CaptureRef&) = delete;
  ~CaptureRef() {
    if (c_ != nullptr) c_->release();
  }
  [[nodiscard]] EventCapture* get() const noexcept { return c_; }

 private:
  EventCapture* c_;
};

/// The task a timed Event::record enqueues: takes the timestamp when the stream reaches it.
struct EventMarker {
  CaptureRef capture;
  void operator()() const noexcept { capture.get()->stamp(); }
};

/// The latest record of an event: one reference to its capture, released when replaced or destroyed.
/// An Event keeps its own in one; an external event's is shared with every graph that recorded it
/// (GraphBody::event_records), so that a replay can record the event even after the Event object was
/// moved. Used by one thread at a time, like the Event: a replay of
/// a graph that records the event is a use of the event.
class EventSlot {
 public:
  EventSlot() noexcept = default;
  EventSlot(EventSlot&& other) noexcept : capture_(std::exchange(other.capture_, nullptr)) {}
  EventSlot& operator=(EventSlot&& other) noexcept {
    install(std::exchange(other.capture_, nullptr));  // a self-move empties, then takes back: no check
    return *this;
  }
  EventSlot(const EventSlot&) = delete;
  EventSlot& operator=(const EventSlot&) = delete;
  ~EventSlot() {
    if (capture_ != nullptr) capture_->release();
  }

  [[nodiscard]] EventCapture*& latest() noexcept { return capture_; }
  [[nodiscard]] const EventCapture* latest() const noexcept { return capture_; }
  /// Makes `c` the latest record, taking over one reference to it.
  void install(EventCapture* c) noexcept {
    if (capture_ != nullptr) capture_->release();
    capture_ = c;
  }

 private:
  EventCapture* capture_ = nullptr;
};

/// Throws InvalidStateError for `call` ("query", "synchronize", "elapsed_time") on a captured record,
/// and invalidates its graph capture when that is still in progress.
[[noreturn]] inline void refuse_captured_event(const EventCapture& c, const char* call) {
  const std::string message =
      std::string("cpu Event::") + call + " on an event recorded during a graph capture on " + c.captured_name() +
      ": a record during a capture marks a point of the graph, not work that runs (CUDA refuses it too: "
      "cudaErrorCapturedEvent); record the event outside the capture, or create it with "
      "EventOptions{.external = true} so that each replay records it";
  if (const std::shared_ptr<GraphRecording> recording = c.active_capture()) {
    recording->invalidate(message);
    throw InvalidStateError(message + "; the capture is invalidated");
  }
  throw InvalidStateError(message);
}

/// Makes later work on `s` wait for the record `c` (StreamRef::wait). A captured record is in stream
/// order already for its own capturing stream; any other wait on it is refused.
inline void wait_for_event(StreamState& s, const EventCapture& c) {
  if (!c.in_capture()) {
    c.point.refuse_unless_ran_before_fork("wait on an event", &s);
    s.wait_for(c.point);
    return;
  }
  const std::shared_ptr<GraphRecording> recording = c.active_capture();
  if (recording && s.id() == c.captured_stream()) return;  // an earlier point of the same capture
  if (recording) {
    if (const std::shared_ptr<GraphRecording> own = s.capture()) {  // CUDA: cudaErrorStreamCaptureIsolation
      const std::string message = s.name() + ": wait on an event recorded during the graph capture on " +
                                  c.captured_name() + " while " + s.name() +
                                  " captures another graph (two captures cannot be merged)";
      recording->invalidate(message);
      own->invalidate(message);
      throw InvalidStateError(message + "; both captures are invalidated");
    }
    const std::string message = s.name() + ": wait on an event recorded during the graph capture on " +
                                c.captured_name() + " (CUDA would join " + s.name() +
                                " into that capture; the CPU backend captures one stream per graph)";
    recording->invalidate(message);
    throw NotSupportedError(message + "; the capture is invalidated");
  }
  throw InvalidStateError(s.name() + ": wait on an event last recorded during a graph capture on " + c.captured_name() +
                          ", which has ended: the record marked a point of that graph, not work that runs (CUDA "
                          "refuses it too); record the event outside a capture, or create it with "
                          "EventOptions{.external = true} so that each replay records it");
}

}  // namespace accel::cpu::detail
