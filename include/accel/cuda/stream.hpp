// accel/cuda/stream.hpp — the CUDA backend's streams.
//
//   accel::cuda::StreamRef    non-owning, trivially copyable view: cudaStream_t + device + unique id
//   accel::cuda::Stream       owning, move-only cudaStream_t (non-blocking by default, with a priority)
//   accel::cuda::StreamGuard  makes a stream (and its device) current for the calling thread
//   accel::cuda::Streams      current_stream / default_stream / set_stream / stream / synchronize /
//                             stream_from_pool, inherited by accel::CudaBackend
//
// The default stream of each device is the *legacy* default stream (handle 0), as in torch: work on
// it is ordered with every blocking stream of the device. Streams that accel creates are non-blocking
// (cudaStreamNonBlocking) unless asked otherwise, so they run concurrently with the default stream and
// are ordered only by events, like the CPU backend's. Each thread has its own current stream per
// device; it starts as the default stream.
//
// enqueue(fn) runs fn on a CUDA driver thread in stream order (cudaLaunchHostFunc). fn must not call
// the CUDA API (nor accel calls that do), and must not own objects whose destructors do (a Buffer, a
// Stream): fn is destroyed on that thread. Host functions of different streams may share the driver
// thread, so fn must not wait for another stream's host function. An exception fn throws is stored;
// the next synchronize() of the stream, or of its device, throws accel::TaskError ("cuda:0 stream 7:
// task failed: <what>") holding the original, and clears it — exactly the CPU backend's semantics.
//
// id() is cudaStreamGetId's value: never reused within the process (the caching allocator keys cached
// blocks by it, so a new stream can never inherit blocks of a destroyed one at the same address).
// Thread safety: every operation may be called from any thread. A StreamRef must not outlive its Stream.
#pragma once

#include <accel/concepts/stream.hpp>
#include <accel/core/error.hpp>
#include <accel/core/source_location.hpp>
#include <accel/cuda/detail/capture_registry.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/detail/event_pool.hpp>
#include <accel/cuda/detail/host_task.hpp>
#include <accel/cuda/device.hpp>
#include <accel/cuda/error.hpp>
#include <accel/memory/detail/stream_retirement.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace accel::cuda {

class Event;
class Stream;
class StreamGuard;
struct Streams;

namespace detail {

/// The id accel gives the legacy default stream of a device (cudaStreamGetId ids are small counters).
[[nodiscard]] constexpr std::uint64_t default_stream_id(int device) noexcept {
  return (std::uint64_t{1} << 63) | static_cast<std::uint32_t>(device);
}

/// Makes `device` current for the duration of an operation on a default stream, whose handle (0, or
/// cudaStreamPerThread) means "the current device's"; created streams carry their device.
class LegacyStreamScope {
 public:
  LegacyStreamScope(cudaStream_t handle, int device) {
    if (handle == nullptr || handle == cudaStreamPerThread) guard_.emplace(device);
  }

 private:
  std::optional<Devices::DeviceGuard> guard_;
};

}  // namespace detail

/// Non-owning view of a CUDA stream. Cheap to copy; compares equal when it names the same stream.
class StreamRef {
 public:
  StreamRef(int, int) = delete;
  StreamRef(std::nullptr_t, int) = delete;

  /// A view of a native stream of `device` (0 or cudaStreamLegacy: the device's legacy default stream).
  /// InvalidArgumentError when the stream belongs to another device (CUDA 12.8 and later can tell).
  StreamRef(cudaStream_t native, int device) : device_(device) {
    Devices::check_device(device);
    if (native == nullptr || native == cudaStreamLegacy) {
      id_ = detail::default_stream_id(device);
      return;
    }
    handle_ = native;
#if CUDART_VERSION >= 12080
    // Work enqueued through a view of the wrong device would run there, but the allocator, events and
    // generators would act for `device`: a stream of cuda:1 given as cuda:0 is refused here.
    // (cudaStreamPerThread has no device of its own: each use runs under `device`, as the legacy one.)
    int owner = device;
    if (native != cudaStreamPerThread) ACCEL_CUDA_CHECK(cudaStreamGetDevice(native, &owner));
    if (owner != device) {
      throw InvalidArgumentError("cuda StreamRef: the native stream belongs to cuda:" + std::to_string(owner) +
                                 ", not to cuda:" + std::to_string(device) + " as given");
    }
#endif
    unsigned long long id = 0;
    ACCEL_CUDA_CHECK(cudaStreamGetId(native, &id));
    id_ = id;
  }

