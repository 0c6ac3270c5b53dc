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
// An Event is used by one thread at a time; it is recorded on streams of one device only.
#pragma once

#include <accel/concepts/stream.hpp>
#include <accel/core/error.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/device.hpp>
#include <accel/cuda/error.hpp>
#include <accel/cuda/stream.hpp>

#include <accel/core/source_location.hpp>
#include <string>
#include <utility>

namespace accel::cuda {

/// A marker in a CUDA stream; move-only.
class Event {
 public:
  /// An event without timing (cudaEventDisableTiming: the cheapest to record and wait on).
  Event() noexcept = default;
  /// An event that elapsed_time() accepts when `enable_timing` is true.
  explicit Event(bool enable_timing) noexcept : timing_(enable_timing) {}

  Event(Event&& other) noexcept
      : event_(std::exchange(other.event_, nullptr)), device_(other.device_), timing_(other.timing_) {}
  Event& operator=(Event&& other) noexcept {
    if (this != &other) {
      destroy();
      event_ = std::exchange(other.event_, nullptr);
      device_ = other.device_;
      timing_ = other.timing_;
    }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  /// Never throws; destroying an event whose work is pending is safe (CUDA releases it later).
  ~Event() { destroy(); }

  /// Captures the work enqueued so far on the calling thread's current stream.
  void record() { record(Streams::current_stream()); }

  /// Captures the work enqueued so far on `stream`.
  void record(StreamRef stream) {
    stream.check_valid("Event::record");
    if (event_ != nullptr && device_ != stream.device_) {
      throw InvalidArgumentError("cuda Event::record: the event belongs to cuda:" + std::to_string(device_) +
                                 " and cannot be recorded on " + stream.name());
    }
    const bool default_stream = stream.handle_ == nullptr || stream.handle_ == cudaStreamPerThread;
    if (event_ == nullptr || default_stream) {
      Devices::DeviceGuard guard(stream.device_);
      create_on(stream.device_);
      ACCEL_CUDA_CHECK(cudaEventRecord(event_, stream.handle_));
    } else {
      ACCEL_CUDA_CHECK(cudaEventRecord(event_, stream.handle_));
    }
  }

  /// True when the recorded work has completed, or when the event was never recorded. Never blocks.
  [[nodiscard]] bool query() const {
    if (event_ == nullptr) return true;
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaSuccess) return true;
    if (status != cudaErrorNotReady) detail::throw_error(status, "cudaEventQuery(event)", source_location::current());
    (void)cudaGetLastError();
    return false;
  }

  /// Blocks until the recorded work has completed (returns at once if never recorded).
  void synchronize() const {
    if (event_ != nullptr) ACCEL_CUDA_CHECK(cudaEventSynchronize(event_));
  }

  /// Makes later work on `stream` (default: the current stream) wait for this event.
  void wait(StreamRef stream) const { stream.wait(*this); }
  void wait() const { wait(Streams::current_stream()); }

  /// Milliseconds from this event to `end` (negative if `end` completed first).
  [[nodiscard]] float elapsed_time(const Event& end) const {
    check_timed("start", *this);
    check_timed("end", end);
    if (device_ != end.device_) {
      throw InvalidArgumentError("cuda Event::elapsed_time: the events were recorded on cuda:" +
                                 std::to_string(device_) + " and cuda:" + std::to_string(end.device_));
    }
    float ms = 0.0F;
    ACCEL_CUDA_CHECK(cudaEventElapsedTime(&ms, event_, end.event_));
    return ms;
  }

  [[nodiscard]] bool timing_enabled() const noexcept { return timing_; }
  /// True once record() was called.
  [[nodiscard]] bool recorded() const noexcept { return event_ != nullptr; }
  /// The native event (nullptr until the first record).
  [[nodiscard]] cudaEvent_t get() const noexcept { return event_; }
  /// The device the event was recorded on (-1 until the first record).
  [[nodiscard]] int device_index() const noexcept { return device_; }

 private:
  friend class StreamRef;

  void create_on(int device) {
    if (event_ != nullptr) return;
    cudaEvent_t event = nullptr;
    ACCEL_CUDA_CHECK(cudaEventCreateWithFlags(&event, timing_ ? cudaEventDefault : cudaEventDisableTiming));
    event_ = event;
    device_ = device;
  }

  void destroy() noexcept {
    if (event_ != nullptr) (void)ACCEL_CUDA_CHECK_NOTHROW(cudaEventDestroy(std::exchange(event_, nullptr)));
  }

  static void check_timed(const char* role, const Event& e) {
    const std::string which = std::string("cuda Event::elapsed_time: the ") + role + " event ";
    if (!e.timing_) throw InvalidStateError(which + "was created without timing (use Event{true})");
    if (e.event_ == nullptr) throw InvalidStateError(which + "was never recorded");
    if (!e.query()) throw InvalidStateError(which + "has not completed yet (synchronize() it first)");
  }

  cudaEvent_t event_ = nullptr;
  int device_ = -1;
  bool timing_ = false;
};

}  // namespace accel::cuda
