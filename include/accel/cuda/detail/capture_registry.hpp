// accel/cuda/detail/capture_registry.hpp — the graph captures accel has in progress on CUDA streams.
//
// CUDA itself refuses illegal calls during a capture (and then invalidates it) but says only
// "operation not permitted when stream is capturing". accel checks first, so the error names the call,
// the stream and the capture mode — and invalidates the capture the same way, so the CPU and CUDA
// backends report the same thing. A capture also collects the random fills recorded into it: each
// gets a (seed, offset) slot in device memory that every replay writes before launching the graph.
// The registry is a short list behind a mutex, skipped entirely (one atomic load) when no capture is
// in progress. Internal to the CUDA backend.
#pragma once

#include <accel/core/capture_mode.hpp>
#include <accel/core/error.hpp>
#include <accel/cuda/detail/host_task.hpp>
#include <accel/random/graph_draws.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace accel::cuda::detail {

/// One capture in progress.
class CaptureRecord {
 public:
  /// Draw slots per chunk of device memory: (seed, offset) as two 64-bit words each.
  static constexpr std::size_t draws_per_chunk = 256;
  static constexpr std::size_t chunk_bytes = draws_per_chunk * 2 * sizeof(std::uint64_t);

  CaptureRecord(int device, std::uint64_t stream_id, CaptureMode mode)
      : device_(device), stream_id_(stream_id), mode_(mode), owner_(std::this_thread::get_id()) {}

  [[nodiscard]] int device() const noexcept { return device_; }
  [[nodiscard]] std::uint64_t stream_id() const noexcept { return stream_id_; }
  [[nodiscard]] CaptureMode mode() const noexcept { return mode_; }
  [[nodiscard]] bool forbids_device_sync() const noexcept {
    return mode_ == CaptureMode::global || (mode_ == CaptureMode::per_thread && owner_ == std::this_thread::get_id());
  }

  void invalidate(const std::string& reason) {
    const std::lock_guard lock(mutex_);
    if (failure_.empty()) failure_ = reason;
  }
  [[nodiscard]] std::string failure() const {
    const std::lock_guard lock(mutex_);
    return failure_;
  }

  /// Records a fill and returns the device address of its (seed, offset) slot. `allocate_chunk()`
  /// gives chunk_bytes of device memory that lives as long as the graph (its memory pool).
  template <class AllocateChunk>
  std::uint64_t* add_draw(Generator& generator, std::uint64_t n, bool wide, AllocateChunk&& allocate_chunk) {
    const std::lock_guard lock(mutex_);
    const std::size_t index = draws_.size();
    if (index / draws_per_chunk >= chunks_.size()) {
      chunks_.reserve(chunks_.size() + 1);
      chunks_.push_back(static_cast<std::uint64_t*>(allocate_chunk()));
    }
    draws_.push_back(GraphDraw{&generator, n, wide});
    return chunks_[index / draws_per_chunk] + 2 * (index % draws_per_chunk);
  }

  /// A host task enqueued during the capture: it runs at every replay, so the graph owns it.
  void keep_host_task(std::unique_ptr<HostTaskBase> task) {
    const std::lock_guard lock(mutex_);
    host_tasks_.push_back(std::move(task));
  }
  [[nodiscard]] std::vector<std::unique_ptr<HostTaskBase>> take_host_tasks() {
    const std::lock_guard lock(mutex_);
    return std::move(host_tasks_);
  }

  /// The draws and their chunks, handed to the graph when the capture ends.
  [[nodiscard]] std::vector<GraphDraw> take_draws() {
    const std::lock_guard lock(mutex_);
    return std::move(draws_);
  }
  [[nodiscard]] std::vector<std::uint64_t*> take_chunks() {
    const std::lock_guard lock(mutex_);
    return std::move(chunks_);
  }

 private:
  mutable std::mutex mutex_;
  const int device_;
  const std::uint64_t stream_id_;
  const CaptureMode mode_;
  const std::thread::id owner_;
  std::string failure_;
  std::vector<GraphDraw> draws_;
  std::vector<std::uint64_t*> chunks_;
  std::vector<std::unique_ptr<HostTaskBase>> host_tasks_;
};

class CaptureRegistry {
 public:
  void add(std::shared_ptr<CaptureRecord> record) {
    const std::lock_guard lock(mutex_);
    active_.push_back(std::move(record));
    count_.fetch_add(1, std::memory_order_release);
  }
  void remove(const CaptureRecord* record) noexcept {
    const std::lock_guard lock(mutex_);
    const auto before = active_.size();
    std::erase_if(active_, [&](const std::shared_ptr<CaptureRecord>& r) { return r.get() == record; });
    if (active_.size() != before) count_.fetch_sub(1, std::memory_order_release);
  }
  /// The capture on stream `stream_id`, if any (one atomic load when no capture is in progress).
  [[nodiscard]] std::shared_ptr<CaptureRecord> find(std::uint64_t stream_id) const {
    if (count_.load(std::memory_order_acquire) == 0) return nullptr;
    const std::lock_guard lock(mutex_);
    for (const auto& r : active_) {
      if (r->stream_id() == stream_id) return r;
    }
    return nullptr;
  }
  /// A capture on `device` whose mode forbids a device synchronize from the calling thread.
  [[nodiscard]] std::shared_ptr<CaptureRecord> forbidding_device_sync(int device) const {
    if (count_.load(std::memory_order_acquire) == 0) return nullptr;
    const std::lock_guard lock(mutex_);
    for (const auto& r : active_) {
      if (r->device() == device && r->forbids_device_sync()) return r;
    }
    return nullptr;
  }

 private:
  mutable std::mutex mutex_;
  std::atomic<int> count_{0};
  std::vector<std::shared_ptr<CaptureRecord>> active_;
};

/// Created on first use, never destroyed.
inline CaptureRegistry& captures() {
  static CaptureRegistry* const registry = new CaptureRegistry;
  return *registry;
}

}  // namespace accel::cuda::detail
