// accel/cpu/detail/stream_registry.hpp — the CPU streams of the process: per device its default stream
// and its live created streams, each thread's current stream per device, and what works over all of
// them (stream_frontier, synchronize_device).
//
// Created on first use and never destroyed, so it outlives static destructors and exiting threads. A
// fork() keeps it consistent (its pthread_atfork handlers lock it) and the child orphans the streams it
// inherited: their worker threads exist only in the parent (stream_state::orphan_after_fork).
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

struct device_streams {
  std::mutex mutex;
  stream_state* default_stream = nullptr;
  std::vector<stream_state*> live;  // created streams, in creation order
};

class stream_registry {
 public:
  explicit stream_registry(int count) : count_(count > 0 ? count : 0), devices_(new device_streams[count_]) {
    for (int i = 0; i < count_; ++i) devices_[i].default_stream = new stream_state(i, 0, true);
  }
  [[nodiscard]] device_streams& device(int index) noexcept { return devices_[index]; }

  void add(stream_state* s) {
    device_streams& d = device(s->device());
    std::lock_guard<std::mutex> lock(d.mutex);
    d.live.push_back(s);
  }
  void remove(stream_state* s) noexcept {
    device_streams& d = device(s->device());
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
      for (stream_state* s : devices_[i].live) s->orphan_after_fork();
    }
  }

 private:
  int count_;
  std::unique_ptr<device_streams[]> devices_;
};

/// Created on first use and never destroyed: usable from static destructors and exiting threads.
inline stream_registry& registry() {
  static stream_registry* const instance = [] {
    auto* r = new stream_registry(Devices::device_count());
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

inline stream_state* default_stream_state(int device) { return registry().device(device).default_stream; }

/// The calling thread's current stream per device (null: the default stream). A heap table behind a
/// trivially destructible thread_local, freed at thread exit; code running after that (static
/// destructors of the main thread) sees the default streams.
struct current_streams {
  static stream_state**& table() noexcept {
    thread_local stream_state** slots = nullptr;
    return slots;
  }
  [[nodiscard]] static stream_state* get(int device) noexcept {
    stream_state** slots = table();
    return slots != nullptr ? slots[device] : nullptr;
  }
  static void set(int device, stream_state* s) {
    stream_state**& slots = table();
    if (slots == nullptr) {
      if (s == nullptr) return;
      slots = new stream_state*[static_cast<std::size_t>(Devices::device_count())]();
      struct owner {
        ~owner() { delete[] std::exchange(table(), nullptr); }
      };
      thread_local owner free_at_exit;
      (void)free_at_exit;
    }
    slots[device] = s;
  }
};

/// Where every created stream of every device stands now: one point per stream that still has work
/// queued or running. Never blocks; all points done() means that work has run.
inline std::vector<stream_point> stream_frontier() {
  std::vector<stream_point> points;
  for (int device = 0; device < Devices::device_count(); ++device) {
    device_streams& d = registry().device(device);
    std::lock_guard<std::mutex> lock(d.mutex);
    for (stream_state* s : d.live) {
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
  device_streams& d = registry().device(device);
  struct held {
    stream_state* state;
    std::uint64_t target;
  };
  std::vector<held> snapshot;
  struct release_all {
    std::vector<held>& v;
    ~release_all() {
      for (held& h : v) h.state->release();
    }
  } releaser{snapshot};
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    for (stream_state* s : d.live) {  // a capture may forbid this (CaptureMode)
      if (const std::shared_ptr<graph_recording> recording = s->capture(); recording && recording->forbids_device_sync()) {
        const std::string message = "device synchronize() of cpu:" + std::to_string(device) + " while " + s->name() +
                                    " is capturing a graph in " + std::string(to_string(recording->mode())) +
                                    " mode (capture with CaptureMode::relaxed to allow it)";
        recording->invalidate(message);
        throw InvalidStateError(message + "; the capture is invalidated", where);
      }
    }
    snapshot.reserve(d.live.size());
    for (stream_state* s : d.live) {
      if (s->orphaned()) continue;  // inherited across fork(): its work belongs to the parent
      s->retain();
      snapshot.push_back({s, s->submitted()});
    }
  }
  for (held& h : snapshot) h.state->wait_until(h.target);
  stream_state* oldest = d.default_stream;
  for (held& h : snapshot) {
    const std::uint64_t seq = h.state->failure_seq();
    if (seq != 0 && (oldest->failure_seq() == 0 || seq < oldest->failure_seq())) oldest = h.state;
  }
  oldest->rethrow_failure(where);
}

}  // namespace accel::cpu::detail
