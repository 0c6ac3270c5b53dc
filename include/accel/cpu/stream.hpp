// accel/cpu/stream.hpp — the CPU backend's streams: in-order queues of host tasks.
//
//   accel::cpu::StreamRef    non-owning, trivially copyable view (a pointer to the stream's state)
//   accel::cpu::Stream       owning, move-only; a created stream runs its tasks in order on its own
//                            worker thread; its destructor drains the queue and joins the worker
//   accel::cpu::StreamGuard  makes a stream (and its device) current for the calling thread
//   accel::cpu::Streams      current_stream / default_stream / set_stream / stream / synchronize,
//                            inherited by accel::CpuBackend
//
// Each device has a default stream, which runs tasks inline in the enqueuing thread: enqueue on it
// returns after the task ran. It lives for the whole process. Tasks enqueued from several threads on
// the default stream run in those threads, each in its own order.
//
// A task that throws does not stop the stream and is not thrown from enqueue: the next synchronize()
// of the stream, or of its device, throws accel::TaskError ("cpu:0 stream 7: task failed: <what>")
// holding the original exception, and clears it. A stream destroyed with an unreported failure
// writes it to stderr.
//
// After fork(), a child process inherits the parent's created streams without their worker threads:
// enqueue on them is an InvalidStateError, and so are synchronize(), query() and waits that ask about
// work that had not run at the fork (it runs only in the parent); work that had run is done. The
// default streams and the device synchronize work in the child (the latter over the child's streams).
//
// Thread safety: every operation may be called from any thread. A StreamRef must not outlive its
// Stream (like std::string_view); destroying a Stream that another thread still uses as its current
// stream is a programming error (the destroying thread's own current stream is reset to the default).
#pragma once

#include <accel/concepts/stream.hpp>
#include <accel/core/error.hpp>
#include <accel/core/source_location.hpp>
#include <accel/cpu/detail/event_capture.hpp>
#include <accel/cpu/detail/stream_registry.hpp>
#include <accel/cpu/detail/stream_state.hpp>
#include <accel/cpu/device.hpp>
#include <accel/memory/detail/stream_retirement.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>  // declares std::hash (specialised below) without <functional>'s cost
#include <type_traits>
#include <utility>

namespace accel::cpu {

class Event;
class Stream;
struct Streams;
template <class>
struct BasicRandom;
namespace detail {
struct GraphNumbering;
struct StreamInternals;
}

/// Non-owning view of a CPU stream. Cheap to copy; compares equal when it names the same stream.
class StreamRef {
 public:
  StreamRef(int) = delete;
  StreamRef(std::nullptr_t) = delete;

  /// Blocks until every task enqueued so far has run; throws TaskError if one of them threw since
  /// the last synchronization (the error is then cleared and the stream stays usable).
  void synchronize(source_location where = source_location::current()) const {
    state("synchronize").synchronize(where);
  }

  /// True when every task enqueued so far has run. Never blocks. InvalidStateError while the stream
  /// captures a graph (and the capture is invalidated), as cudaStreamQuery is illegal then.
  [[nodiscard]] bool query() const {
    const detail::StreamState& s = state("query");
    s.refuse_while_capturing("query");
    return s.query_checked("query()");
  }

  /// True while a graph capture records the work enqueued on this stream (capture_to_graph).
  [[nodiscard]] bool is_capturing() const { return state("is_capturing").is_capturing(); }

  /// Tasks enqueued on this stream after the call run after the work `event` captured. Never-recorded
  /// events impose nothing. On the default stream (which runs inline) the caller blocks instead.
  /// An event recorded during a graph capture (not external) may only be waited on by its capturing
  /// stream while the capture lasts; other waits on it throw (cpu/event.hpp).
  /// (A template only so that this header does not need event.hpp; E is always Event.)
  template <class E>
    requires std::same_as<E, Event>
  void wait(const E& event) const {
    if (const detail::EventCapture* capture = event.current()) detail::wait_for_event(state("wait"), *capture);
  }

  /// Tasks enqueued on this stream after the call run after everything enqueued on `other` so far.
  void wait_stream(StreamRef other) const { state("wait_stream").wait_for_stream(other.state("wait_stream")); }

