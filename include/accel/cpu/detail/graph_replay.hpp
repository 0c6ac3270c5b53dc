// accel/cpu/detail/graph_replay.hpp — what a replay of a CPU graph runs: the one stream task that runs
// the recorded tasks in order, and the records of external events in it.
//
// Graph::replay reserves the graph's random draws and, when the graph recorded external events
// (EventOptions::external), makes one fresh event_capture per event record (replay_event_batch); then
// it submits graph_replay_task, and once the task has its ticket every capture points at it and
// becomes its event's latest record — so the event is "recorded" when the replay is enqueued, as
// cudaGraphLaunch enqueues the graph's event record nodes. While the task runs the recorded tasks, it
// publishes the draw positions and its event captures to them (replay_positions(), replay_events());
// the step an event record added (graph_event_record) stamps its capture: a timed event's timestamp is
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
struct replay_event_records {
  std::vector<capture_ref> captures;
};

/// The event records of the replay the calling thread is running; null outside replays.
inline const replay_event_records*& replay_events() noexcept {
  thread_local const replay_event_records* events = nullptr;
  return events;
}

/// The step an external event record adds to a graph: stamps that record of the replay running it.
struct graph_event_record {
  std::size_t index;
  void operator()() const {
    const replay_event_records* events = replay_events();
    if (events == nullptr || index >= events->captures.size()) {
      throw InvalidStateError("cpu graph: an event record recorded in a graph ran outside a replay of that graph");
    }
    events->captures[index].get()->stamp();
  }
};

/// The one stream task of a replay: publishes the draw positions and the event records, and runs the
/// recorded tasks in order. A task that throws does not stop the others; the first failure is
/// rethrown at the end (the stream then reports it at its next synchronization, as for any task).
struct graph_replay_task {
  std::shared_ptr<graph_body> body;
  draw_positions positions;
  std::unique_ptr<replay_event_records> events;  // null when the graph records no event

  void operator()() {
    struct publish {
      const draw_positions* previous_positions;
      const replay_event_records* previous_events;
      publish(const draw_positions* p, const replay_event_records* e)
          : previous_positions(std::exchange(replay_positions(), p)), previous_events(std::exchange(replay_events(), e)) {}
      publish(const publish&) = delete;
      publish& operator=(const publish&) = delete;
      ~publish() {
        replay_positions() = previous_positions;
        replay_events() = previous_events;
      }
    } scope(&positions, events.get());
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

static_assert(stream_task::stored_inline<graph_replay_task>, "a replay is enqueued without allocating a task");

/// The records of a graph's external events for one replay: made before the replay task is submitted
/// (tasks(): the task's references), published to the events once the task has its ticket.
class replay_event_batch {
 public:
  explicit replay_event_batch(const graph_body& body) : body_(body) {
    fresh_.reserve(body.event_records.size());
    try {
      for (std::size_t i = 0; i < body.event_records.size(); ++i) fresh_.push_back(event_capture::create());
    } catch (...) {
      for (event_capture* c : fresh_) c->release();
      throw;
    }
  }
  replay_event_batch(const replay_event_batch&) = delete;
  replay_event_batch& operator=(const replay_event_batch&) = delete;
  /// Releases the captures that were not published (the replay was not enqueued).
  ~replay_event_batch() {
    for (event_capture* c : fresh_) c->release();
  }

  /// The replay task's references to the captures.
  [[nodiscard]] std::unique_ptr<replay_event_records> task_records() const {
    auto records = std::make_unique<replay_event_records>();
    records->captures.reserve(fresh_.size());
    for (event_capture* c : fresh_) records->captures.emplace_back(c);
    return records;
  }

  /// Points every capture at the replay (the first `ticket` tasks of `s`) and makes it the latest
  /// record of its event.
  void publish(stream_state& s, std::uint64_t ticket) noexcept {
    for (std::size_t i = 0; i < fresh_.size(); ++i) {
      fresh_[i]->point = stream_point(s, ticket);
      body_.event_records[i]->install(fresh_[i]);
    }
    fresh_.clear();
  }

 private:
  const graph_body& body_;
  std::vector<event_capture*> fresh_;  // one reference each, owned until published
};

}  // namespace accel::cpu::detail
