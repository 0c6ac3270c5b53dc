// accel/backend/graphs.hpp — accel::Graphs<Graph, GraphCapture, Streams>: GraphApi (concepts/graph.hpp)
// over a backend's own graph types, one definition for every backend.
//
// A backend's graph folder file defines what differs — its Graph (replay(), replay(s)) and its
// GraphCapture guard (constructed from a graph, a stream, a pool and a mode) — and names this:
//   namespace accel::cpu { using Graphs = accel::Graphs<Graph, GraphCapture, Streams>; }
#pragma once

#include <accel/backend/detail/stream_ref_of.hpp>
#include <accel/core/capture_mode.hpp>
#include <accel/core/graph_pool_id.hpp>

namespace accel {

template <class Graph, class GraphCapture, class Streams>
struct Graphs {
  [[nodiscard]] static Graph create_graph() noexcept { return Graph{}; }

  /// Captures the work enqueued on the calling thread's current stream while the guard lives.
  [[nodiscard]] static GraphCapture capture_to_graph(Graph& graph) {
    return GraphCapture(graph, Streams::current_stream());
  }
  /// Captures the work enqueued on `stream` while the guard lives; allocations on it come from `pool`
  /// (a handle shared with other graphs) or, by default, from a pool of the graph's own.
  [[nodiscard]] static GraphCapture capture_to_graph(Graph& graph, detail::stream_ref_of<Streams> stream,
                                                     GraphPoolId pool = {}, CaptureMode mode = CaptureMode::global) {
    return GraphCapture(graph, stream, pool, mode);
  }

  static void replay_graph(Graph& graph) { graph.replay(); }
  static void replay_graph(Graph& graph, detail::stream_ref_of<Streams> stream) { graph.replay(stream); }

  /// A memory pool id to share between graphs (torch.cuda.graph_pool_handle()).
  [[nodiscard]] static GraphPoolId graph_pool_handle() noexcept { return GraphPoolId::make(); }

  /// Whether the calling thread's current stream is capturing (torch.cuda.is_current_stream_capturing).
  [[nodiscard]] static bool is_current_stream_capturing() { return Streams::current_stream().is_capturing(); }
};

}  // namespace accel
