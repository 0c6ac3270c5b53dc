// accel/cpu/detail/graph_recording.hpp — what a CPU graph capture records, and what a replay runs.
//
// While a stream captures, stream_state::submit appends each task to the capture's graph_body instead
// of queueing it. Random fills record a GraphDraw (generator, size) instead of reserving offsets, and
// their task reads its (seed, offset) from the replay running it: each replay reserves the draws from
// their generators at replay time and passes the positions to its one stream task, which publishes
// them to the recorded tasks through replay_positions() while it runs them in order.
// Internal to the CPU backend.
#pragma once

#include <accel/core/capture_mode.hpp>
#include <accel/core/error.hpp>
#include <accel/cpu/detail/stream_task.hpp>
#include <accel/random/graph_draws.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace accel::cpu::detail {

/// The recorded work of a graph; immutable once the capture ended (replays share it).
struct graph_body {
  int device = 0;
  std::vector<stream_task> tasks;
  std::vector<GraphDraw> draws;
};

/// (seed, offset) of each draw of the replay the calling thread is running; null outside replays.
using draw_positions = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
inline const draw_positions*& replay_positions() noexcept {
  thread_local const draw_positions* positions = nullptr;
  return positions;
}

/// The position of draw `index` in the replay being run (a recorded fill task calls this).
[[nodiscard]] inline std::pair<std::uint64_t, std::uint64_t> replay_position(std::size_t index) {
  const draw_positions* positions = replay_positions();
  if (positions == nullptr || index >= positions->size()) {
    throw InvalidStateError("cpu graph: a random fill recorded in a graph ran outside a replay of that graph");
  }
  return (*positions)[index];
}

/// A capture in progress on one stream. Shared by the stream (which appends to it) and the guard.
class graph_recording {
 public:
  graph_recording(int device, CaptureMode mode)
      : body_(std::make_shared<graph_body>()), mode_(mode), owner_(std::this_thread::get_id()) {
    body_->device = device;
  }

  /// Appends a task (the stream calls this with its queue mutex held, which orders the appends).
  void append(stream_task&& task) { body_->tasks.push_back(std::move(task)); }

  /// Records a fill; returns its index among the graph's draws.
  std::size_t add_draw(Generator& generator, std::uint64_t n, bool wide) {
    const std::lock_guard lock(mutex_);
    body_->draws.push_back(GraphDraw{&generator, n, wide});
    return body_->draws.size() - 1;
  }

  /// Whether a device synchronize from the calling thread is illegal under this capture's mode.
  [[nodiscard]] bool forbids_device_sync() const noexcept {
    return mode_ == CaptureMode::global || (mode_ == CaptureMode::per_thread && owner_ == std::this_thread::get_id());
  }
  [[nodiscard]] CaptureMode mode() const noexcept { return mode_; }

  /// An illegal call happened during the capture: the first reason is kept; end() reports it.
  void invalidate(const std::string& reason) {
    const std::lock_guard lock(mutex_);
    if (failure_.empty()) failure_ = reason;
  }
  [[nodiscard]] std::string failure() const {
    const std::lock_guard lock(mutex_);
    return failure_;
  }

  /// The recorded work, handed to the graph when the capture ends.
  [[nodiscard]] std::shared_ptr<graph_body> take_body() noexcept { return std::move(body_); }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<graph_body> body_;
  const CaptureMode mode_;
  const std::thread::id owner_;
  std::string failure_;
};

/// The one stream task of a replay: publishes the draw positions and runs the recorded tasks in
/// order. A task that throws does not stop the others; the first failure is rethrown at the end (the
/// stream then reports it at its next synchronization, as for any task).
struct graph_replay_task {
  std::shared_ptr<graph_body> body;
  draw_positions positions;

  void operator()() {
    struct publish {
      const draw_positions* previous;
      explicit publish(const draw_positions* p) : previous(std::exchange(replay_positions(), p)) {}
      ~publish() { replay_positions() = previous; }
    } scope(&positions);
    std::exception_ptr first;
    for (stream_task& task : body->tasks) {
      try {
        task();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }
};

}  // namespace accel::cpu::detail