  /// Runs `fn()` in stream order (a callable or a plain function pointer; its result is discarded).
  /// Callables of up to 48 bytes are stored without allocating.
  template <class F>
    requires std::invocable<std::decay_t<F>&> && std::constructible_from<std::decay_t<F>, F>
  void enqueue(F&& fn) const {
    detail::StreamState& s = state("enqueue");
    if constexpr (std::is_pointer_v<std::remove_cvref_t<F>> || std::is_member_pointer_v<std::remove_cvref_t<F>>) {
      if (fn == nullptr) throw InvalidArgumentError(s.name() + ": enqueue of a null function pointer");
    }
    s.submit(detail::StreamTask(std::forward<F>(fn)));
  }

  /// Runs `fn()` in stream order, like enqueue, but on the calling thread before returning when the
  /// stream is idle (everything enqueued so far has run, no graph capture, no other inline run), which
  /// saves the hand-off to the worker thread; on the default stream always. Returns true when `fn` ran
  /// here: then an exception from it reaches the caller (it is not a task failure of the stream), and
  /// work that other threads enqueue meanwhile runs after it. Otherwise `fn` is enqueued (recorded
  /// while capturing) and false returned. `fn` must not wait for this stream's own later work.
  template <class F>
    requires std::invocable<std::decay_t<F>&> && std::constructible_from<std::decay_t<F>, F>
  bool run_or_enqueue(F&& fn) const {
    detail::StreamState& s = state("run_or_enqueue");
    if (run_here(s, fn)) return true;
    s.submit(detail::StreamTask(std::forward<F>(fn)));
    return false;
  }

  /// The first half of run_or_enqueue: runs `fn()` on the calling thread before returning, in stream
  /// order, when the stream is idle, and returns true (an exception from it reaches the caller);
  /// otherwise does nothing and returns false — the caller may then prepare `fn` to outlive the call
  /// (say, take shared ownership of what it refers to) and enqueue it.
  template <class F>
    requires std::invocable<F&>
  bool run_if_idle(F& fn) const {
    return run_here(state("run_if_idle"), fn);
  }

  [[nodiscard]] int device_index() const { return state("device_index").device(); }
  /// Unique among all streams this process ever created; stable for the stream's lifetime.
  [[nodiscard]] std::uint64_t id() const { return state("id").id(); }
  /// The priority given at creation (0 for default streams; lower means higher, as in torch).
  [[nodiscard]] int priority() const { return state("priority").priority(); }
  [[nodiscard]] bool is_default() const { return state("is_default").is_default(); }
  /// False only for a moved-from Stream.
  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }

  friend bool operator==(StreamRef a, StreamRef b) noexcept { return a.state_ == b.state_; }

 protected:
  StreamRef() noexcept = default;
  explicit StreamRef(detail::StreamState* s) noexcept : state_(s) {}

  detail::StreamState* state_ = nullptr;

 private:
  friend class Event;
  friend class Graph;
  friend class GraphCapture;
  friend class StreamGuard;
  friend struct Streams;
  template <class>
  friend struct BasicRandom;
  friend struct detail::GraphNumbering;
  friend struct detail::StreamInternals;

  template <class F>
  static bool run_here(detail::StreamState& s, F& fn) {
    if (!s.try_begin_inline()) return false;
    struct EndClaim {
      detail::StreamState& s;
      ~EndClaim() { s.end_inline(); }
    } const claim{s};
    fn();
    return true;
  }

  // The check inline, its message out of line: a stream's accessors (id(), device_index()) are then a
  // load and a compare where the allocator's hot path calls them, instead of a call each.
  [[gnu::always_inline]] detail::StreamState& state(const char* operation) const {
    if (state_ == nullptr) [[unlikely]] moved_from(operation);
    return *state_;
  }
  [[noreturn, gnu::noinline, gnu::cold]] static void moved_from(const char* operation) {
    throw InvalidStateError(std::string("cpu stream: ") + operation + "() on a moved-from Stream");
  }
};

namespace detail {
/// A stream's state, for tests and diagnostics (StreamState::sleeps()).
struct StreamInternals {
  static StreamState& of(StreamRef s) { return s.state("internals"); }
};
}  // namespace detail

/// An owning CPU stream with its own worker thread. Move-only.
class Stream : public StreamRef {
 public:
  /// A new stream on the calling thread's current device.
  Stream() : Stream(Devices::current_device()) {}

