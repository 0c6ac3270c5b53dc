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
// before static destructors run).
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
#pragma once

#include <accel/concepts/memory.hpp>
#include <accel/core/error.hpp>
#include <accel/cuda/detail/cuda_api.hpp>
#include <accel/cuda/detail/event_pool.hpp>
#include <accel/cuda/device.hpp>
#include <accel/cuda/error.hpp>
#include <accel/cuda/stream.hpp>
#include <accel/memory/caching_allocator.hpp>
#include <accel/memory/stats.hpp>

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <source_location>
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
  if (status != cudaErrorNotReady) throw_error(status, "cudaEventQuery(event)", std::source_location::current());
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
      const cudaError_t status = cudaMalloc(&p, bytes);
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

/// The MemoryApi of accel::CudaBackend. `device` defaults to the calling thread's current device.
struct Memory {
  using DeviceAllocator = CachingAllocator<DeviceMemory>;
  using HostAllocator = CachingAllocator<PinnedHostMemory>;

  /// The caching allocator of `device` (created on first use, without touching the device).
  [[nodiscard]] static DeviceAllocator& allocator(int device) {
    Devices::check_device(device);
    Table& table = allocators();
    if (DeviceAllocator* existing = table.slots[device].load(std::memory_order_acquire)) [[likely]] return *existing;
    const std::lock_guard lock(table.mutex);
    if (DeviceAllocator* existing = table.slots[device].load(std::memory_order_relaxed)) return *existing;
    auto* created = new DeviceAllocator(device);
    table.slots[device].store(created, std::memory_order_release);
    return *created;
  }

  /// The pinned-host caching allocator.
  [[nodiscard]] static HostAllocator& host_allocator() {
    Devices::require_available();
    static HostAllocator* const instance = new HostAllocator(0);
    return *instance;
  }

  // ---- allocation ---------------------------------------------------------------------------------