  /// The native handle (nullptr for the legacy default stream), for CUDA calls and libraries.
  [[nodiscard]] cudaStream_t get() const noexcept { return handle_; }
  [[nodiscard]] int device_index() const noexcept { return device_; }
  /// Unique among all streams of this process, never reused; stable for the stream's lifetime.
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  /// True for a device's legacy default stream.
  [[nodiscard]] bool is_default() const noexcept { return handle_ == nullptr; }
  /// False only for a moved-from Stream.
  [[nodiscard]] bool valid() const noexcept { return device_ >= 0; }

  /// Blocks until all work enqueued so far is done; throws TaskError if a host task threw since the
  /// last synchronization (the error is then cleared and the stream stays usable).
  void synchronize(source_location where = source_location::current()) const {
    check_valid("synchronize");
    refuse_while_capturing("synchronize");
    {
      const detail::LegacyStreamScope scope(handle_, device_);
      ACCEL_CUDA_CHECK(cudaStreamSynchronize(handle_));
    }
    detail::task_failures().rethrow(id_, where);
  }

  /// True when all work enqueued so far is done. Never blocks.
  [[nodiscard]] bool query() const {
    check_valid("query");
    refuse_while_capturing("query");
    const detail::LegacyStreamScope scope(handle_, device_);
    const cudaError_t status = cudaStreamQuery(handle_);
    if (status == cudaSuccess) return true;
    if (status != cudaErrorNotReady) detail::throw_error(status, "cudaStreamQuery(stream)", source_location::current());
    (void)cudaGetLastError();
    return false;
  }

  /// Work enqueued on this stream after the call waits for the work `event` captured
  /// (cudaStreamWaitEvent; the host does not block). A never-recorded event imposes nothing.
  /// (A template only so that this header does not need event.hpp; E is always Event.)
  template <class E>
    requires std::same_as<E, Event>
  void wait(const E& event) const {
    check_valid("wait");
    if (event.event_.get() == nullptr) return;
    event.check_waitable();
    const detail::LegacyStreamScope scope(handle_, device_);
    ACCEL_CUDA_CHECK(cudaStreamWaitEvent(handle_, event.event_.get(), 0));
  }

  /// Work enqueued on this stream after the call waits for everything enqueued on `other` so far.
  void wait_stream(StreamRef other) const {
    check_valid("wait_stream");
    other.check_valid("wait_stream");
    if (other == *this) return;
    detail::PooledEvent marker;
    {
      Devices::DeviceGuard guard(other.device_);
      marker = detail::PooledEvent(detail::event_pool(other.device_).acquire(), other.device_);
      ACCEL_CUDA_CHECK(cudaEventRecord(marker.get(), other.handle_));
    }
    const detail::LegacyStreamScope scope(handle_, device_);
    ACCEL_CUDA_CHECK(cudaStreamWaitEvent(handle_, marker.get(), 0));
  }

  /// Runs `fn()` on the host in stream order (cudaLaunchHostFunc; see the top of this header).
  template <class F>
    requires std::invocable<std::decay_t<F>&> && std::constructible_from<std::decay_t<F>, F>
  void enqueue(F&& fn) const {
    check_valid("enqueue");
    if constexpr (std::is_pointer_v<std::remove_cvref_t<F>> || std::is_member_pointer_v<std::remove_cvref_t<F>>) {
      if (fn == nullptr) {
        throw InvalidArgumentError(detail::stream_name(device_, id_, is_default()) + ": enqueue of a null function pointer");
      }
    }
    auto* task = new detail::HostTask<std::decay_t<F>>(std::forward<F>(fn), id_, device_, is_default());
    // Captured into a graph, the host function runs at every replay: the task must outlive this run.
    // accel's capture hands it to the graph; under a capture accel does not know of (the raw API),
    // nothing can say when the graph goes away, so the task is kept for the life of the process.
    const auto record = detail::captures().find(id_);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (!record && handle_ != nullptr) (void)cudaStreamIsCapturing(handle_, &capture);
    const bool captured = record || capture == cudaStreamCaptureStatusActive;
    cudaError_t status = cudaSuccess;
    try {
      const detail::LegacyStreamScope scope(handle_, device_);
      status = cudaLaunchHostFunc(handle_, captured ? &detail::run_captured_host_task : &detail::run_host_task, task);
    } catch (...) {
      delete task;
      throw;
    }
    if (status != cudaSuccess) [[unlikely]] {
      delete task;
      detail::throw_error(status, "cudaLaunchHostFunc(stream, task)", source_location::current());
    }
    if (record) record->keep_host_task(std::unique_ptr<detail::HostTaskBase>(task));
  }

