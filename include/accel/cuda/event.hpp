// accel/cuda/event.hpp — the CUDA backend's events: markers in a stream that order and time work.
//
// `Event e{true}; e.record(s);` is cudaEventRecord on s. The cudaEvent_t is created at the first
// record, on the recording stream's device (so constructing an Event needs no device or context),
// with cudaEventDisableTiming unless timing was asked for. Recording again moves the marker; waits
// enqueued earlier keep the capture they saw (CUDA semantics).
//
//   e.query()          cudaEventQuery: true when the recorded work completed, or never recorded
//   e.synchronize()    cudaEventSynchronize (returns at once if never recorded)
//   s.wait(e)          cudaStreamWaitEvent (StreamRef::wait); a never-recorded event imposes nothing
//   e.elapsed_time(f)  milliseconds from e to f (cudaEventElapsedTime); InvalidStateError unless both
//                      are timed, recorded and completed
//
// Recording on a stream that captures a graph does what cudaEventRecord does there, and what the CPU
// backend does (accel/core/event_options.hpp):
//   Event{} / Event{true}        a captured record: a point of the capture, no node of the graph. The
//                                capturing stream may wait on it; query(), synchronize(), elapsed_time()
//                                throw InvalidStateError naming the call (CUDA's cudaErrorCapturedEvent,
//                                said plainly), and invalidate the capture while it is in progress; a
//                                wait after the capture ended throws too. Recording it again outside a
//                                capture makes it an ordinary event.
//   Event({.external = true})    cudaEventRecordWithFlags(cudaEventRecordExternal): the record is an
//                                event-record node of the graph, so every replay records the event at
//                                that point; query / synchronize / wait / elapsed_time after a replay
//                                observe that replay. Until the first replay it keeps its previous record.
//
// An Event is used by one thread at a time; it is recorded on streams of one device only.
#pragma once

#include <accel/backend/event_base.hpp>
#include <accel/concepts/stream.hpp>
#include <accel/core/error.hpp>
#include <accel/core/event_options.hpp>
#include <accel/core/source_location.hpp>
#include <accel/cuda/detail/capture_registry.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/device.hpp>
#include <accel/cuda/error.hpp>
#include <accel/cuda/stream.hpp>

#include <memory>
#include <string>
#include <utility>

namespace accel::cuda {

/// A marker in a CUDA stream; move-only. Constructors, flags, record() and the waits: EventBase; the
/// cudaEvent_t is destroyed with the Event (never throws; destroying an event whose work is pending is
/// safe: CUDA releases it later).
class Event : public EventBase<Event, Streams> {
 public:
  using EventBase::EventBase;
  using EventBase::record;

  /// Captures the work enqueued so far on `stream`; on a capturing stream, a point of the capture or
  /// (external event) a node of the graph.
  void record(StreamRef stream) {
    stream.check_valid("Event::record");
    if (event_.get() != nullptr && device_ != stream.device_) {
      throw InvalidArgumentError("cuda Event::record: the event belongs to cuda:" + std::to_string(device_) +
                                 " and cannot be recorded on " + stream.name());
    }
    const bool default_stream = stream.handle_ == nullptr || stream.handle_ == cudaStreamPerThread;
    if (event_.get() == nullptr || default_stream) {
      Devices::DeviceGuard guard(stream.device_);
      create_on(stream.device_);
      record_on(stream);
    } else {
      record_on(stream);
    }
  }

  /// True when the recorded work has completed, or when the event was never recorded. Never blocks.
  /// InvalidStateError for a record made during a graph capture (unless the event is external).
  [[nodiscard]] bool query() const {
    if (event_.get() == nullptr) return true;
    if (captured_) [[unlikely]] refuse_captured("query");
    const cudaError_t status = cudaEventQuery(event_.get());
    if (status == cudaSuccess) return true;
    if (status != cudaErrorNotReady) detail::throw_error(status, "cudaEventQuery(event)", source_location::current());
    (void)cudaGetLastError();
    return false;
  }

  /// Blocks until the recorded work has completed (returns at once if never recorded).
  /// InvalidStateError for a record made during a graph capture (unless the event is external).
  void synchronize() const {
    if (event_.get() == nullptr) return;
    if (captured_) [[unlikely]] refuse_captured("synchronize");
    ACCEL_CUDA_CHECK(cudaEventSynchronize(event_.get()));
  }

  /// Milliseconds from this event to `end` (negative if `end` completed first). InvalidStateError unless
  /// both are timed, recorded and completed.
  [[nodiscard]] float elapsed_time(const Event& end) const {
    if (captured_) [[unlikely]] refuse_captured("elapsed_time");
    if (end.captured_) [[unlikely]] end.refuse_captured("elapsed_time");
    check_timed("start", *this);
    check_timed("end", end);
    if (device_ != end.device_) {
      throw InvalidArgumentError("cuda Event::elapsed_time: the events were recorded on cuda:" +
                                 std::to_string(device_) + " and cuda:" + std::to_string(end.device_));
    }
    float ms = 0.0F;
    const cudaError_t status = cudaEventElapsedTime(&ms, event_.get(), end.event_.get());
    if (status == cudaErrorNotReady) [[unlikely]] {
      (void)cudaGetLastError();  // not sticky: clear it, as query() does
      throw InvalidStateError(std::string("cuda Event::elapsed_time: the ") + (query() ? "end" : "start") +
                              " event has not completed yet (synchronize() it first)");
    }
    if (status != cudaSuccess) detail::throw_error(status, "cudaEventElapsedTime(start, end)", source_location::current());
    return ms;
  }

