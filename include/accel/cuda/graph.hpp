// accel/cuda/graph.hpp — the CUDA backend's graphs (accel::GraphApi): stream capture, instantiate,
// launch, with a private memory pool — torch.cuda.CUDAGraph.
//
//   accel::cuda::Graph         owning, move-only: cudaGraph_t + cudaGraphExec_t, the graph's memory
//                              pool, and the random fills recorded in it
//   accel::cuda::GraphCapture  the guard capture_to_graph returns: cudaStreamBeginCapture on
//                              construction, cudaStreamEndCapture + cudaGraphInstantiate on end()
//   accel::cuda::Graphs        create_graph / capture_to_graph / replay_graph / graph_pool_handle /
//                              is_current_stream_capturing (backend/graphs.hpp), inherited by accel::CudaBackend
//
// While the capture lives, the caching allocator gives allocations on the capturing stream from the
// graph's private pool (its new segments are cudaMalloc'ed in relaxed capture mode, as torch does), so
// their addresses stay valid for every replay. reset() and the destructor destroy the graph (CUDA
// frees an executable graph in flight once it completes) and release the pool; its segments are
// cudaFree'd — which waits for the device — once free.
//
// Random fills captured into the graph read (seed, offset) from a slot in device memory (the graph's
// pool); replay() reserves the draws from their generators (random/graph_draws.hpp) and writes the
// slots with one cudaMemcpyAsync per 256 draws on the replay stream before cudaGraphLaunch. A graph
// without random fills replays with cudaGraphLaunch alone.
//
// Illegal calls during a capture are refused before CUDA sees them (cuda/detail/capture_registry.hpp)
// with an InvalidStateError naming them, and invalidate the capture; a call CUDA refuses itself (a raw
// cudaMalloc in global mode) invalidates it too, and end() says so.
// Including this header in a build without CUDA (no ACCEL_HAS_CUDA) is a compile-time #error.
#pragma once

#include <accel/backend/graphs.hpp>
#include <accel/core/capture_mode.hpp>
#include <accel/core/error.hpp>
#include <accel/core/graph_pool_id.hpp>
#include <accel/cuda/detail/capture_registry.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/detail/event_pool.hpp>
#include <accel/cuda/detail/host_task.hpp>
#include <accel/cuda/device.hpp>
#include <accel/cuda/error.hpp>
#include <accel/cuda/memory.hpp>
#include <accel/cuda/stream.hpp>
#include <accel/random/graph_draws.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace accel::cuda {

namespace detail {

[[nodiscard]] constexpr cudaStreamCaptureMode native_capture_mode(CaptureMode mode) noexcept {
  switch (mode) {
    case CaptureMode::per_thread: return cudaStreamCaptureModeThreadLocal;
    case CaptureMode::relaxed: return cudaStreamCaptureModeRelaxed;
    case CaptureMode::global: break;
  }
  return cudaStreamCaptureModeGlobal;
}

}  // namespace detail

class GraphCapture;

