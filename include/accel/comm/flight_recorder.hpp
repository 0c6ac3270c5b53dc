// accel/comm/flight_recorder.hpp — accel::comm::FlightRecorder: the last N operations of a
// communicator, written to stderr when one of them fails or times out (torch's NCCL flight recorder).
//
// Each communicator keeps one (capacity ACCEL_COMM_TRACE_SIZE, default 256; 0 keeps nothing). An
// entry is the operation's sequence number, kind, count, dtype, root or peer, stream, state (enqueued,
// started, completed, failed, timed out) and times. Comparing the dumps of all ranks shows who fell
// behind: the rank whose last collective is the earliest. Sequence numbers are per rank (sends and
// receives are numbered only on the ranks that issue them), so where ranks sent or received unequally
// the same collective has different numbers: match collectives by their order, or by the collective
// number a CommError carries (CommError::collective()). entries() and dump() are for users too.
// Thread-safe (one mutex; three short critical sections per operation, two for one run at once on an
// idle stream: it is recorded as started when enqueued).
#pragma once

#include <accel/comm/detail/op.hpp>
#include <accel/core/dtype.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace accel::comm {

class FlightRecorder {
 public:
  using clock = std::chrono::steady_clock;
  enum class State : std::uint8_t { enqueued, started, completed, failed, timed_out };

  struct Entry {
    std::uint64_t seq = 0;
    detail::OpKind kind = detail::OpKind::barrier;
    Dtype dtype = Dtype::uint8;
    ReduceOp reduce = ReduceOp::sum;
    std::size_t count = 0;
    int root = -1;                 ///< root or peer, -1 when none
    std::uint64_t stream_id = 0;
    bool in_graph = false;         ///< a replay of a captured graph ran it
    State state = State::enqueued;
    clock::time_point enqueued_at{}, started_at{}, ended_at{};

    [[nodiscard]] std::string_view op() const noexcept { return detail::name(kind); }
  };

  explicit FlightRecorder(std::size_t capacity = 256) : ring_(capacity) {}

  [[nodiscard]] std::size_t capacity() const noexcept { return ring_.size(); }

  /// `at`: when it was enqueued, where the caller has read the clock already (a clock read is ~30 ns of
  /// a ~1 µs small collective); now by default. `started`: it starts at once, on the thread that
  /// enqueued it (one write where enqueued() and started() would take two).
  void enqueued(std::uint64_t seq, const detail::Op& op, std::uint64_t stream_id, bool in_graph = false,
                clock::time_point at = {}, bool started = false) {
    if (ring_.empty()) return;
    Entry e;
    e.seq = seq;
    e.kind = op.kind;
    e.dtype = op.dtype;
    e.reduce = op.reduce;
    e.count = op.count;
    e.root = op.root;
    e.stream_id = stream_id;
    e.in_graph = in_graph;
    e.enqueued_at = at == clock::time_point{} ? clock::now() : at;
    if (started) {
      e.state = State::started;
      e.started_at = e.enqueued_at;
    }
    const std::lock_guard<std::mutex> lock(mutex_);
    ring_[seq % ring_.size()] = e;
    if (seq > newest_) newest_ = seq;
  }
  /// Returns the time it records (read even when the recorder is off: the engine times the operation
  /// from it).
  clock::time_point started(std::uint64_t seq) {
    const clock::time_point now = clock::now();
    set(seq, State::started, now);
    return now;
  }
  void started(std::uint64_t seq, clock::time_point at) { set(seq, State::started, at); }
  void completed(std::uint64_t seq) { set(seq, State::completed); }
  void failed(std::uint64_t seq, bool timed_out) { set(seq, timed_out ? State::timed_out : State::failed); }

  /// The kept entries, oldest first.
  [[nodiscard]] std::vector<Entry> entries() const {
    std::vector<Entry> out;
    const std::lock_guard<std::mutex> lock(mutex_);
    if (ring_.empty() || newest_ == 0) return out;
    const std::uint64_t n = ring_.size();
    const std::uint64_t first = newest_ >= n ? newest_ - n + 1 : 1;
    for (std::uint64_t s = first; s <= newest_; ++s) {
      const Entry& e = ring_[s % n];
      if (e.seq == s) out.push_back(e);
    }
    return out;
  }

  /// A readable table of entries(), under `header`; times relative to the newest entry's enqueue.
  [[nodiscard]] std::string dump(std::string_view header) const {
    const std::vector<Entry> list = entries();
    std::string out(header);
    out += "\n";
    if (ring_.empty()) return out + "  (the flight recorder is off: ACCEL_COMM_TRACE_SIZE=0)\n";
    if (list.empty()) return out + "  (no operation recorded)\n";
    out += "  last " + std::to_string(list.size()) + " operation(s), oldest first (capacity " +
           std::to_string(capacity()) + ", ACCEL_COMM_TRACE_SIZE):\n";
    const clock::time_point now = clock::now();
    for (const Entry& e : list) {
      char line[256];
      const auto ago = [&](clock::time_point t) {
        return t == clock::time_point{} ? -1.0 : std::chrono::duration<double>(now - t).count();
      };
      std::string what = std::string(e.op());
      if (detail::is_reduction(e.kind)) what += "(" + std::string(name(e.reduce)) + ")";
      std::string root;
      if (detail::has_root(e.kind)) root = " root " + std::to_string(e.root);
      if (detail::has_peer(e.kind)) root = (e.kind == detail::OpKind::send ? " to " : " from ") + std::to_string(e.root);
      std::snprintf(line, sizeof line, "  #%-6llu %-20s %10zu x %-8s%-10s stream %-4llu %-9s enqueued %.3f s ago",
                    static_cast<unsigned long long>(e.seq), what.c_str(), e.count,
                    std::string(name(e.dtype)).c_str(), root.c_str(), static_cast<unsigned long long>(e.stream_id),
                    state_name(e.state), ago(e.enqueued_at));
      out += line;
      if (e.started_at != clock::time_point{}) {
        const clock::time_point end = e.ended_at != clock::time_point{} ? e.ended_at : now;
        std::snprintf(line, sizeof line, ", ran %.6f s%s", std::chrono::duration<double>(end - e.started_at).count(),
                      e.ended_at == clock::time_point{} ? " so far" : "");
        out += line;
      }
      if (e.in_graph) out += " (graph replay)";
      out += "\n";
    }
    return out;
  }

  [[nodiscard]] static const char* state_name(State s) noexcept {
    switch (s) {
      case State::enqueued: return "enqueued";
      case State::started: return "started";
      case State::completed: return "completed";
      case State::failed: return "FAILED";
      case State::timed_out: return "TIMED OUT";
    }
    return "?";
  }

 private:
  void set(std::uint64_t seq, State state, clock::time_point at = {}) {
    if (ring_.empty()) return;
    const clock::time_point now = at == clock::time_point{} ? clock::now() : at;
    const std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = ring_[seq % ring_.size()];
    if (e.seq != seq) return;  // overwritten by a newer operation meanwhile
    e.state = state;
    if (state == State::started) {
      e.started_at = now;
    } else {
      e.ended_at = now;
    }
  }

  mutable std::mutex mutex_;
  std::vector<Entry> ring_;
  std::uint64_t newest_ = 0;
};

}  // namespace accel::comm