  /// `bytes` of device memory on `stream`'s device, valid on `stream` (nullptr for 0 bytes).
  [[nodiscard]] static void* raw_alloc(std::size_t bytes, StreamRef stream) {
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

  /// Returns p to its device's cache; InvalidArgumentError (changing nothing) when p is not a live
  /// allocation of accel's CUDA allocators. nullptr is a no-op.
  static void raw_delete(void* p) {
    if (p == nullptr) return;
    Table& table = allocators();
    const int count = Devices::device_count();
    for (int d = 0; d < count; ++d) {
      if (DeviceAllocator* a = table.slots[d].load(std::memory_order_acquire); a != nullptr && a->try_free(p)) return;
    }
    for (int d = 0; d < count; ++d) {
      if (DeviceAllocator* a = table.slots[d].load(std::memory_order_acquire); a != nullptr && a->owns(p)) {
        a->free(p);  // throws its precise message (inside a segment, or freed twice)
      }
    }
    char address[32];
    std::snprintf(address, sizeof address, "%p", p);
    throw InvalidArgumentError(std::string("raw_delete(") + address +
                               "): the pointer was not allocated by accel's CUDA caching allocator (or was already freed)");
  }

  /// p is also used on `stream`: it is not reused until the work enqueued there before the free is done.
  static void record_stream(void* p, StreamRef stream) {
    if (p == nullptr) return;
    Table& table = allocators();
    const int count = Devices::device_count();
    for (int d = 0; d < count; ++d) {
      if (DeviceAllocator* a = table.slots[d].load(std::memory_order_acquire); a != nullptr && a->is_allocated(p)) {
        a->record_stream(p, stream);
        return;
      }
    }
    char address[32];
    std::snprintf(address, sizeof address, "%p", p);
    throw InvalidArgumentError(std::string("record_stream(") + address +
                               "): the pointer is not a live allocation of accel's CUDA caching allocator");
  }

  /// Releases every unused cached segment of every device (torch.cuda.empty_cache).
  static void empty_cache() {
    for_each_allocator([](DeviceAllocator& a) { a.empty_cache(); });
  }

  // ---- statistics (torch's names and meanings) ---------------------------------------------------

  [[nodiscard]] static std::size_t memory_allocated(int device = Devices::current_device()) {
    return to_size(allocator(device).allocated_bytes().current);
  }
  [[nodiscard]] static std::size_t max_memory_allocated(int device = Devices::current_device()) {
    return to_size(allocator(device).allocated_bytes().peak);
  }
  /// torch.cuda.reset_max_memory_allocated: resets every peak of the device.
  static void reset_max_memory_allocated(int device = Devices::current_device()) { allocator(device).reset_peak_stats(); }
  [[nodiscard]] static std::size_t memory_reserved(int device = Devices::current_device()) {
    return to_size(allocator(device).reserved_bytes().current);
  }
  [[nodiscard]] static std::size_t max_memory_reserved(int device = Devices::current_device()) {
    return to_size(allocator(device).reserved_bytes().peak);
  }
  /// Legacy aliases of memory_reserved / max_memory_reserved.
  [[nodiscard]] static std::size_t memory_cached(int device = Devices::current_device()) { return memory_reserved(device); }
  [[nodiscard]] static std::size_t max_memory_cached(int device = Devices::current_device()) {
    return max_memory_reserved(device);
  }
  static void reset_max_memory_cached(int device = Devices::current_device()) { allocator(device).reset_peak_stats(); }

  [[nodiscard]] static MemoryStats memory_stats(int device = Devices::current_device()) { return allocator(device).stats(); }
  static void reset_peak_memory_stats(int device = Devices::current_device()) { allocator(device).reset_peak_stats(); }
  static void reset_accumulated_memory_stats(int device = Devices::current_device()) {
    allocator(device).reset_accumulated_stats();
  }

  /// Caps what the device's allocator may reserve at fraction * total_memory (0 < fraction <= 1).
  static void set_per_process_memory_fraction(double fraction, int device = Devices::current_device()) {
    allocator(device).set_memory_fraction(fraction);
  }

  // ---- the device's memory -----------------------------------------------------------------------

  /// (free, total) bytes of the device (cudaMemGetInfo; creates the device's context).
  [[nodiscard]] static MemoryInfo get_memory_info(int device = Devices::current_device()) {
    Devices::check_device(device);
    return DeviceMemory::memory_info(device);
  }
  [[nodiscard]] static std::size_t total_memory(int device = Devices::current_device()) {
    return get_memory_info(device).total;
  }
  [[nodiscard]] static std::size_t available_memory(int device = Devices::current_device()) {
    return get_memory_info(device).free;
  }

  // ---- pinned host memory --------------------------------------------------------------------------

  /// Page-locks [p, p + bytes) (cudaHostRegister). Pinning a range that is already pinned is an
  /// InvalidArgumentError.
  static void pin_memory(void* p, std::size_t bytes) {
    Devices::require_available();
    if (p == nullptr || bytes == 0) throw InvalidArgumentError("pin_memory: a null pointer or an empty range");
    detail::ensure_lazy_init();
    const cudaError_t status = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    if (status == cudaErrorHostMemoryAlreadyRegistered) {
      (void)cudaGetLastError();
      throw InvalidArgumentError("pin_memory: the range is already pinned");
    }
    if (status != cudaSuccess) detail::throw_error(status, "cudaHostRegister(p, bytes, cudaHostRegisterDefault)",
                                                   std::source_location::current());
  }

  /// Unpins memory pinned by pin_memory(p, ...) (cudaHostUnregister); false when p was not pinned so.
  static bool unpin_memory(void* p) {
    if (p == nullptr || !Devices::is_available()) return false;
    const cudaError_t status = cudaHostUnregister(p);
    if (status == cudaSuccess) return true;
    if (status == cudaErrorHostMemoryNotRegistered || status == cudaErrorInvalidValue) {
      (void)cudaGetLastError();
      return false;
    }
    detail::throw_error(status, "cudaHostUnregister(p)", std::source_location::current());
  }

  /// True when p lies in page-locked host memory (pin_memory, host_alloc, or any cudaHostAlloc).
  [[nodiscard]] static bool is_pinned(const void* p) { return detail::memory_type_of(p) == cudaMemoryTypeHost; }

  /// True when p lies in memory of accel's device allocators, or in other device or managed memory.
  [[nodiscard]] static bool on_accelerator(const void* p) {
    if (p == nullptr || !Devices::is_available()) return false;
    bool found = false;
    for_each_allocator([&](DeviceAllocator& a) { found = found || a.owns(p); });
    if (found) return true;
    const cudaMemoryType type = detail::memory_type_of(p);
    return type == cudaMemoryTypeDevice || type == cudaMemoryTypeManaged;
  }

  /// `bytes` of pinned host memory from the caching pinned allocator, for use on `stream`.
  [[nodiscard]] static void* host_alloc(std::size_t bytes, StreamRef stream) {
    HostAllocator& a = host_allocator();
    detail::ensure_lazy_init();
    detail::last_raw_error() = cudaSuccess;
    try {
      return a.allocate(bytes, stream);
    } catch (const OutOfMemoryError&) {
      rethrow_if_not_oom();
      throw;
    }
  }
  [[nodiscard]] static void* host_alloc(std::size_t bytes) { return host_alloc(bytes, Streams::current_stream()); }
  /// Returns pinned memory from host_alloc to the cache; InvalidArgumentError if it did not come from there.
  static void host_free(void* p) {
    if (p != nullptr) host_allocator().free(p);
  }
  static void host_record_stream(void* p, StreamRef stream) { host_allocator().record_stream(p, stream); }
  static void host_empty_cache() { host_allocator().empty_cache(); }
  [[nodiscard]] static MemoryStats host_memory_stats() { return host_allocator().stats(); }

  // ---- copies ----------------------------------------------------------------------------------------

  /// Copies `bytes` from src to dst in `stream` order (cudaMemcpyAsync, cudaMemcpyDefault: any
  /// combination of host and device memory). Returns before the copy completes when host memory is
  /// pinned; synchronize the stream (or record an event) before reading dst or reusing src.
  static void copy_async(StreamRef stream, void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    const detail::LegacyStreamScope scope(stream.get(), stream.device_index());
    ACCEL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream.get()));
  }

 private:
  struct Table {
    std::mutex mutex;
    std::unique_ptr<std::atomic<DeviceAllocator*>[]> slots;
  };

  static Table& allocators() {
    static Table* const table = [] {
      auto* t = new Table();
      const int count = Devices::device_count();
      t->slots.reset(new std::atomic<DeviceAllocator*>[static_cast<std::size_t>(count > 0 ? count : 1)]());
      return t;
    }();
    return *table;
  }

  template <class F>
  static void for_each_allocator(F&& f) {
    Table& table = allocators();
    const int count = Devices::device_count();
    for (int d = 0; d < count; ++d) {
      if (DeviceAllocator* a = table.slots[d].load(std::memory_order_acquire)) f(*a);
    }
  }

  // An allocation the allocator reports as out of memory failed for another reason (a sticky error,
  // an unusable device): throw that instead.
  static void rethrow_if_not_oom() {
    const cudaError_t status = std::exchange(detail::last_raw_error(), cudaSuccess);
    if (status != cudaSuccess && status != cudaErrorMemoryAllocation) {
      detail::throw_error(status, "cudaMalloc (in the caching allocator)", std::source_location::current());
    }
  }

  static std::size_t to_size(std::int64_t v) noexcept { return v > 0 ? static_cast<std::size_t>(v) : 0; }
};

}  // namespace accel::cuda