/// A captured CUDA graph, instantiated and ready to launch. Move-only; empty until a capture ends.
class Graph {
 public:
  Graph() noexcept = default;
  /// A capture in progress into `other` goes on into this graph (its guard follows the move).
  Graph(Graph&& other) noexcept { take(other); }
  /// Abandons a capture in progress into this graph (as the destructor does), then takes `other`'s.
  Graph& operator=(Graph&& other) noexcept {
    if (this != &other) {
      abandon_capture();
      release();
      take(other);
    }
    return *this;
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  /// Abandons a capture in progress into the graph (cudaStreamEndCapture, the captured work destroyed,
  /// the guard has nothing left to end), destroys the graph and releases the pool. Never throws.
  ~Graph() {
    abandon_capture();
    release();
  }

  [[nodiscard]] bool captured() const noexcept { return exec_ != nullptr; }
  /// True while a capture into the graph is in progress (its GraphCapture lives and has not ended).
  [[nodiscard]] bool capturing() const noexcept { return capture_ != nullptr; }
  [[nodiscard]] GraphPoolId pool() const noexcept { return pool_; }
  [[nodiscard]] int device_index() const noexcept { return device_; }
  /// Random fills recorded (each replay reserves their offsets).
  [[nodiscard]] std::size_t random_draws() const noexcept { return draws_.size(); }
  /// Nodes of the captured graph (cudaGraphGetNodes), 0 when empty.
  [[nodiscard]] std::size_t size() const {
    if (graph_ == nullptr) return 0;
    std::size_t count = 0;
    ACCEL_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &count));
    return count;
  }
  /// The native handles, for CUDA calls (null when empty).
  [[nodiscard]] cudaGraph_t native_graph() const noexcept { return graph_; }
  [[nodiscard]] cudaGraphExec_t native_exec() const noexcept { return exec_; }

  /// Launches the graph on the current stream of its device.
  void replay() {
    check_replayable();
    replay(Streams::current_stream(device_));
  }

  /// Launches the graph on `stream` (of the graph's device). Asynchronous; launches of one graph run
  /// one after another (CUDA orders them).
  void replay(StreamRef stream) {
    check_replayable();
    stream.check_valid("Graph::replay");
    if (stream.device_index() != device_) {
      throw InvalidArgumentError("cuda Graph::replay: the graph was captured on cuda:" + std::to_string(device_) +
                                 " but " + stream.name() + " belongs to cuda:" + std::to_string(stream.device_index()));
    }
    const detail::LegacyStreamScope scope(stream.get(), device_);
    if (!draws_.empty()) write_draw_states(stream);
    ACCEL_CUDA_CHECK(cudaGraphLaunch(exec_, stream.get()));
    if (!host_tasks_.empty()) {  // release() waits for this before deleting the host tasks
      if (last_replay_.get() == nullptr) last_replay_ = detail::PooledEvent(detail::event_pool(device_).acquire(), device_);
      ACCEL_CUDA_CHECK(cudaEventRecord(last_replay_.get(), stream.get()));
    }
  }

  /// Destroys the captured graph and releases the memory pool; the graph can be captured again.
  void reset() {
    if (capturing()) throw InvalidStateError("cuda Graph::reset while a capture into the graph is in progress");
    release();
  }

 private:
  friend class GraphCapture;

  void check_replayable() const {
    if (capturing()) throw InvalidStateError("cuda Graph::replay while a capture into the graph is in progress");
    if (exec_ == nullptr) {
      throw InvalidStateError("cuda Graph::replay: the graph holds no captured work (capture it with capture_to_graph "
                              "first; a failed capture or reset() leaves it empty)");
    }
  }

  // Reserves this replay's draws and writes their (seed, offset) slots on the stream. The staging vector
  // is pageable: cudaMemcpyAsync copies it before returning, so it may go out of scope at once.
  void write_draw_states(StreamRef stream) {
    const auto positions = reserve_graph_draws(draws_.data(), draws_.size());
    constexpr std::size_t per_chunk = detail::CaptureRecord::draws_per_chunk;
    std::vector<std::uint64_t> staging(2 * per_chunk);
    for (std::size_t chunk = 0; chunk * per_chunk < positions.size(); ++chunk) {
      const std::size_t first = chunk * per_chunk;
      const std::size_t count = std::min(per_chunk, positions.size() - first);
      for (std::size_t i = 0; i < count; ++i) {
        staging[2 * i] = positions[first + i].first;
        staging[2 * i + 1] = positions[first + i].second;
      }
      ACCEL_CUDA_CHECK(cudaMemcpyAsync(chunks_[chunk], staging.data(), count * 2 * sizeof(std::uint64_t),
                                       cudaMemcpyHostToDevice, stream.get()));
    }
  }

  void take(Graph& other) noexcept;
  void abandon_capture() noexcept;

  void release() noexcept {
    if (last_replay_.get() != nullptr) {  // a replay in flight still calls the host tasks
      (void)ACCEL_CUDA_CHECK_NOTHROW(cudaEventSynchronize(last_replay_.get()));
      last_replay_.reset();
    }
    host_tasks_.clear();
    if (exec_ != nullptr) (void)ACCEL_CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(std::exchange(exec_, nullptr)));
    if (graph_ != nullptr) (void)ACCEL_CUDA_CHECK_NOTHROW(cudaGraphDestroy(std::exchange(graph_, nullptr)));
    draws_.clear();
    if (device_ >= 0) {
      try {
        Memory::DeviceAllocator& allocator = Memory::allocator(device_);
        for (std::uint64_t* chunk : chunks_) (void)allocator.try_free(chunk);
        if (pool_) allocator.release_pool(pool_.id);
      } catch (...) {  // the device is gone: nothing left to give back
      }
    }
    chunks_.clear();
    pool_ = {};
    device_ = -1;
  }

  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  GraphPoolId pool_{};
  int device_ = -1;
  GraphCapture* capture_ = nullptr;  // the guard of the capture into this graph in progress
  std::vector<GraphDraw> draws_;
  std::vector<std::uint64_t*> chunks_;  // (seed, offset) slots of the draws, in the graph's pool
  std::vector<std::unique_ptr<detail::HostTaskBase>> host_tasks_;  // enqueue()d during the capture
  detail::PooledEvent last_replay_;  // recorded after each replay of a graph with host tasks
};

