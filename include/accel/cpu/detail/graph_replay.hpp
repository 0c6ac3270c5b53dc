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
// one stream task). The numbers the graph takes from its counters (GraphBody::counts) are taken when
// the replay is enqueued too, and published to the recorded tasks the same way (replay_count_bases());
// a replay recorded into another capture takes them from that graph's replay instead (`nested`).
// Internal to the CPU backend.
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

/// What one replay holds beside the draw positions: its records of the graph's external events
/// (captures[i] is event record i) and the first number each of the graph's counts took for it
/// (numbers[i] for GraphBody::counts[i]; when the replay was recorded into another capture, `nested`
/// says where in the outer replay's numbers each one is, and the task reads them when it runs).
struct ReplayRecords {
  std::vector<CaptureRef> captures;
  CountBases numbers;
  std::vector<CountSlot> nested;
  /// A replay recorded into another capture keeps the body alive: the outer graph may outlive its Graph.
  std::shared_ptr<GraphBody> owner;
};

/// The records of the replay the calling thread is running; null outside replays.
inline const ReplayRecords*& replay_events() noexcept {
  thread_local const ReplayRecords* events = nullptr;
  return events;
}

/// Takes the numbers of each of the graph's counts for one replay, now (host order).
[[nodiscard]] inline CountBases take_counts(const GraphBody& body) {
  CountBases bases(body.counts.size());
  for (std::size_t i = 0; i < bases.size(); ++i) {
    const GraphCount& c = body.counts[i];
    bases[i] = c.counter->fetch_add(c.count, std::memory_order_relaxed) + 1;
  }
  return bases;
}

/// The step an external event record adds to a graph: stamps that record of the replay running it.
struct GraphEventRecord {
  std::size_t index;
  void operator()() const {
    const ReplayRecords* events = replay_events();
    if (events == nullptr || index >= events->captures.size()) {
      throw InvalidStateError("cpu graph: an event record recorded in a graph ran outside a replay of that graph");
    }
    events->captures[index].get()->stamp();
  }
};

/// The one stream task of a replay: publishes the draw positions, the event records and the numbers,
/// and runs the recorded tasks in order. A task that throws does not stop the others; the first
/// failure is rethrown at the end (the stream then reports it at its next synchronization, as for any task).
/// Made to cost a replay of a small graph no more than the eager enqueue it replaces: the body is
/// borrowed, not shared (its Graph outlives every replay it enqueued, Graph::release; a replay recorded
/// into another capture shares it through records->owner), and one draw's position is held in place —
/// no atomic operation and no allocation on either thread.
struct GraphReplayTask {
  using Position = std::pair<std::uint64_t, std::uint64_t>;
  GraphBody* body;
  Position first_position{};                 // the draw's, when the graph has one
  std::unique_ptr<Position[]> positions;     // all of them, when it has more
  std::unique_ptr<ReplayRecords> records;    // null when the graph records no event and numbers nothing

  void operator()() {
    // Recorded into another capture: this replay's numbers are the outer replay's (published now).
    CountBases nested_numbers;
    if (records && !records->nested.empty()) {
      nested_numbers.reserve(records->nested.size());
      for (const CountSlot slot : records->nested) nested_numbers.push_back(replay_number(slot));
    }
    const CountBases* numbers = !records ? nullptr : records->nested.empty() ? &records->numbers : &nested_numbers;
    const DrawPositions draws{positions ? positions.get() : &first_position, body->draws.size()};
    struct Publish {
      const DrawPositions* previous_positions;
      const ReplayRecords* previous_events;
      const CountBases* previous_numbers;
      Publish(const DrawPositions* p, const ReplayRecords* e, const CountBases* n)
          : previous_positions(std::exchange(replay_positions(), p)),
            previous_events(std::exchange(replay_events(), e)),
            previous_numbers(std::exchange(replay_count_bases(), n)) {}
      Publish(const Publish&) = delete;
      Publish& operator=(const Publish&) = delete;
      ~Publish() {
        replay_positions() = previous_positions;
        replay_events() = previous_events;
        replay_count_bases() = previous_numbers;
      }
    } scope(&draws, records.get(), numbers);
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
  [[nodiscard]] std::unique_ptr<ReplayRecords> task_records() const {
    auto records = std::make_unique<ReplayRecords>();
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
