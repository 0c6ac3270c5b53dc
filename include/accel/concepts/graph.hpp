// accel/concepts/graph.hpp — GraphApi: capture the work enqueued on a stream once, replay it cheaply.
//
// DeepSpeed's create_graph / capture_to_graph / replay_graph over torch.cuda.CUDAGraph, on every
// backend. For `const B b`, B::Graph& g, StreamRef s, GraphPoolId pool, CaptureMode mode:
//   b.create_graph() -> B::Graph       an empty graph (move-only)
//   b.capture_to_graph(g, s [, pool [, mode]]) -> B::GraphCapture
//                     a guard: work enqueued on s while it lives is recorded into g, not run.
//                     capture.end() ends it and reports a failed capture (InvalidStateError, g stays
//                     empty); the destructor ends it too, quietly. s must be a created stream (not
//                     the default stream); g must be empty. Allocations on s meanwhile come from g's
//                     private memory pool, or from `pool` shared with other graphs.
//   b.capture_to_graph(g) -> B::GraphCapture   on the current stream
//   b.replay_graph(g)   runs the recorded work again on the current stream of g's device;
//   b.replay_graph(g, s) on s. Asynchronous; replays of one graph run one after another.
//   b.graph_pool_handle() -> GraphPoolId       a pool to share between graphs
//   g.reset()          drops the recorded work (after replays in flight finished) and releases the pool
//   g.captured() -> bool, g.capturing() -> bool (a capture into g is in progress), g.pool() -> GraphPoolId,
//   s.is_capturing() -> bool
//   b.is_current_stream_capturing() -> bool   the calling thread's current stream is capturing
//                                             (torch.cuda.is_current_stream_capturing)
// A graph moved while a capture into it is in progress takes the capture along (the guard follows it);
// destroyed or assigned over meanwhile, it abandons the capture: the stream stops capturing, the work
// recorded so far is dropped, and the guard has nothing left to end.
// Random numbers drawn inside a graph are fresh on every replay and equal to what the same calls
// would draw eagerly at that point: each replay reserves the generator offsets the recorded fills use.
// Illegal during capture (an error naming the call, which also invalidates the capture): s.synchronize(),
// s.query(), and per CaptureMode a device synchronize.
#pragma once

#include <accel/core/capture_mode.hpp>
#include <accel/core/graph_pool_id.hpp>

#include <concepts>

namespace accel {

template <class B>
concept GraphApi =
    std::movable<typename B::Graph> && !std::copyable<typename B::Graph> &&
    !std::copyable<typename B::GraphCapture> &&
    requires(const B b, typename B::Graph& g, const typename B::Graph& cg, typename B::StreamRef s,
             typename B::GraphCapture& capture, GraphPoolId pool, CaptureMode mode) {
      { b.create_graph() } -> std::same_as<typename B::Graph>;
      { b.capture_to_graph(g) } -> std::same_as<typename B::GraphCapture>;
      { b.capture_to_graph(g, s) } -> std::same_as<typename B::GraphCapture>;
      { b.capture_to_graph(g, s, pool) } -> std::same_as<typename B::GraphCapture>;
      { b.capture_to_graph(g, s, pool, mode) } -> std::same_as<typename B::GraphCapture>;
      capture.end();
      b.replay_graph(g);
      b.replay_graph(g, s);
      { b.graph_pool_handle() } -> std::same_as<GraphPoolId>;
      g.reset();
      { cg.captured() } -> std::same_as<bool>;
      { cg.capturing() } -> std::same_as<bool>;
      { cg.pool() } -> std::same_as<GraphPoolId>;
      { s.is_capturing() } -> std::same_as<bool>;
      { b.is_current_stream_capturing() } -> std::same_as<bool>;  // accel::Graphs (backend/graphs.hpp) has it
    };

}  // namespace accel