/// While it lives, work enqueued on its stream is captured into its graph. Move-only.
class GraphCapture {
 public:
  GraphCapture(Graph& graph, StreamRef stream, GraphPoolId pool = {}, CaptureMode mode = CaptureMode::global)
      : graph_(&graph), stream_(stream) {
    stream.check_valid("capture_to_graph");
    if (stream.is_default()) {
      throw InvalidArgumentError("capture_to_graph: " + stream.name() +
                                 " is the legacy default stream, which CUDA cannot capture; capture on a created "
                                 "stream (cuda::Stream s; capture_to_graph(g, s))");
    }
    if (graph.capturing()) throw InvalidStateError("capture_to_graph: a capture into this graph is already in progress");
    if (stream.is_capturing()) {
      throw InvalidStateError("capture_to_graph: " + stream.name() +
                              " is already capturing a graph (one capture per stream at a time; end that one first)");
    }
    if (graph.captured()) {
      throw InvalidStateError("capture_to_graph: the graph already holds a captured graph; reset() it or create a "
                              "new one");
    }
    const int device = stream.device_index();
    const GraphPoolId use = pool ? pool : GraphPoolId::make();
    Memory::DeviceAllocator& allocator = Memory::allocator(device);
    allocator.begin_allocate_to_pool(use.id, stream.id());  // retains the pool for the graph
    record_ = std::make_shared<detail::CaptureRecord>(device, stream.id(), mode);
    try {
      detail::captures().add(record_);
      const Devices::DeviceGuard guard(device);
      ACCEL_CUDA_CHECK(cudaStreamBeginCapture(stream.get(), detail::native_capture_mode(mode)));
    } catch (...) {
      detail::captures().remove(record_.get());
      allocator.end_allocate_to_pool(use.id, stream.id());
      allocator.release_pool(use.id);
      throw;
    }
    graph.release();  // an empty graph that held a pool from a failed capture lets it go
    graph.pool_ = use;
    graph.device_ = device;
    graph.capture_ = this;
  }
  GraphCapture(GraphCapture&& other) noexcept
      : graph_(std::exchange(other.graph_, nullptr)),
        stream_(other.stream_),
        record_(std::move(other.record_)),
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

  /// Ends the capture and instantiates the graph. Throws InvalidStateError naming the illegal call when
  /// the capture was invalidated (the graph then stays empty), CudaError when instantiation fails.
  /// Calling it again does nothing, as does calling it after the graph was destroyed or assigned over
  /// (which abandoned the capture).
  void end() { finish(false); }

  [[nodiscard]] bool active() const noexcept { return graph_ != nullptr; }

 private:
  friend class Graph;

