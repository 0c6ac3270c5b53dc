// accel/cuda/memory.hpp — the CUDA backend's memory: device and pinned-host caching allocators.
//
//   accel::cuda::DeviceMemory      the raw policy of the device allocator: cudaMalloc / cudaFree under a
//                                  device guard, pooled cudaEventDisableTiming events, cudaMemGetInfo
//   accel::cuda::PinnedHostMemory  the raw policy of the pinned-host allocator: cudaHostAlloc (portable)
//   accel::cuda::Memory            the MemoryApi functions, inherited by accel::CudaBackend
//
// One accel::CachingAllocator per device (memory/caching_allocator.hpp: torch's rules and statistics)
// and one for pinned host memory (host_alloc / host_free: staging buffers, Buffer's pinned memory).
// The allocators are created on first use — creating one touches no device — and never destroyed:
// cached memory is returned to CUDA by empty_cache(), or by the driver at exit (CUDA may be unloaded
// before static destructors run). A Stream's destructor, once cudaStreamSynchronize said the stream
// is drained, retires it in every allocator (CachingAllocator::retire_stream): its cached blocks
// serve the next stream that needs them, so a stream made per step does not cache a working set per
// step (streams accel does not own, and pool streams, are never retired).
//
// A failed cudaMalloc is reported as OutOfMemoryError (after the allocator freed its cache and
// retried) only when CUDA said cudaErrorMemoryAllocation; any other failure (a sticky error, a lost
// device) is thrown as what it is (accel/cuda/error.hpp), never disguised as out-of-memory.
//
// pin_memory / unpin_memory are cudaHostRegister / cudaHostUnregister; is_pinned answers for any
// pointer (cudaPointerGetAttributes: page-locked host memory, registered or cudaHostAlloc'd);
// on_accelerator is true for memory of accel's device allocators and for any other device or managed
// memory CUDA knows. copy_async(stream, dst, src, bytes) is cudaMemcpyAsync with cudaMemcpyDefault
// (host<->device, device<->device; asynchronous with respect to the host only for pinned host memory).
// host_alloc and its siblings, shared with the CPU backend, are memory/pinned.hpp (PinnedHostAllocation).
#pragma once

#include <accel/concepts/memory.hpp>
#include <accel/core/error.hpp>
#include <accel/core/source_location.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/detail/event_pool.hpp>
#include <accel/cuda/device.hpp>
#include <accel/cuda/error.hpp>
#include <accel/cuda/stream.hpp>
#include <accel/memory/allocator_statistics.hpp>
#include <accel/memory/caching_allocator.hpp>
#include <accel/memory/detail/copy_arguments.hpp>
#include <accel/memory/pinned.hpp>
#include <accel/memory/detail/stream_retirement.hpp>
#include <accel/core/memory_stats.hpp>

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace accel::cuda {

namespace detail {

/// The status of this thread's last failed raw allocation (read when the allocator gives up).
inline cudaError_t& last_raw_error() noexcept {
  thread_local cudaError_t status = cudaSuccess;
  return status;
}

inline bool event_done(cudaEvent_t event) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaSuccess) return true;
  if (status != cudaErrorNotReady) throw_error(status, "cudaEventQuery(event)", source_location::current());
  (void)cudaGetLastError();
  return false;
}

inline PooledEvent record_pooled_event(StreamRef stream) {
  const int device = stream.device_index();
  Devices::DeviceGuard guard(device);
  PooledEvent event(event_pool(device).acquire(), device);
  ACCEL_CUDA_CHECK(cudaEventRecord(event.get(), stream.get()));
  return event;
}

/// cudaPointerGetAttributes(p).type, or cudaMemoryTypeUnregistered when CUDA cannot say.
inline cudaMemoryType memory_type_of(const void* p) noexcept {
  if (p == nullptr || !Devices::is_available()) return cudaMemoryTypeUnregistered;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return cudaMemoryTypeUnregistered;
  }
  return attributes.type;
}

}  // namespace detail

/// Raw device memory for accel::CachingAllocator (see the policy contract in caching_allocator.hpp).
struct DeviceMemory {
  using stream_type = StreamRef;
  using event_type = detail::PooledEvent;

