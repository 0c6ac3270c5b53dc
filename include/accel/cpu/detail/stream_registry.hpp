// accel/cpu/detail/stream_registry.hpp — the CPU streams of the process: per device its default stream
// and its live created streams, each thread's current stream per device, and what works over all of
// them (stream_frontier, synchronize_device).
//
// Created on first use and never destroyed, so it outlives static destructors and exiting threads. A
// fork() keeps it consistent (its pthread_atfork handlers lock it) and the child orphans the streams it
// inherited: their worker threads exist only in the parent (StreamState::orphan_after_fork).
// Internal to the CPU backend.
#pragma once

#include <accel/core/error.hpp>
#include <accel/core/source_location.hpp>
#include <accel/cpu/detail/graph_recording.hpp>
#include <accel/cpu/detail/stream_state.hpp>
#include <accel/cpu/device.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <pthread.h>

namespace accel::cpu::detail {

struct DeviceStreams {
  std::mutex mutex;
  StreamState* default_stream = nullptr;
  std::vector<StreamState*> live;  // created streams, in creation order
};

class StreamRegistry {
 public:
  explicit StreamRegistry(int count) : count_(count > 0 ? count : 0), devices_(new DeviceStreams[count_]) {
    for (int i = 0; i < count_; ++i) devices_[i].default_stream = new StreamState(i, 0, true);
  }
  [[nodiscard]] DeviceStreams& device(int index) noexcept { return devices_[index]; }

  void add(StreamState* s) {
    DeviceStreams& d = device(s->device());
    std::lock_guard<std::mutex> lock(d.mutex);
    d.live.push_back(s);
  }
  void remove(StreamState* s) noexcept {
    DeviceStreams& d = device(s->device());
    std::lock_guard<std::mutex> lock(d.mutex);
    std::erase(d.live, s);
  }

  // fork() support (see registry()).
  void lock_all() noexcept {
    for (int i = 0; i < count_; ++i) devices_[i].mutex.lock();
    wait_graph_mutex().lock();  // never held while a registry mutex is taken: no order to invert
  }
  void unlock_all() noexcept {
    wait_graph_mutex().unlock();
    for (int i = count_; i-- > 0;) devices_[i].mutex.unlock();
  }
  void orphan_all() noexcept {
    for (int i = 0; i < count_; ++i) {
      for (StreamState* s : devices_[i].live) s->orphan_after_fork();
    }
  }

 private:
  int count_;
  std::unique_ptr<DeviceStreams[]> devices_;
};

/// Created on first use and never destroyed: usable from static destructors and exiting threads.
inline StreamRegistry& registry() {
  static StreamRegistry* const instance = [] {
    auto* r = new StreamRegistry(Devices::device_count());
    // fork(): the registry is kept consistent across it, and a child orphans the streams it
    // inherited (their worker threads exist only in the parent).
    ::pthread_atfork([] { registry().lock_all(); }, [] { registry().unlock_all(); },
                     [] {
                       registry().unlock_all();
                       registry().orphan_all();
                     });
    return r;
  }();
  return *instance;
}

inline StreamState* default_stream_state(int device) { return registry().device(device).default_stream; }

/// The calling thread's current stream per device (null: the default stream). A heap table behind a
/// trivially destructible thread_local, freed at thread exit; code running after that (static
/// destructors of the main thread) sees the default streams.
struct CurrentStreams {
  static StreamState**& table() noexcept {
    thread_local StreamState** slots = nullptr;
    return slots;
  }
  [[nodiscard]] static StreamState* get(int device) noexcept {
    StreamState** slots = table();
    return slots != nullptr ? slots[device] : nullptr;
  }
  static void set(int device, StreamState* s) {
    StreamState**& slots = table();
    if (slots == nullptr) {
      if (s == nullptr) return;
      slots = new StreamState*[static_cast<std::size_t>(Devices::device_count())]();
      struct FreeAtExit {
        ~FreeAtExit() { delete[] std::exchange(table(), nullptr); }
      };
      thread_local FreeAtExit free_at_exit;
      (void)free_at_exit;
    }
    slots[device] = s;
  }
};

/// Where every created stream of every device stands now: one point per stream that still has work
/// queued or running. Never blocks; all points done() means that work has run.
inline std::vector<StreamPoint> stream_frontier() {
  std::vector<StreamPoint> points;
  for (int device = 0; device < Devices::device_count(); ++device) {
    DeviceStreams& d = registry().device(device);
    std::lock_guard<std::mutex> lock(d.mutex);
    for (StreamState* s : d.live) {
      const std::uint64_t submitted = s->submitted();
      if (s->completed() < submitted && !s->orphaned()) points.emplace_back(*s, submitted);
    }
  }
  return points;
}

/// Blocks until every live stream of `device` ran what was enqueued before the call, then reports
/// the oldest unreported task failure among them as TaskError.
inline void synchronize_device(int device, source_location where) {
  Devices::check_device(device);
  DeviceStreams& d = registry().device(device);
  struct Held {
    StreamState* state;
    std::uint64_t target;
  };
  std::vector<Held> snapshot;
  struct ReleaseAll {
    std::vector<Held>& v;
    ~ReleaseAll() {
      for (Held& h : v) h.state->release();
    }
  } releaser{snapshot};
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    for (StreamState* s : d.live) {  // a capture may forbid this (CaptureMode)
      if (const std::shared_ptr<GraphRecording> recording = s->capture(); recording && recording->forbids_device_sync()) {
        const std::string message = "device synchronize() of cpu:" + std::to_string(device) + " while " + s->name() +
                                    " is capturing a graph in " + std::string(to_string(recording->mode())) +
                                    " mode (capture with CaptureMode::relaxed to allow it)";
        recording->invalidate(message);
        throw InvalidStateError(message + "; the capture is invalidated", where);
      }
    }
    snapshot.reserve(d.live.size());
    for (StreamState* s : d.live) {
      if (s->orphaned()) continue;  // inherited across fork(): its work belongs to the parent
      s->retain();
      snapshot.push_back({s, s->submitted()});
    }
  }
  for (Held& h : snapshot) h.state->wait_until(h.target);
  StreamState* oldest = d.default_stream;
  for (Held& h : snapshot) {
    const std::uint64_t seq = h.state->failure_seq();
    if (seq != 0 && (oldest->failure_seq() == 0 || seq < oldest->failure_seq())) oldest = h.state;
  }
  oldest->rethrow_failure(where);
}

}  // namespace accel::cpu::detail
