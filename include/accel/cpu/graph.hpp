// accel/cpu/graph.hpp — the CPU backend's graphs (accel::GraphApi): record a stream's tasks once,
// replay them as one task.
//
//   accel::cpu::Graph         owning, move-only: the recorded tasks, the draws of random fills, the
//                             graph's memory pool
//   accel::cpu::GraphCapture  the guard capture_to_graph returns; while it lives, tasks enqueued on
//                             the stream are recorded (StreamState::submit diverts them) and
//                             allocations on the stream come from the graph's pool
//   accel::cpu::Graphs        create_graph / capture_to_graph / replay_graph / graph_pool_handle /
//                             is_current_stream_capturing (backend/graphs.hpp), inherited by accel::CpuBackend
//
// A replay is one task on the replay stream that runs the recorded tasks in order, so its cost does
// not grow with what the tasks captured. Replays of one graph are ordered: a replay on another stream
// first waits for the previous one (as launches of one cudaGraphExec_t are). The recorded callables
// are invoked once per replay and must stay valid (what they point to) for as long as the graph may
// be replayed — the same rule as for the pointers a CUDA graph's kernels captured.
//
// Memory: while the capture lives, allocations on the capturing stream come from the graph's private
// pool of the device's caching allocator (or from the pool given to capture_to_graph); they keep their
// addresses for every replay. reset() and the destructor wait for replays in flight, then release the
// pool: its segments go back to the system once free (empty_cache for the ones already free).
// Events recorded on the capturing stream follow CUDA (accel/cpu/event.hpp): an ordinary event marks a
// point of the capture (only the capturing stream may wait on it), an external one
// (EventOptions::external) becomes a step that every replay records — the graph shares the event's
// record state (cpu/detail/graph_replay.hpp), so it may outlive the Event object.
// The guard and the graph point at each other while the capture lasts: a Graph moved meanwhile takes the
// capture along, one destroyed or assigned over abandons it (the stream stops capturing, the recorded work
// is dropped), and a refused capture retains nothing.
// Limits (CUDA allows them): a replay recorded into another capture may neither draw random numbers
// nor record events (NotSupportedError), and a wait from another stream on an event recorded during
// the capture is NotSupportedError (CUDA would capture that stream into the same graph).
#pragma once

#include <accel/backend/graphs.hpp>
#include <accel/core/capture_mode.hpp>
#include <accel/core/error.hpp>
#include <accel/core/graph_pool_id.hpp>
#include <accel/cpu/detail/graph_recording.hpp>
#include <accel/cpu/detail/graph_replay.hpp>
#include <accel/cpu/detail/stream_state.hpp>
#include <accel/cpu/device.hpp>
#include <accel/cpu/memory.hpp>
#include <accel/cpu/stream.hpp>
#include <accel/random/graph_draws.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace accel::cpu {

class GraphCapture;

/// A captured sequence of CPU stream tasks. Move-only; empty until a capture ends successfully.
class Graph {
 public:
  Graph() noexcept = default;
  /// A capture in progress into `other` goes on into this graph (its guard follows the move).
  Graph(Graph&& other) noexcept;
  /// Abandons a capture in progress into this graph (as the destructor does), then takes `other`'s.
  Graph& operator=(Graph&& other) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  /// Abandons a capture in progress into the graph (the stream stops capturing, the recorded work is
  /// dropped, the guard has nothing left to end), waits for replays in flight, then releases the pool.
  /// Never throws.
  ~Graph();

  /// True when a capture ended successfully and the graph can be replayed.
  [[nodiscard]] bool captured() const noexcept { return body_ != nullptr; }
  /// True while a capture into the graph is in progress (its GraphCapture lives and has not ended).
  [[nodiscard]] bool capturing() const noexcept { return capture_ != nullptr; }
  /// The memory pool the graph allocates from (its own unless a shared one was given); {} before any
  /// capture.
  [[nodiscard]] GraphPoolId pool() const noexcept { return pool_; }
  /// Recorded tasks (torch's graph nodes), 0 when empty.
  [[nodiscard]] std::size_t size() const noexcept { return body_ ? body_->tasks.size() : 0; }
  /// Random fills recorded (each replay reserves their offsets).
  [[nodiscard]] std::size_t random_draws() const noexcept { return body_ ? body_->draws.size() : 0; }
  /// The device it was captured on, -1 when empty.
  [[nodiscard]] int device_index() const noexcept { return device_; }

  /// Replays on the current stream of the graph's device.
  void replay() {
    check_replayable("replay");
    replay(Streams::current_stream(device_));
  }