  static void* allocate(int device, std::size_t bytes) noexcept {
    try {
      Devices::DeviceGuard guard(device);
      void* p = nullptr;
      // cudaMalloc is illegal while a stream captures in global mode, but a new segment of a graph's
      // pool is safe to allocate then (the graph keeps the address; a replay allocates nothing): run it
      // in relaxed mode, as torch's cudaMallocMaybeCapturing does.
      cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
      (void)cudaThreadExchangeStreamCaptureMode(&mode);
      const cudaError_t status = cudaMalloc(&p, bytes);
      (void)cudaThreadExchangeStreamCaptureMode(&mode);
      if (status == cudaSuccess) return p;
      (void)cudaGetLastError();
      detail::last_raw_error() = status;
    } catch (const Error& e) {
      detail::last_raw_error() = e.native_code() != 0 ? static_cast<cudaError_t>(e.native_code()) : cudaErrorUnknown;
    } catch (...) {
      detail::last_raw_error() = cudaErrorMemoryAllocation;
    }
    return nullptr;
  }

  static void deallocate(int device, void* p, std::size_t /*bytes*/) noexcept {
    try {
      Devices::DeviceGuard guard(device);
      (void)ACCEL_CUDA_CHECK_NOTHROW(cudaFree(p));
    } catch (...) {  // the device cannot be made current: nothing can free the memory
    }
  }

  static event_type record_event(StreamRef stream) { return detail::record_pooled_event(stream); }
  static bool event_done(const event_type& event) { return detail::event_done(event.get()); }
  static void event_synchronize(const event_type& event) { ACCEL_CUDA_CHECK(cudaEventSynchronize(event.get())); }

  static MemoryInfo memory_info(int device) {
    Devices::DeviceGuard guard(device);
    std::size_t free = 0;
    std::size_t total = 0;
    ACCEL_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return {free, total};
  }

  static std::string device_name(int device) { return "cuda:" + std::to_string(device); }

  /// Appended to out-of-memory messages: what CUDA said, when it said something else than "out of memory".
  static std::string oom_hint(int /*device*/) {
    const cudaError_t status = detail::last_raw_error();
    if (status == cudaSuccess || status == cudaErrorMemoryAllocation) return {};
    return std::string("(the last cudaMalloc failed with ") + std::string(error_name(status)) + ")";
  }
};

/// Raw pinned (page-locked) host memory for accel::CachingAllocator: cudaHostAlloc with
/// cudaHostAllocPortable, so every device's context sees it as pinned.
struct PinnedHostMemory {
  using stream_type = StreamRef;
  using event_type = detail::PooledEvent;

  static void* allocate(int /*device*/, std::size_t bytes) noexcept {
    void* p = nullptr;
    const cudaError_t status = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (status == cudaSuccess) return p;
    (void)cudaGetLastError();
    detail::last_raw_error() = status;
    return nullptr;
  }

  static void deallocate(int /*device*/, void* p, std::size_t /*bytes*/) noexcept {
    (void)ACCEL_CUDA_CHECK_NOTHROW(cudaFreeHost(p));
  }

  static event_type record_event(StreamRef stream) { return detail::record_pooled_event(stream); }
  static bool event_done(const event_type& event) { return detail::event_done(event.get()); }
  static void event_synchronize(const event_type& event) { ACCEL_CUDA_CHECK(cudaEventSynchronize(event.get())); }

  /// The host's physical memory (free = available pages).
  static MemoryInfo memory_info(int /*device*/) {
    const long page = sysconf(_SC_PAGESIZE);
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long available = sysconf(_SC_AVPHYS_PAGES);
    if (page <= 0 || pages <= 0) return {};
    return {static_cast<std::size_t>(available > 0 ? available : 0) * static_cast<std::size_t>(page),
            static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)};
  }

  static std::string device_name(int /*device*/) { return "cuda pinned host memory"; }
};

static_assert(RawMemoryPolicy<DeviceMemory>);
static_assert(RawMemoryPolicy<PinnedHostMemory>);