  void finish(bool abandon) {
    if (graph_ == nullptr) return;
    Graph& graph = *std::exchange(graph_, nullptr);
    graph.capture_ = nullptr;
    const int device = stream_.device_index();
    detail::captures().remove(record_.get());
    const Devices::DeviceGuard guard(device);
    cudaGraph_t captured = nullptr;
    const cudaError_t status = cudaStreamEndCapture(stream_.get(), &captured);
    if (status != cudaSuccess) (void)cudaGetLastError();
    Memory::DeviceAllocator& allocator = Memory::allocator(device);
    allocator.end_allocate_to_pool(graph.pool_.id, stream_.id());
    graph.draws_ = record_->take_draws();
    graph.chunks_ = record_->take_chunks();  // freed with the graph, success or not
    graph.host_tasks_ = record_->take_host_tasks();
    if (abandon) {
      if (captured != nullptr) (void)cudaGraphDestroy(captured);
      graph.draws_.clear();
      return;
    }
    std::string failure = record_->failure();
    if (failure.empty() && status != cudaSuccess) {
      failure = std::string(error_name(status)) +
                " from cudaStreamEndCapture: a call illegal during capture (a raw cudaMalloc, a synchronize or "
                "query in global mode, work from another stream joined incorrectly) invalidated it";
    }
    if (!failure.empty()) {
      if (captured != nullptr) (void)cudaGraphDestroy(captured);
      graph.draws_.clear();
      throw InvalidStateError("capture_to_graph on " + stream_.name() + " failed: " + failure +
                              "; the graph stays empty (its pool is released with it)");
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t instantiated = cudaGraphInstantiate(&exec, captured, 0);
    if (instantiated != cudaSuccess) {
      (void)cudaGetLastError();
      (void)cudaGraphDestroy(captured);
      graph.draws_.clear();
      detail::throw_error(instantiated, "cudaGraphInstantiate(&exec, graph, 0)", source_location::current());
    }
    graph.graph_ = captured;
    graph.exec_ = exec;
  }

  Graph* graph_;
  StreamRef stream_;
  std::shared_ptr<detail::CaptureRecord> record_;
  int exceptions_at_start_ = std::uncaught_exceptions();
};

inline void Graph::take(Graph& other) noexcept {
  graph_ = std::exchange(other.graph_, nullptr);
  exec_ = std::exchange(other.exec_, nullptr);
  pool_ = std::exchange(other.pool_, {});
  device_ = std::exchange(other.device_, -1);
  draws_ = std::move(other.draws_);
  chunks_ = std::move(other.chunks_);
  host_tasks_ = std::move(other.host_tasks_);
  last_replay_ = std::move(other.last_replay_);
  capture_ = std::exchange(other.capture_, nullptr);
  if (capture_ != nullptr) capture_->graph_ = this;  // the capture goes on into this graph
}

// Ending an abandoned capture destroys what CUDA captured; the catch keeps the destructor noexcept
// whatever the driver says.
inline void Graph::abandon_capture() noexcept {
  if (capture_ == nullptr) return;
  try {
    capture_->finish(/*abandon=*/true);
  } catch (...) {
  }
  capture_ = nullptr;
}

/// GraphApi for accel::CudaBackend (backend/graphs.hpp), over the graph types above.
using Graphs = accel::Graphs<Graph, GraphCapture, Streams>;

namespace detail {

/// The device address of a (seed, offset) slot for a random fill captured on `stream`, or null when the
/// stream is not capturing (the fill then uses its reserved offsets directly). Used by cuda::Random.
[[nodiscard]] inline std::uint64_t* capture_random_draw(StreamRef stream, Generator& generator, std::uint64_t n,
                                                        bool wide) {
  const auto record = captures().find(stream.id());
  if (!record) return nullptr;
  return record->add_draw(generator, n, wide, [&] {
    return Memory::allocator(stream.device_index()).allocate(CaptureRecord::chunk_bytes, stream);
  });
}

}  // namespace detail

}  // namespace accel::cuda