  /// A new stream on `device` (throws InvalidArgumentError if it does not exist). The priority is
  /// recorded for priority(); worker threads are not re-prioritized.
  explicit Stream(int device, int priority = 0) : StreamRef(create(device, priority)) {}

  Stream(Stream&& other) noexcept : StreamRef(std::exchange(other.state_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept {
    if (this != &other) {
      destroy();
      state_ = std::exchange(other.state_, nullptr);
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  /// Runs every task still queued, stops the worker. Never throws.
  ~Stream() { destroy(); }

  [[nodiscard]] StreamRef ref() const noexcept { return static_cast<const StreamRef&>(*this); }

 private:
  static detail::StreamState* create(int device, int priority) {
    Devices::check_device(device);
    detail::StreamRegistry& registry = detail::registry();
    detail::StreamState* s = detail::StreamState::create_worker(device, priority);
    try {
      registry.add(s);
    } catch (...) {
      s->shutdown();
      s->release();
      throw;
    }
    return s;
  }

  void destroy() noexcept {
    detail::StreamState* s = std::exchange(state_, nullptr);
    if (s == nullptr) return;
    const bool own_task = detail::running_stream() == s;  // then its worker drains after this returns
    s->shutdown();
    // Drained: the caching allocators may give its cached blocks to any stream (cpu/memory.hpp).
    if (!own_task) accel::detail::StreamRetirement<StreamRef>::notify(s->device(), s->id());
    detail::registry().remove(s);
    if (detail::CurrentStreams::get(s->device()) == s) detail::CurrentStreams::set(s->device(), nullptr);
    s->release();
  }
};

/// Makes a stream current for the calling thread, and its device the current device; restores both
/// when destroyed (torch's `with torch.cuda.stream(s)`). Neither copyable nor movable.
class StreamGuard {
 public:
  explicit StreamGuard(StreamRef stream)
      : device_(stream.state("StreamGuard").device()),
        previous_device_(Devices::current_device()),
        previous_stream_(detail::CurrentStreams::get(device_)) {
    detail::CurrentStreams::set(device_, stream.state_);
    Devices::set_device(device_);
  }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;
  ~StreamGuard() {
    try {
      detail::CurrentStreams::set(device_, previous_stream_);
    } catch (...) {  // unreachable: the slot table exists since the constructor set it
    }
    detail::current_device_slot() = previous_device_;
  }

 private:
  int device_;
  int previous_device_;
  detail::StreamState* previous_stream_;
};

/// Stream selection and device synchronization; accel::CpuBackend inherits these.
struct Streams {
  /// The calling thread's current stream of its current device (the default stream unless set).
  [[nodiscard]] static StreamRef current_stream() { return current_stream(Devices::current_device()); }
  [[nodiscard]] static StreamRef current_stream(int device) {
    Devices::check_device(device);
    detail::StreamState* s = detail::CurrentStreams::get(device);
    return StreamRef(s != nullptr ? s : detail::default_stream_state(device));
  }

  /// The device's default stream: runs tasks inline, lives for the whole process.
  [[nodiscard]] static StreamRef default_stream() { return default_stream(Devices::current_device()); }
  [[nodiscard]] static StreamRef default_stream(int device) {
    Devices::check_device(device);
    return StreamRef(detail::default_stream_state(device));
  }

  /// Makes `stream` the calling thread's current stream of its device, and that device current.
  static void set_stream(StreamRef stream) {
    const int device = stream.state("set_stream").device();
    detail::CurrentStreams::set(device, stream.state_);
    Devices::set_device(device);
  }

  /// `auto guard = Streams::stream(s);` — DeepSpeed's `with accelerator.stream(s):`.
  [[nodiscard]] static StreamGuard stream(StreamRef stream) { return StreamGuard(stream); }

  /// Blocks until every live stream of the current device (or of `device`) ran what was enqueued
  /// before the call; throws TaskError for the oldest unreported task failure among them.
  static void synchronize(source_location where = source_location::current()) {
    detail::synchronize_device(Devices::current_device(), where);
  }
  static void synchronize(int device, source_location where = source_location::current()) {
    detail::synchronize_device(device, where);
  }
};

}  // namespace accel::cpu

template <>
struct std::hash<accel::cpu::StreamRef> {
  std::size_t operator()(accel::cpu::StreamRef s) const noexcept { return s.valid() ? s.id() : 0; }
};