/// MemoryApi for accel::CudaBackend: every function is static. Without `dev`, the calling thread's
/// current device.
struct Memory : AllocatorStatistics<Memory, Devices>,
                PinnedHostAllocation<Memory, CachingAllocator<PinnedHostMemory>, Streams> {
  using DeviceAllocator = CachingAllocator<DeviceMemory>;
  using PinnedAllocator = CachingAllocator<PinnedHostMemory>;

  // ---- allocators -----------------------------------------------------------------------------

  /// The caching allocator of `device` (created on first use, without touching the device).
  [[nodiscard]] static DeviceAllocator& allocator(int device) {
    // Once it exists (the device index was checked when it was made): a few loads, no call.
    if (DeviceAllocator* a = existing(device)) [[likely]] return *a;
    return create_allocator(device);
  }
  [[nodiscard]] static DeviceAllocator& allocator() { return allocator(Devices::current_device()); }
  // pinned_allocator(): PinnedHostAllocation (memory/pinned.hpp).

  // ---- allocation -----------------------------------------------------------------------------

  /// `bytes` of device memory on `stream`'s device, valid in `stream` order; nullptr for 0 bytes.
  /// Throws OutOfMemoryError only when CUDA ran out of memory (see the top of this header).
  /// A cache hit makes no CUDA call: the device is the stream's, and nothing else is asked of CUDA.
  [[nodiscard]] static void* raw_alloc(std::size_t bytes, StreamRef stream) {
    check_stream(stream, "raw_alloc");
    DeviceAllocator& a = allocator(stream.device_index());
    detail::ensure_lazy_init();
    detail::last_raw_error() = cudaSuccess;
    try {
      return a.allocate(bytes, stream);
    } catch (const OutOfMemoryError&) {
      rethrow_if_not_oom();
      throw;
    }
  }

  /// Returns p (from raw_alloc, on any device) to its device's cache. nullptr is a no-op; anything
  /// else that is not a live allocation is an InvalidArgumentError that changes nothing.
  /// No CUDA call: the allocator of this thread's last raw_delete is tried first, then the others.
  static void raw_delete(void* p) {
    if (p == nullptr) return;
    const int first = last_device();
    if (DeviceAllocator* a = existing(first); a != nullptr && a->try_free(p)) [[likely]] return;
    raw_delete_elsewhere(p, first);
  }

  /// raw_delete that reports instead of throwing: true when p (or nullptr) was freed; false, changing
  /// nothing, when no device's allocator holds it as a live allocation. No CUDA call; one lookup, where
  /// asking on_accelerator(p) first would make two (AnyBackend frees through it).
  [[nodiscard]] static bool try_raw_delete(void* p) {
    if (p == nullptr) return true;
    const int first = last_device();
    if (DeviceAllocator* a = existing(first); a != nullptr && a->try_free(p)) [[likely]] return true;
    return try_raw_delete_elsewhere(p, first);
  }

 private:
  [[gnu::noinline]] static DeviceAllocator& create_allocator(int device) {
    Devices::check_device(device);
    Table& table = allocators();
    if (DeviceAllocator* existing = table.slots[device].load(std::memory_order_acquire)) [[likely]] return *existing;
    const std::lock_guard lock(table.mutex);
    if (DeviceAllocator* existing = table.slots[device].load(std::memory_order_relaxed)) return *existing;
    accel::detail::StreamRetirement<StreamRef>::install(&retire_stream_everywhere);
    auto* created = new DeviceAllocator(device);
    table.slots[device].store(created, std::memory_order_release);
    return *created;
  }

  friend PinnedHostAllocation<Memory, PinnedAllocator, Streams>;

  // host_alloc's allocation: like raw_alloc's, an "out of memory" that CUDA gave another reason for
  // is thrown as that error.
  static void* allocate_pinned(PinnedAllocator& a, std::size_t bytes, StreamRef stream) {
    detail::ensure_lazy_init();
    detail::last_raw_error() = cudaSuccess;
    try {
      return a.allocate(bytes, stream);
    } catch (const OutOfMemoryError&) {
      rethrow_if_not_oom();
      throw;
    }
  }

  [[gnu::noinline]] static PinnedAllocator& create_pinned_allocator() {
    Devices::require_available();
    std::atomic<PinnedAllocator*>& slot = pinned_slot();
    const std::lock_guard lock(allocators().mutex);
    if (PinnedAllocator* existing = slot.load(std::memory_order_relaxed)) return *existing;
    accel::detail::StreamRetirement<StreamRef>::install(&retire_stream_everywhere);
    auto* created = new PinnedAllocator(0);
    slot.store(created, std::memory_order_release);
    return *created;
  }

  // A destroyed, drained stream (cuda/stream.hpp): every allocator may hand its cached blocks to any
  // stream, and drops the record_stream uses of it (blocks of any device may have been used on it).
  static void retire_stream_everywhere(int /*device*/, std::uint64_t stream_id) noexcept {
    const Table& table = allocators();
    for (int d = 0; d < table.count; ++d) {
      if (DeviceAllocator* a = table.slots[d].load(std::memory_order_acquire)) a->retire_stream(stream_id);
    }
    if (PinnedAllocator* pinned = pinned_slot().load(std::memory_order_acquire)) pinned->retire_stream(stream_id);
  }

  [[gnu::noinline]] static void raw_delete_elsewhere(void* p, int tried) {
    if (!try_raw_delete_elsewhere(p, tried)) throw not_allocated(p, "raw_delete");
  }
  [[gnu::noinline]] static bool try_raw_delete_elsewhere(void* p, int tried) {
    const int count = Devices::device_count();
    for (int d = 0; d < count; ++d) {
      if (d == tried) continue;
      if (DeviceAllocator* a = existing(d); a != nullptr && a->try_free(p)) {
        last_device() = d;
        return true;
      }
    }
    return false;
  }

 public:
  /// p (from raw_alloc) is also used on `stream`; see CachingAllocator::record_stream.
  static void record_stream(void* p, StreamRef stream) {
    if (p == nullptr) return;
    const int count = Devices::device_count();
    for (int d = 0; d < count; ++d) {
      if (DeviceAllocator* a = existing(d); a != nullptr && a->try_record_stream(p, stream)) return;
    }
    throw not_allocated(p, "record_stream");
  }

  /// Waits for pending cross-stream frees and releases every free cached segment, on every device
  /// (torch.cuda.empty_cache). Pinned host memory has host_empty_cache().
  static void empty_cache() {
    const int count = Devices::device_count();
    for (int d = 0; d < count; ++d) {
      if (DeviceAllocator* a = existing(d)) a->empty_cache();
    }
  }

  // ---- the device's memory (cudaMemGetInfo: creates the device's context) ------------------------

  [[nodiscard]] static MemoryInfo get_memory_info() { return get_memory_info(Devices::current_device()); }
  [[nodiscard]] static MemoryInfo get_memory_info(int dev) {
    Devices::check_device(dev);
    return DeviceMemory::memory_info(dev);
  }
  [[nodiscard]] static std::size_t total_memory() { return total_memory(Devices::current_device()); }
  [[nodiscard]] static std::size_t total_memory(int dev) { return get_memory_info(dev).total; }
  [[nodiscard]] static std::size_t available_memory() { return available_memory(Devices::current_device()); }
  [[nodiscard]] static std::size_t available_memory(int dev) { return get_memory_info(dev).free; }

  // A moved-from Stream's view has no device (-1): say so, as the stream's own calls do, rather than
  // "cuda:-1 does not exist".
  static void check_stream(StreamRef stream, const char* operation) {
    if (stream.device_index() < 0) [[unlikely]] {
      throw InvalidStateError(std::string("cuda stream: ") + operation + "() on a moved-from Stream");
    }
  }

  // ---- pinned host memory ------------------------------------------------------------------------

  /// Page-locks [p, p + bytes) (cudaHostRegister). Throws InvalidArgumentError for an empty range or
  /// one that overlaps an already pinned range.
  static void pin_memory(void* p, std::size_t bytes) {
    Devices::require_available();
    const auto start = reinterpret_cast<std::uintptr_t>(p);
    char what[64];  // as the CPU backend words it: "pin_memory(0x7f..., 0 bytes)"
    std::snprintf(what, sizeof what, "pin_memory(%p, %zu bytes)", p, bytes);
    if (p == nullptr || bytes == 0) throw InvalidArgumentError(std::string(what) + ": the range is empty");
    if (bytes > UINTPTR_MAX - start) {
      throw InvalidArgumentError(std::string(what) + ": the range wraps around the address space");
    }
    detail::ensure_lazy_init();
    const cudaError_t status = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    if (status == cudaErrorHostMemoryAlreadyRegistered) {
      (void)cudaGetLastError();
      throw InvalidArgumentError(std::string(what) + ": the range overlaps memory that is already pinned");
    }
    if (status != cudaSuccess) {
      detail::throw_error(status, "cudaHostRegister(p, bytes, cudaHostRegisterDefault)", source_location::current());
    }
  }

  /// Unpins the range pinned at p (cudaHostUnregister); false, changing nothing, when none starts at p.
  static bool unpin_memory(void* p) {
    if (p == nullptr || !Devices::is_available()) return false;
    // Memory no one pinned is answered without asking cudaHostUnregister to fail: its error would be
    // reported by compute-sanitizer and any API-error hook as the caller's mistake.
    if (!is_pinned(p)) return false;
    const cudaError_t status = cudaHostUnregister(p);
    if (status == cudaSuccess) return true;
    if (status == cudaErrorHostMemoryNotRegistered || status == cudaErrorInvalidValue) {
      (void)cudaGetLastError();
      return false;
    }
    detail::throw_error(status, "cudaHostUnregister(p)", source_location::current());
  }

  /// True when p lies in page-locked host memory: pin_memory, host_alloc, or any cudaHostAlloc /
  /// cudaHostRegister of the process (cudaPointerGetAttributes).
  [[nodiscard]] static bool is_pinned(const void* p) { return detail::memory_type_of(p) == cudaMemoryTypeHost; }

  /// True when p lies in memory of a device's caching allocator, or in other device or managed memory.
  [[nodiscard]] static bool on_accelerator(const void* p) {
    if (p == nullptr || !Devices::is_available()) return false;
    const int count = Devices::device_count();
    for (int d = 0; d < count; ++d) {
      if (DeviceAllocator* a = existing(d); a != nullptr && a->owns(p)) return true;
    }
    const cudaMemoryType type = detail::memory_type_of(p);
    return type == cudaMemoryTypeDevice || type == cudaMemoryTypeManaged;
  }

  // host_alloc, host_free, host_record_stream, host_empty_cache, host_memory_stats: PinnedHostAllocation
  // (memory/pinned.hpp); host_alloc allocates through allocate_pinned (private, above).

  // ---- copies ----------------------------------------------------------------------------------

  /// Copies `bytes` from src to dst in `stream` order (cudaMemcpyAsync with cudaMemcpyDefault: any
  /// combination of host and device memory). Asynchronous to the host when host memory is pinned
  /// (pageable host memory is staged by CUDA); synchronize the stream or record an event before
  /// reading dst or reusing src.
  static void copy_async(StreamRef stream, void* dst, const void* src, std::size_t bytes) {
    check_stream(stream, "copy_async");
    if (bytes == 0) return;
    accel::detail::check_copy_arguments(dst, src, bytes);
    if (dst == src) return;  // onto itself: the bytes are there already (memcpy's restrict forbids the call)
    const detail::LegacyStreamScope scope(stream.get(), stream.device_index());
    ACCEL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream.get()));
  }

 private:
  struct Table {
    std::mutex mutex;
    int count = 0;  // device_count(), read once: existing() needs no detection() call
    std::unique_ptr<std::atomic<DeviceAllocator*>[]> slots;
  };

  static Table& allocators() {
    static Table* const table = [] {
      auto* t = new Table();
      t->count = Devices::device_count();
      t->slots.reset(new std::atomic<DeviceAllocator*>[static_cast<std::size_t>(t->count > 0 ? t->count : 1)]());
      return t;
    }();
    return *table;
  }

  static std::atomic<PinnedAllocator*>& pinned_slot() noexcept {
    static std::atomic<PinnedAllocator*> slot{nullptr};  // trivially destructible
    return slot;
  }

  static DeviceAllocator* existing(int device) noexcept {
    Table& table = allocators();
    if (static_cast<unsigned>(device) >= static_cast<unsigned>(table.count)) return nullptr;
    return table.slots[device].load(std::memory_order_acquire);
  }

  // The device of this thread's last raw_delete: frees come in runs on one device, so it is tried
  // first (no CUDA call is needed to guess).
  static int& last_device() noexcept {
    thread_local int device = 0;
    return device;
  }

  // An allocation the allocator reports as out of memory failed for another reason (a sticky error,
  // an unusable device): throw that instead.
  static void rethrow_if_not_oom() {
    const cudaError_t status = std::exchange(detail::last_raw_error(), cudaSuccess);
    if (status != cudaSuccess && status != cudaErrorMemoryAllocation) {
      detail::throw_error(status, "cudaMalloc (in the caching allocator)", source_location::current());
    }
  }


  static InvalidArgumentError not_allocated(void* p, const char* what) {
    char address[32];
    std::snprintf(address, sizeof address, "%p", p);
    std::string msg = std::string(what) + "(" + address + "): the pointer was not allocated by ";
    const int count = Devices::device_count();
    msg += count == 0   ? std::string("accel's CUDA caching allocator (no CUDA device is available)")
           : count == 1 ? std::string("cuda:0's caching allocator")
                        : "the caching allocator of any of the " + std::to_string(count) + " cuda devices";
    msg += " (or was already freed)";
    for (int d = 0; d < count; ++d) {
      if (DeviceAllocator* a = existing(d); a != nullptr && a->owns(p)) {
        msg += "; it lies inside " + a->name() + "'s memory but is not the start of a live allocation";
      }
    }
    msg += host_alloc_hint(p);
    return InvalidArgumentError(msg);
  }
};

}  // namespace accel::cuda