  /// Replays on `stream` (of the graph's device): one task that runs the recorded ones in order, after
  /// the previous replay of this graph. Asynchronous, like any enqueue; the random offsets and the
  /// numbers the recorded work takes (a communicator's operation numbers) are taken now, in call order.
  void replay(StreamRef stream) {
    check_replayable("replay");
    detail::StreamState& s = stream.state("Graph::replay");
    if (s.device() != device_) {
      throw InvalidArgumentError("cpu Graph::replay: the graph was captured on cpu:" + std::to_string(device_) +
                                 " but " + s.name() + " belongs to cpu:" + std::to_string(s.device()));
    }
    if (s.is_capturing() && !body_->draws.empty()) {
      throw NotSupportedError("cpu Graph::replay into " + s.name() +
                              ", which is capturing: a replay recorded into another graph may not draw random "
                              "numbers on the CPU backend");
    }
    if (s.is_capturing() && !body_->event_records.empty()) {
      throw NotSupportedError("cpu Graph::replay into " + s.name() +
                              ", which is capturing: a replay recorded into another graph may not record events "
                              "on the CPU backend");
    }
    // What can still refuse the replay comes before what it consumes (the counters' numbers, the
    // generators' offsets), so a refused replay consumes nothing: first the wait for the previous one
    // (a wait cycle throws), then the random draws (an offset overflow throws), then the counts.
    if (last_replay_.stream() != nullptr && last_replay_.stream() != &s && !last_replay_.done()) {
      s.wait_for(last_replay_);  // replays of one graph run one after another
    }
    const std::size_t draws = body_->draws.size();
    std::unique_ptr<detail::GraphReplayTask::Position[]> positions;
    detail::GraphReplayTask::Position first_position{};
    if (draws > 1) positions = std::make_unique<detail::GraphReplayTask::Position[]>(draws);
    reserve_graph_draws(body_->draws.data(), draws, draws > 1 ? positions.get() : &first_position);
    std::optional<detail::ReplayEventBatch> events;  // this replay's records of the graph's external events
    if (!body_->event_records.empty()) events.emplace(*body_);
    std::unique_ptr<detail::ReplayRecords> records = events ? events->task_records() : nullptr;
    if (!body_->counts.empty()) {
      // The numbers the recorded work takes from its counters: now, in host order, or, recorded into
      // another capture, at each replay of that graph.
      if (!records) records = std::make_unique<detail::ReplayRecords>();
      const std::shared_ptr<detail::GraphRecording> outer = s.is_capturing() ? s.capture() : nullptr;
      if (outer) {
        for (const detail::GraphCount& c : body_->counts) {
          records->nested.push_back(outer->add_count(c.counter, c.count));
        }
      } else {
        records->numbers = detail::take_counts(*body_);
      }
    }
    if (s.is_capturing()) {  // the outer graph may be replayed after this one is gone
      if (!records) records = std::make_unique<detail::ReplayRecords>();
      records->owner = body_;
    }
    detail::GraphReplayTask task{body_.get(), first_position, std::move(positions), std::move(records)};
    const std::uint64_t ticket = s.submit(detail::StreamTask(std::move(task)));
    if (events) events->publish(s, ticket);  // the events are recorded: they complete with this replay
    if (!s.is_default() && !s.is_capturing()) last_replay_.move_to(s, ticket);
  }

  /// Waits for replays in flight, drops the recorded work and releases the memory pool; the graph can
  /// be captured again. InvalidStateError while a capture into it is in progress.
  void reset() {
    if (capturing()) throw InvalidStateError("cpu Graph::reset while a capture into the graph is in progress");
    last_replay_.wait();
    release();
  }

 private:
  friend class GraphCapture;

  void check_replayable(const char* what) const {
    if (capturing()) {
      throw InvalidStateError(std::string("cpu Graph::") + what + " while a capture into the graph is in progress");
    }
    if (!body_) {
      throw InvalidStateError(std::string("cpu Graph::") + what +
                              ": the graph holds no captured work (capture it with capture_to_graph first; a "
                              "failed capture or reset() leaves it empty)");
    }
  }

  // The replays enqueued borrow body_ (GraphReplayTask): it goes only once the last of them ran. Replays
  // of one graph run one after another, so the last one's end is every one's.
  void release() noexcept {
    bool waited = true;
    try {
      last_replay_.wait();
    } catch (...) {  // destroyed from a task of the replay stream: nothing to wait for safely
      waited = false;
    }
    if (!waited && body_) {
      // The body goes with a task queued behind the replays instead; failing that (a forked child's
      // stream), it is kept: never freed under a replay that may still run.
      try {
        last_replay_.stream()->submit(detail::StreamTask([body = std::move(body_)] {}));
      } catch (...) {
        (void)new std::shared_ptr<detail::GraphBody>(std::move(body_));
      }
    }
    last_replay_ = detail::StreamPoint();
    body_.reset();
    if (pool_ && device_ >= 0) {
      if (HostCachingAllocator* a = detail::existing_host_allocator(device_)) a->release_pool(pool_.id);
    }
    pool_ = {};
    device_ = -1;
  }

  void take(Graph& other) noexcept;
  void abandon_capture() noexcept;

  std::shared_ptr<detail::GraphBody> body_;
  GraphPoolId pool_{};
  int device_ = -1;
  detail::StreamPoint last_replay_;
  GraphCapture* capture_ = nullptr;  // the guard of the capture into this graph in progress
};