  /// True while a graph capture (accel's or any cudaStreamBeginCapture) records this stream's work.
  [[nodiscard]] bool is_capturing() const {
    check_valid("is_capturing");
    if (handle_ == nullptr) return false;  // the legacy default stream cannot capture
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    ACCEL_CUDA_CHECK(cudaStreamIsCapturing(handle_, &status));
    return status == cudaStreamCaptureStatusActive;
  }

  /// The stream's priority (lower is higher, as in CUDA and torch; 0 for the default stream).
  [[nodiscard]] int priority() const {
    check_valid("priority");
    if (handle_ == nullptr) return 0;
    int priority = 0;
    ACCEL_CUDA_CHECK(cudaStreamGetPriority(handle_, &priority));
    return priority;
  }

  /// "cuda:0 stream 7".
  [[nodiscard]] std::string name() const { return detail::stream_name(device_, id_, is_default()); }

  friend bool operator==(const StreamRef&, const StreamRef&) = default;

 protected:
  StreamRef() noexcept = default;
  StreamRef(cudaStream_t handle, std::uint64_t id, int device) noexcept : handle_(handle), id_(id), device_(device) {}

  void check_valid(const char* operation) const {
    if (device_ < 0) [[unlikely]] {
      throw InvalidStateError(std::string("cuda stream: ") + operation + "() on a moved-from Stream");
    }
  }

  // Synchronizing or querying a capturing stream: an InvalidStateError naming the call, which also
  // invalidates accel's capture (CUDA would fail it with cudaErrorStreamCaptureUnsupported).
  void refuse_while_capturing(const char* operation) const {
    const auto record = detail::captures().find(id_);
    if (!record) [[likely]] return;
    const std::string message = name() + ": " + operation +
                                "() while the stream is capturing a graph (work enqueued during a capture is "
                                "recorded, not run; end the capture first)";
    record->invalidate(message);
    throw InvalidStateError(message + "; the capture is invalidated");
  }

  cudaStream_t handle_ = nullptr;
  std::uint64_t id_ = 0;
  int device_ = -1;

 private:
  friend class Event;
  friend class Graph;
  friend class GraphCapture;
  friend class Stream;
  friend class StreamGuard;
  friend struct Streams;
};

namespace detail {

/// The calling thread's current stream per device (id 0: the default stream). A heap table behind a
/// trivially destructible thread_local, freed at thread exit; code running after that sees defaults.
struct CurrentStreams {
  struct Slot {
    cudaStream_t handle = nullptr;
    std::uint64_t id = 0;
  };
  static Slot*& table() noexcept {
    thread_local Slot* slots = nullptr;
    return slots;
  }
  [[nodiscard]] static Slot get(int device) noexcept {
    Slot* slots = table();
    return slots != nullptr ? slots[device] : Slot{};
  }
  static void set(int device, Slot slot) {
    Slot*& slots = table();
    if (slots == nullptr) {
      if (slot.id == 0) return;
      slots = new Slot[static_cast<std::size_t>(Devices::device_count())]();
      struct Owner {
        Owner() = default;
        Owner(const Owner&) = delete;
        Owner& operator=(const Owner&) = delete;
        ~Owner() { delete[] std::exchange(table(), nullptr); }
      };
      thread_local Owner free_at_exit;
      (void)free_at_exit;
    }
    slots[device] = slot;
  }
};

/// Blocks until all work on `device` is done (cudaDeviceSynchronize), then reports the oldest
/// unreported host-task failure among the device's streams.
inline void synchronize_device(int device, source_location where) {
  if (const auto record = captures().forbidding_device_sync(device)) {
    const std::string message = "device synchronize() of cuda:" + std::to_string(device) + " while " +
                                stream_name(device, record->stream_id(), false) + " is capturing a graph in " +
                                std::string(to_string(record->mode())) +
                                " mode (capture with CaptureMode::relaxed to allow it)";
    record->invalidate(message);
    throw InvalidStateError(message + "; the capture is invalidated", where);
  }
  {
    Devices::DeviceGuard guard(device);
    ACCEL_CUDA_CHECK(cudaDeviceSynchronize());
  }
  task_failures().rethrow_device(device, where);
}

}  // namespace detail

