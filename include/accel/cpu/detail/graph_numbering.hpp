// accel/cpu/detail/graph_numbering.hpp — numbers that work enqueued on a CPU stream takes from a
// counter of its own, in host order whether the stream runs the work or captures it into a graph.
//
// A communicator numbers its operations (their MPI tags come from the numbers): eagerly the number is
// taken when the operation is enqueued. Taking it when a replayed operation runs instead would make it
// depend on thread timing — an operation enqueued after a replay could take its number before or after
// the replay's own operations, differently on each rank. So while the stream captures, the capture
// records the count (GraphRecording::add_count) and each replay takes the graph's numbers when it is
// enqueued (Graph::replay); the recorded task reads its number with replay_number(slot). Every rank
// runs the same host program, so every rank gives every operation the same number. Internal to the
// CPU backend; accel::comm's MPI engine uses it.
#pragma once

#include <accel/cpu/detail/graph_recording.hpp>
#include <accel/cpu/detail/stream_state.hpp>
#include <accel/cpu/stream.hpp>

#include <atomic>
#include <cstdint>
#include <memory>

namespace accel::cpu::detail {

struct GraphNumbering {
  /// For work enqueued on `s` now: `counter`'s next number (>= 1), taken now, when `s` does not
  /// capture; while it captures, 0, and `slot` tells the recorded work where each replay's number is.
  [[nodiscard]] static std::uint64_t take(StreamRef s, const std::shared_ptr<std::atomic<std::uint64_t>>& counter,
                                          CountSlot& slot) {
    StreamState& state = s.state("GraphNumbering::take");
    if (state.is_capturing()) {
      if (const std::shared_ptr<GraphRecording> recording = state.capture()) {
        slot = recording->add_count(counter, 1);
        return 0;
      }
    }
    return counter->fetch_add(1, std::memory_order_relaxed) + 1;
  }
};

}  // namespace accel::cpu::detail
