// accel/cuda/detail/event_pool.hpp — reusable cudaEventDisableTiming events, per device.
//
// Creating events is costly under multi-threading (torch keeps the same pool), and the allocator and
// wait_stream() need many short-lived ones. A PooledEvent returns its event to the pool when destroyed.
// Re-recording a pooled event right after a cudaStreamWaitEvent on it is safe: a wait captures the
// event's state at the time of the call. The pools are never destroyed (cudart may unload first).
// Internal to the CUDA backend.
#pragma once

#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/detail/detect.hpp>
#include <accel/cuda/error.hpp>

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

namespace accel::cuda::detail {

class EventPool {
 public:
  /// An idle event of `device` (the device must be current).
  cudaEvent_t acquire() {
    {
      const std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        cudaEvent_t event = free_.back();
        free_.pop_back();
        return event;
      }
    }
    cudaEvent_t event = nullptr;
    ACCEL_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return event;
  }

  void release(cudaEvent_t event) noexcept {
    try {
      const std::lock_guard lock(mutex_);
      free_.push_back(event);
    } catch (...) {
      (void)ACCEL_CUDA_CHECK_NOTHROW(cudaEventDestroy(event));
    }
  }

 private:
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};

/// The pool of `device` (0 <= device < device_count(), checked by the caller). Created on first use,
/// never destroyed.
inline EventPool& event_pool(int device) {
  static EventPool* const pools = new EventPool[static_cast<std::size_t>(std::max(detection().count, 1))];
  return pools[device];
}

/// A pooled event, returned to its device's pool on destruction. Move-only.
class PooledEvent {
 public:
  PooledEvent() noexcept = default;
  PooledEvent(cudaEvent_t event, int device) noexcept : event_(event), device_(device) {}
  PooledEvent(PooledEvent&& other) noexcept
      : event_(std::exchange(other.event_, nullptr)), device_(other.device_) {}
  PooledEvent& operator=(PooledEvent&& other) noexcept {
    if (this != &other) {
      reset();
      event_ = std::exchange(other.event_, nullptr);
      device_ = other.device_;
    }
    return *this;
  }
  PooledEvent(const PooledEvent&) = delete;
  PooledEvent& operator=(const PooledEvent&) = delete;
  ~PooledEvent() { reset(); }

  [[nodiscard]] cudaEvent_t get() const noexcept { return event_; }
  [[nodiscard]] int device() const noexcept { return device_; }

  void reset() noexcept {
    if (event_ == nullptr) return;
    try {
      event_pool(device_).release(std::exchange(event_, nullptr));
    } catch (...) {  // the pool table cannot be reached (out of memory): let the event go
    }
  }

 private:
  cudaEvent_t event_ = nullptr;
  int device_ = -1;
};

}  // namespace accel::cuda::detail