/// An owning CUDA stream. Move-only.
class Stream : public StreamRef {
 public:
  /// A new non-blocking stream on the calling thread's current device.
  Stream() : Stream(Devices::current_device()) {}

  /// A new stream on `device` with `priority` (lower is higher; clamped by CUDA to the device's range,
  /// see Streams::priority_range). `non_blocking`: not ordered with the legacy default stream.
  explicit Stream(int device, int priority = 0, bool non_blocking = true) {
    Devices::check_device(device);
    Devices::DeviceGuard guard(device);
    cudaStream_t handle = nullptr;
    ACCEL_CUDA_CHECK(cudaStreamCreateWithPriority(&handle, non_blocking ? cudaStreamNonBlocking : cudaStreamDefault,
                                                  priority));
    unsigned long long id = 0;
    if (const cudaError_t status = cudaStreamGetId(handle, &id); status != cudaSuccess) {
      (void)ACCEL_CUDA_CHECK_NOTHROW(cudaStreamDestroy(handle));
      detail::throw_error(status, "cudaStreamGetId(stream, &id)", source_location::current());
    }
    handle_ = handle;
    id_ = id;
    device_ = device;
  }

  /// Takes ownership of a native stream of `device` (destroyed by this Stream).
  [[nodiscard]] static Stream from_native_handle(cudaStream_t native, int device) {
    if (native == nullptr || native == cudaStreamLegacy || native == cudaStreamPerThread) {
      throw InvalidArgumentError("cuda Stream::from_native_handle: a default stream cannot be owned");
    }
    const StreamRef view(native, device);
    return Stream(view);
  }

  Stream(Stream&& other) noexcept : StreamRef(other) { other.reset_view(); }
  Stream& operator=(Stream&& other) noexcept {
    if (this != &other) {
      destroy();
      static_cast<StreamRef&>(*this) = other;
      other.reset_view();
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  /// Waits for the stream's work, reports an unreported task failure on stderr, destroys the stream.
  /// Never throws.
  ~Stream() { destroy(); }

  [[nodiscard]] StreamRef ref() const noexcept { return static_cast<const StreamRef&>(*this); }

  /// Gives up ownership: the caller destroys the returned handle.
  [[nodiscard]] cudaStream_t release() noexcept {
    cudaStream_t handle = handle_;
    forget_current();
    reset_view();
    return handle;
  }

 private:
  explicit Stream(StreamRef view) noexcept : StreamRef(view) {}

  void reset_view() noexcept {
    handle_ = nullptr;
    id_ = 0;
    device_ = -1;
  }

  void forget_current() noexcept {
    if (device_ >= 0 && detail::CurrentStreams::get(device_).id == id_) {
      try {
        detail::CurrentStreams::set(device_, {});
      } catch (...) {  // unreachable: the table exists since it holds this stream
      }
    }
  }

  void destroy() noexcept {
    if (device_ < 0 || handle_ == nullptr) return;
    forget_current();
    // Drained: the caching allocators may give its cached blocks to any stream (cuda/memory.hpp).
    if (ACCEL_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(handle_))) {
      accel::detail::StreamRetirement<StreamRef>::notify(device_, id_);
    }
    (void)ACCEL_CUDA_CHECK_NOTHROW(cudaStreamDestroy(handle_));
    detail::task_failures().discard(id_);
    reset_view();
  }
};

/// Makes a stream current for the calling thread, and its device the current device; restores both
/// when destroyed (torch's `with torch.cuda.stream(s)`). Neither copyable nor movable.
class StreamGuard {
 public:
  explicit StreamGuard(StreamRef stream)
      : device_guard_((stream.check_valid("StreamGuard"), stream.device_)),
        device_(stream.device_),
        previous_(detail::CurrentStreams::get(device_)) {
    detail::CurrentStreams::set(device_, {stream.handle_, stream.id_});
  }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;
  ~StreamGuard() {
    try {
      detail::CurrentStreams::set(device_, previous_);
    } catch (...) {  // unreachable: the slot table exists since the constructor set it
    }
  }

