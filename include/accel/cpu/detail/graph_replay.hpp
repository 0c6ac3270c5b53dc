// accel/cpu/detail/graph_replay.hpp — what a replay of a CPU graph runs: the one stream task that runs
// the recorded tasks in order, and the records of external events in it.
//
// Graph::replay reserves the graph's random draws and, when the graph recorded external events
// (EventOptions::external), makes one fresh EventCapture per event record (ReplayEventBatch); then
// it submits GraphReplayTask, and once the task has its ticket every capture points at it and
// becomes its event's latest record — so the event is "recorded" when the replay is enqueued, as
// cudaGraphLaunch enqueues the graph's event record nodes. While the task runs the recorded tasks, it
// publishes the draw positions and its event captures to them (replay_positions(), replay_events());
// the step an event record added (GraphEventRecord) stamps its capture: a timed event's timestamp is
// taken at its point within the replayed work, while the event completes with the replay (a replay is
// one stream task). Internal to the CPU backend.
#pragma once

#include <accel/core/error.hpp>
#include <accel/cpu/detail/event_capture.hpp>
#include <accel/cpu/detail/graph_recording.hpp>
#include <accel/cpu/detail/stream_state.hpp>
#include <accel/cpu/detail/stream_task.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

namespace accel::cpu::detail {

/// One replay's records of the graph's external events: captures[i] is event record i.
struct ReplayEventRecords {
  std::vector<CaptureRef> captures;
};

/// The event records of the replay the calling thread is running; null outside replays.
inline const ReplayEventRecords*& replay_events() noexcept {
  thread_local const ReplayEventRecords* events = nullptr;
  return events;
}

/// The step an external event record adds to a graph: stamps that record of the replay running it.
struct GraphEventRecord {
  std::size_t index;
  void operator()() const {
    const ReplayEventRecords* events = replay_events();
    if (events == nullptr || index >= events->captures.size()) {
      throw InvalidStateError("cpu graph: an event record recorded in a graph ran outside a replay of that graph");
    }
    events->captures[index].get()->stamp();
  }
};

/// The one stream task of a replay: publishes the draw positions and the event records, and runs the
/// recorded tasks in order. A task that throws does not stop the others; the first failure is
/// rethrown at the end (the stream then reports it at its next synchronization, as for any task).
struct GraphReplayTask {
  std::shared_ptr<GraphBody> body;
  DrawPositions positions;
  std::unique_ptr<ReplayEventRecords> events;  // null when the graph records no event

  void operator()() {
    struct Publish {
      const DrawPositions* previous_positions;
      const ReplayEventRecords* previous_events;
      Publish(const DrawPositions* p, const ReplayEventRecords* e)
          : previous_positions(std::exchange(replay_positions(), p)), previous_events(std::exchange(replay_events(), e)) {}
      Publish(const Publish&) = delete;
      Publish& operator=(const Publish&) = delete;
      ~Publish() {
        replay_positions() = previous_positions;
        replay_events() = previous_events;
      }
    } scope(&positions, events.get());
    std::exception_ptr first;
    for (StreamTask& task : body->tasks) {
      try {
        task();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }
};

static_assert(StreamTask::stored_inline<GraphReplayTask>, "a replay is enqueued without allocating a task");

/// The records of a graph's external events for one replay: made before the replay task is submitted
/// (tasks(): the task's references), published to the events once the task has its ticket.
class ReplayEventBatch {
 public:
  explicit ReplayEventBatch(const GraphBody& body) : body_(body) {
    fresh_.reserve(body.event_records.size());
    try {
      for (std::size_t i = 0; i < body.event_records.size(); ++i) fresh_.push_back(EventCapture::create());
    } catch (...) {
      for (EventCapture* c : fresh_) c->release();
      throw;
    }
  }
  ReplayEventBatch(const ReplayEventBatch&) = delete;
  ReplayEventBatch& operator=(const ReplayEventBatch&) = delete;
  /// Releases the captures that were not published (the replay was not enqueued).
  ~ReplayEventBatch() {
    for (EventCapture* c : fresh_) c->release();
  }

  /// The replay task's references to the captures.
  [[nodiscard]] std::unique_ptr<ReplayEventRecords> task_records() const {
    auto records = std::make_unique<ReplayEventRecords>();
    records->captures.reserve(fresh_.size());
    for (EventCapture* c : fresh_) records->captures.emplace_back(c);
    return records;
  }

  /// Points every capture at the replay (the first `ticket` tasks of `s`) and makes it the latest
  /// record of its event.
  void publish(StreamState& s, std::uint64_t ticket) noexcept {
    for (std::size_t i = 0; i < fresh_.size(); ++i) {
      fresh_[i]->point = StreamPoint(s, ticket);
      body_.event_records[i]->install(fresh_[i]);
    }
    fresh_.clear();
  }

 private:
  const GraphBody& body_;
  std::vector<EventCapture*> fresh_;  // one reference each, owned until published
};

}  // namespace accel::cpu::detail