  /// True once record() was called.
  [[nodiscard]] bool recorded() const noexcept { return event_.get() != nullptr; }
  /// The native event (nullptr until the first record).
  [[nodiscard]] cudaEvent_t get() const noexcept { return event_.get(); }
  /// The device the event was recorded on (-1 until the first record).
  [[nodiscard]] int device_index() const noexcept { return device_; }

 private:
  friend class StreamRef;

  // A record made on a capturing stream by an event that is not external: which capture, and the
  // stream's name for messages. On the heap: the rare case, and it keeps Event small.
  struct CapturedRecord {
    std::weak_ptr<detail::CaptureRecord> capture;
    std::string stream_name;
  };

  void record_on(StreamRef stream) {
    if (external()) {
      ACCEL_CUDA_CHECK(cudaEventRecordWithFlags(event_.get(), stream.handle_, cudaEventRecordExternal));
      return;
    }
    // One atomic load when no capture is in progress. Captures made with the raw API are not known
    // here; CUDA refuses those records itself (cudaErrorCapturedEvent).
    std::shared_ptr<detail::CaptureRecord> capture = detail::captures().find(stream.id_);
    ACCEL_CUDA_CHECK(cudaEventRecord(event_.get(), stream.handle_));
    if (capture) [[unlikely]] {
      captured_ = std::make_unique<CapturedRecord>(CapturedRecord{capture, stream.name()});
    } else if (captured_) [[unlikely]] {
      captured_.reset();
    }
  }

  // The capture a captured record belongs to, while it is still in progress.
  [[nodiscard]] std::shared_ptr<detail::CaptureRecord> active_capture() const {
    std::shared_ptr<detail::CaptureRecord> capture = captured_->capture.lock();
    if (capture && detail::captures().find(capture->stream_id()) == capture) return capture;
    return nullptr;
  }

  [[nodiscard]] std::string captured_message(const char* call) const {
    return std::string("cuda Event::") + call + " on an event recorded during a graph capture on " +
           captured_->stream_name +
           ": a record during a capture marks a point of the graph, not work that runs (CUDA: "
           "cudaErrorCapturedEvent); record the event outside the capture, or create it with "
           "EventOptions{.external = true} so that each replay records it";
  }

  // query / synchronize / elapsed_time of a captured record; invalidates the capture in progress.
  [[noreturn]] void refuse_captured(const char* call) const {
    const std::string message = captured_message(call);
    if (const auto capture = active_capture()) {
      capture->invalidate(message);
      throw InvalidStateError(message + "; the capture is invalidated");
    }
    throw InvalidStateError(message);
  }

  // StreamRef::wait on a captured record: legal while its capture is in progress (the capturing
  // stream is in stream order already; CUDA joins another stream into the capture); refused after.
  void check_waitable() const {
    if (!captured_) [[likely]] return;
    if (active_capture()) return;
    throw InvalidStateError(captured_message("wait") + " (that capture has ended)");
  }

  void create_on(int device) {
    if (event_.get() != nullptr) return;
    cudaEvent_t event = nullptr;
    ACCEL_CUDA_CHECK(cudaEventCreateWithFlags(&event, timing_enabled() ? cudaEventDefault : cudaEventDisableTiming));
    event_.adopt(event);
    device_ = device;
  }

  static void check_timed(const char* role, const Event& e) {
    const std::string which = std::string("cuda Event::elapsed_time: the ") + role + " event ";
    if (!e.timing_enabled()) throw InvalidStateError(which + "was created without timing (use Event{true})");
    if (e.event_.get() == nullptr) throw InvalidStateError(which + "was never recorded");
    if (!e.query()) throw InvalidStateError(which + "has not completed yet (synchronize() it first)");
  }

  // The cudaEvent_t (null until the first record), destroyed with its owner; moves take it.
  class NativeEvent {
   public:
    NativeEvent() noexcept = default;
    NativeEvent(NativeEvent&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    NativeEvent& operator=(NativeEvent&& other) noexcept {
      if (this != &other) {
        destroy();
        handle_ = std::exchange(other.handle_, nullptr);
      }
      return *this;
    }
    NativeEvent(const NativeEvent&) = delete;
    NativeEvent& operator=(const NativeEvent&) = delete;
    ~NativeEvent() { destroy(); }
    [[nodiscard]] cudaEvent_t get() const noexcept { return handle_; }
    void adopt(cudaEvent_t event) noexcept { handle_ = event; }  // while empty

   private:
    void destroy() noexcept {
      if (handle_ != nullptr) (void)ACCEL_CUDA_CHECK_NOTHROW(cudaEventDestroy(std::exchange(handle_, nullptr)));
    }
    cudaEvent_t handle_ = nullptr;
  };

  NativeEvent event_;
  std::unique_ptr<CapturedRecord> captured_;  // set while the latest record is a captured one
  int device_ = -1;
};

}  // namespace accel::cuda