 private:
  Devices::DeviceGuard device_guard_;
  int device_;
  detail::CurrentStreams::Slot previous_;
};

/// Stream selection and device synchronization; accel::CudaBackend inherits these.
struct Streams {
  /// The calling thread's current stream of its current device (the default stream unless set).
  [[nodiscard]] static StreamRef current_stream() { return current_stream(Devices::current_device()); }
  [[nodiscard]] static StreamRef current_stream(int device) {
    Devices::check_device(device);
    const auto slot = detail::CurrentStreams::get(device);
    if (slot.id == 0) return default_stream_unchecked(device);
    return StreamRef(slot.handle, slot.id, device);
  }

  /// The device's legacy default stream (handle 0).
  [[nodiscard]] static StreamRef default_stream() { return default_stream(Devices::current_device()); }
  [[nodiscard]] static StreamRef default_stream(int device) {
    Devices::check_device(device);
    return default_stream_unchecked(device);
  }

  /// Makes `stream` the calling thread's current stream of its device, and that device current.
  static void set_stream(StreamRef stream) {
    stream.check_valid("set_stream");
    Devices::set_device(stream.device_);
    detail::CurrentStreams::set(stream.device_, {stream.handle_, stream.id_});
  }

  /// `auto guard = Streams::stream(s);` — DeepSpeed's `with accelerator.stream(s):`.
  [[nodiscard]] static StreamGuard stream(StreamRef stream) { return StreamGuard(stream); }

  /// Blocks until all work on the current device (or `device`) is done (cudaDeviceSynchronize);
  /// throws TaskError for the oldest unreported host-task failure among its streams.
  static void synchronize(source_location where = source_location::current()) {
    detail::synchronize_device(Devices::current_device(), where);
  }
  static void synchronize(int device, source_location where = source_location::current()) {
    detail::synchronize_device(device, where);
  }

  /// The device's stream priority range as {least, greatest} (e.g. {0, -5}: lower is higher).
  [[nodiscard]] static std::pair<int, int> priority_range(int device) {
    Devices::DeviceGuard guard(device);
    int least = 0;
    int greatest = 0;
    ACCEL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    return {least, greatest};
  }

  /// A stream from the device's pool (torch's getStreamFromPool): 32 non-blocking streams per device
  /// and priority class, created on first use, handed out round-robin, never destroyed. For short-lived
  /// side work without the cost of creating a stream; several callers may share one.
  [[nodiscard]] static StreamRef stream_from_pool(int device, bool high_priority = false) {
    Devices::check_device(device);
    Pool* pools = pool_table();
    Pool& pool = pools[static_cast<std::size_t>(device) * 2 + (high_priority ? 1 : 0)];
    std::call_once(pool.once, [&] {
      Devices::DeviceGuard guard(device);
      int least = 0;
      int greatest = 0;
      ACCEL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      for (auto& slot : pool.streams) {
        cudaStream_t handle = nullptr;
        ACCEL_CUDA_CHECK(cudaStreamCreateWithPriority(&handle, cudaStreamNonBlocking, high_priority ? greatest : least));
        unsigned long long id = 0;
        ACCEL_CUDA_CHECK(cudaStreamGetId(handle, &id));
        slot = {handle, id};
      }
    });
    const auto& slot = pool.streams[pool.next.fetch_add(1, std::memory_order_relaxed) % pool_size];
    return StreamRef(slot.handle, slot.id, device);
  }

 private:
  static constexpr std::size_t pool_size = 32;
  struct Pool {
    std::once_flag once;
    std::atomic<std::uint32_t> next{0};
    std::array<detail::CurrentStreams::Slot, pool_size> streams{};
  };
  static Pool* pool_table() {
    static Pool* const pools = new Pool[static_cast<std::size_t>(std::max(Devices::device_count(), 1)) * 2];
    return pools;
  }

  static StreamRef default_stream_unchecked(int device) noexcept {
    return StreamRef(nullptr, detail::default_stream_id(device), device);
  }
};

}  // namespace accel::cuda

template <>
struct std::hash<accel::cuda::StreamRef> {
  std::size_t operator()(const accel::cuda::StreamRef& s) const noexcept { return std::hash<std::uint64_t>{}(s.id()); }
};