/// While it lives, work enqueued on its stream is recorded into its graph. Move-only.
class GraphCapture {
 public:
  GraphCapture(Graph& graph, StreamRef stream, GraphPoolId pool = {}, CaptureMode mode = CaptureMode::global)
      : graph_(&graph), stream_(&stream.state("capture_to_graph")) {
    detail::StreamState& s = *stream_;
    if (s.is_default()) {
      throw InvalidArgumentError("capture_to_graph: " + s.name() +
                                 " is a default stream, which runs work at once and cannot capture; capture on a "
                                 "created stream (cpu::Stream s; capture_to_graph(g, s))");
    }
    if (graph.capturing()) throw InvalidStateError("capture_to_graph: a capture into this graph is already in progress");
    if (s.is_capturing()) {
      throw InvalidStateError("capture_to_graph: " + s.name() +
                              " is already capturing a graph (one capture per stream at a time; end that one first)");
    }
    if (graph.captured()) {
      throw InvalidStateError("capture_to_graph: the graph already holds a captured graph; reset() it or create a "
                              "new one");
    }
    const GraphPoolId use = pool ? pool : GraphPoolId::make();
    HostCachingAllocator& allocator = Memory::allocator(s.device());
    allocator.begin_allocate_to_pool(use.id, s.id());  // retains the pool for the graph
    try {
      s.begin_capture(std::make_shared<detail::GraphRecording>(s.device(), mode));
    } catch (...) {
      allocator.end_allocate_to_pool(use.id, s.id());
      allocator.release_pool(use.id);
      throw;
    }
    graph.release();  // an empty graph that held a pool from a failed capture lets it go
    graph.pool_ = use;
    graph.device_ = s.device();
    graph.capture_ = this;
    s.retain();
  }
  GraphCapture(GraphCapture&& other) noexcept
      : graph_(std::exchange(other.graph_, nullptr)),
        stream_(std::exchange(other.stream_, nullptr)),
        exceptions_at_start_(other.exceptions_at_start_) {
    if (graph_ != nullptr) graph_->capture_ = this;  // the graph's end of the capture follows the guard
  }
  GraphCapture& operator=(GraphCapture&&) = delete;
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;

  /// Ends the capture quietly: on success the graph is replayable, otherwise it stays empty (use end()
  /// to hear why). When an exception is unwinding through the capture's scope, the capture is
  /// abandoned: the graph stays empty. Never throws.
  ~GraphCapture() {
    try {
      finish(std::uncaught_exceptions() > exceptions_at_start_);
    } catch (...) {  // the failure leaves the graph empty, which replay() reports
    }
  }

  /// Ends the capture. Throws InvalidStateError naming the illegal call when the capture was
  /// invalidated; the graph then stays empty. Calling it again does nothing, as does calling it after
  /// the graph was destroyed or assigned over (which abandoned the capture).
  void end() { finish(false); }

  [[nodiscard]] bool active() const noexcept { return stream_ != nullptr; }

 private:
  friend class Graph;

  void finish(bool abandon) {
    if (stream_ == nullptr) return;
    detail::StreamState* s = std::exchange(stream_, nullptr);
    Graph& graph = *std::exchange(graph_, nullptr);
    graph.capture_ = nullptr;
    const std::shared_ptr<detail::GraphRecording> recording = s->end_capture();
    Memory::allocator(s->device()).end_allocate_to_pool(graph.pool_.id, s->id());
    const int device = s->device();
    const std::string name = s->name();
    s->release();
    if (abandon) return;
    const std::string failure = recording ? recording->failure() : std::string("the capture was lost");
    if (!failure.empty()) {
      throw InvalidStateError("capture_to_graph on " + name + " failed: " + failure +
                              "; the graph stays empty (its pool is released with it)");
    }
    graph.body_ = recording->take_body();
    graph.device_ = device;
  }

  Graph* graph_;
  detail::StreamState* stream_;
  int exceptions_at_start_ = std::uncaught_exceptions();
};

inline Graph::Graph(Graph&& other) noexcept { take(other); }

inline Graph& Graph::operator=(Graph&& other) noexcept {
  if (this != &other) {
    abandon_capture();
    release();
    take(other);
  }
  return *this;
}

inline Graph::~Graph() {
  abandon_capture();
  release();
}

inline void Graph::take(Graph& other) noexcept {
  body_ = std::move(other.body_);
  pool_ = std::exchange(other.pool_, {});
  device_ = std::exchange(other.device_, -1);
  last_replay_ = std::move(other.last_replay_);
  capture_ = std::exchange(other.capture_, nullptr);
  if (capture_ != nullptr) capture_->graph_ = this;  // the capture goes on into this graph
}

// Ending an abandoned capture touches only the stream and the allocator, neither of which throws there;
// the catch keeps the destructor noexcept whatever happens.
inline void Graph::abandon_capture() noexcept {
  if (capture_ == nullptr) return;
  try {
    capture_->finish(/*abandon=*/true);
  } catch (...) {
  }
  capture_ = nullptr;
}

/// GraphApi for accel::CpuBackend (backend/graphs.hpp), over the graph types above.
using Graphs = accel::Graphs<Graph, GraphCapture, Streams>;

}  // namespace accel::cpu
