// accel/cpu/detail/graph_recording.hpp — what a CPU graph capture records.
//
// While a stream captures, StreamState::submit appends each task to the capture's GraphBody instead
// of queueing it. Random fills record a GraphDraw (generator, size) instead of reserving offsets, and
// their task reads its (seed, offset) from the replay running it: each replay reserves the draws from
// their generators at replay time and passes the positions to its one stream task, which publishes
// them to the recorded tasks through replay_positions() while it runs them in order. An external
// event recorded during the capture (EventOptions::external) adds its event to event_records and a
// step task that finds the replay's record of it the same way (cpu/detail/graph_replay.hpp, which
// also holds the replay task). Work numbered from a counter of its own (a communicator's operation
// numbers: cpu/detail/graph_numbering.hpp) records a GraphCount instead of taking a number: each
// replay takes the graph's numbers from each counter in one step when it is enqueued, in host order as
// the same calls made eagerly then would, and the recorded task reads its number from the replay
// (replay_number). Internal to the CPU backend.
#pragma once

#include <accel/core/capture_mode.hpp>
#include <accel/core/error.hpp>
#include <accel/cpu/detail/stream_task.hpp>
#include <accel/random/graph_draws.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace accel::cpu::detail {

class EventSlot;  // cpu/detail/event_capture.hpp: the record state an external event shares with graphs

/// A counter a graph takes `count` numbers from at each replay (the counter holds the last number
/// taken; a replay takes counter + 1 .. counter + count).
struct GraphCount {
  std::shared_ptr<std::atomic<std::uint64_t>> counter;
  std::uint64_t count = 0;
};

/// Where a recorded task finds its number in a replay: the first number GraphBody::counts[index] took
/// for that replay, plus `offset`.
struct CountSlot {
  std::size_t index = 0;
  std::uint64_t offset = 0;
};

/// The recorded work of a graph; immutable once the capture ended (replays share it).
struct GraphBody {
  int device = 0;
  std::vector<StreamTask> tasks;
  std::vector<GraphDraw> draws;
  /// The external events recorded during the capture, in recording order: the step task of record i
  /// records event_records[i] at its point of each replay.
  std::vector<std::shared_ptr<EventSlot>> event_records;
  /// The counters the recorded work numbers itself from, one entry per counter, in first-use order.
  std::vector<GraphCount> counts;
};

/// (seed, offset) of each draw of a replay: `size` of them at `data` (the replay task holds them).
struct DrawPositions {
  const std::pair<std::uint64_t, std::uint64_t>* data = nullptr;
  std::size_t size = 0;
};

/// The draw positions of the replay the calling thread is running; null outside replays.
inline const DrawPositions*& replay_positions() noexcept {
  thread_local const DrawPositions* positions = nullptr;
  return positions;
}

/// The position of draw `index` in the replay being run (a recorded fill task calls this).
[[nodiscard]] inline std::pair<std::uint64_t, std::uint64_t> replay_position(std::size_t index) {
  const DrawPositions* positions = replay_positions();
  if (positions == nullptr || index >= positions->size) {
    throw InvalidStateError("cpu graph: a random fill recorded in a graph ran outside a replay of that graph");
  }
  return positions->data[index];
}

/// The first number each of the graph's counts took for the replay the calling thread is running;
/// null outside replays.
using CountBases = std::vector<std::uint64_t>;
inline const CountBases*& replay_count_bases() noexcept {
  thread_local const CountBases* bases = nullptr;
  return bases;
}

/// The number `slot` names in the replay being run (a recorded numbered task calls this).
[[nodiscard]] inline std::uint64_t replay_number(CountSlot slot) {
  const CountBases* bases = replay_count_bases();
  if (bases == nullptr || slot.index >= bases->size()) {
    throw InvalidStateError("cpu graph: a numbered task recorded in a graph ran outside a replay of that graph");
  }
  return (*bases)[slot.index] + slot.offset;
}

/// A capture in progress on one stream. Shared by the stream (which appends to it) and the guard.
class GraphRecording {
 public:
  GraphRecording(int device, CaptureMode mode)
      : body_(std::make_shared<GraphBody>()), mode_(mode), owner_(std::this_thread::get_id()) {
    body_->device = device;
  }

  /// Appends a task (the stream calls this with its queue mutex held, which orders the appends).
  void append(StreamTask&& task) { body_->tasks.push_back(std::move(task)); }

  /// Records a fill; returns its index among the graph's draws.
  std::size_t add_draw(Generator& generator, std::uint64_t n, bool wide) {
    const std::lock_guard lock(mutex_);
    body_->draws.push_back(GraphDraw{&generator, n, wide});
    return body_->draws.size() - 1;
  }

  /// Records that each replay takes `n` numbers from `counter`; returns where the first of them is.
  CountSlot add_count(const std::shared_ptr<std::atomic<std::uint64_t>>& counter, std::uint64_t n) {
    const std::lock_guard lock(mutex_);
    if (!body_ || ended()) throw InvalidStateError("cpu graph: the capture ended while numbered work was recorded");
    std::vector<GraphCount>& counts = body_->counts;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      if (counts[i].counter.get() != counter.get()) continue;
      const CountSlot slot{i, counts[i].count};
      counts[i].count += n;
      return slot;
    }
    counts.push_back(GraphCount{counter, n});
    return CountSlot{counts.size() - 1, 0};
  }

  /// Records an external event record; returns its index among the graph's event records.
  /// InvalidStateError when the capture has ended meanwhile.
  std::size_t add_event_record(std::shared_ptr<EventSlot> slot) {
    const std::lock_guard lock(mutex_);
    if (!body_ || ended()) throw InvalidStateError("cpu Event::record: the graph capture ended during the record");
    body_->event_records.push_back(std::move(slot));
    return body_->event_records.size() - 1;
  }

  /// The stream stopped capturing into this recording (StreamState::end_capture). Events recorded
  /// during the capture use it to tell an active capture from an ended one.
  void mark_ended() noexcept { ended_.store(true, std::memory_order_release); }
  [[nodiscard]] bool ended() const noexcept { return ended_.load(std::memory_order_acquire); }

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
  [[nodiscard]] std::shared_ptr<GraphBody> take_body() noexcept { return std::move(body_); }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<GraphBody> body_;
  const CaptureMode mode_;
  const std::thread::id owner_;
  std::string failure_;
  std::atomic<bool> ended_{false};
};

}  // namespace accel::cpu::detail
