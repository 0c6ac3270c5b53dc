// accel/cpu/memory.hpp — the CPU backend's memory: caching allocators over host memory, pinning.
//
//   accel::cpu::HostMemory        raw policy for CachingAllocator: page-aligned anonymous mappings
//                                 (2 MiB aligned and THP-advised from 2 MiB up; the allocator's
//                                 segments are all >= 2 MiB), 64-byte aligned heap memory below 64 KiB
//   accel::cpu::PinnedHostMemory  the same, page-locked with mlock (torch's cudaHostAlloc staging)
//   accel::cpu::Memory            MemoryApi (concepts/memory.hpp), inherited by accel::CpuBackend
//                                 (BasicMemory<>: a template only to compile what a TU calls)
//
// Each logical CPU device (cpu/device.hpp) has its own CachingAllocator<HostMemory>, created on first
// use and never destroyed (it outlives static destruction). Statistics count these allocators' blocks,
// not the process RSS that DeepSpeed's CPU accelerator reports. Every device reports the host's
// physical memory as total_memory (or the process's cgroup memory limit, a container's, where smaller);
// available_memory is /proc/meminfo's MemAvailable (at most the room left under that limit), capped by
// the device's memory fraction minus what it has reserved.
//
// Pinned memory: pin_memory(p, n) page-locks [p, p+n) with mlock and tracks the range (overlapping an
// already pinned range is an InvalidArgumentError, as cudaHostRegister refuses it); unpin_memory(p)
// unlocks the range that starts at p. host_alloc(n) serves page-locked staging buffers from a caching
// allocator whose segments are mlocked, as torch's pinned host allocator does. A failing mlock throws
// accel::Error with errno and a hint about RLIMIT_MEMLOCK (`ulimit -l`) or CAP_IPC_LOCK.
// is_pinned(p) is true inside a pinned range or a host_alloc segment; on_accelerator(p) is true inside a
// segment of a device allocator.
// The pages (mappings, /proc/meminfo, the deferred release of segments) are cpu/detail/host_pages.hpp;
// the pinned ranges cpu/detail/pinned_ranges.hpp; host_alloc and its siblings, shared with CUDA,
// memory/pinned.hpp (PinnedHostAllocation).
//
// fork(): every allocator is locked across a fork (pthread_atfork; see detail::install_fork_handlers),
// so a child inherits them consistent and usable even while other threads were allocating.
//
// A Stream's destructor, once the stream is drained, retires it in every allocator
// (CachingAllocator::retire_stream): its cached blocks serve the next stream that needs them, so an
// engine that makes a stream per step keeps one working set reserved, not one per step.
#pragma once

#include <accel/core/error.hpp>
#include <accel/cpu/detail/host_pages.hpp>
#include <accel/cpu/detail/pinned_ranges.hpp>
#include <accel/cpu/detail/stream_registry.hpp>
#include <accel/cpu/detail/stream_state.hpp>
#include <accel/cpu/device.hpp>
#include <accel/cpu/event.hpp>
#include <accel/cpu/stream.hpp>
#include <accel/core/memory_stats.hpp>
#include <accel/detail/min_max.hpp>
#include <accel/memory/allocator_statistics.hpp>
#include <accel/memory/caching_allocator.hpp>
#include <accel/memory/detail/copy_arguments.hpp>
#include <accel/memory/pinned.hpp>
#include <accel/memory/detail/stream_retirement.hpp>

#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

namespace accel::cpu {

/// CachingAllocator policy over plain host memory (see the header comment).
struct HostMemory {
  using stream_type = StreamRef;
  using event_type = Event;

  static void* allocate(int, std::size_t bytes) noexcept {
    detail::reap_deferred_releases();
    if (bytes == 0 || bytes > detail::physical_memory()) return nullptr;
    if (bytes >= detail::heap_threshold) return detail::map_pages(bytes);
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  }
  /// Deferred until the streams have run what was enqueued before (see detail::release_segment).
  static void deallocate(int, void* p, std::size_t bytes) noexcept { detail::release_segment(p, bytes, false); }
  static Event record_event(StreamRef s) {
    Event e;
    e.record(s);
    return e;
  }
  // Not query()/synchronize(): in a forked child, work of an inherited stream counts as done here.
  static bool event_done(const Event& e) { return e.done_or_lost_in_fork(); }
  static void event_synchronize(const Event& e) { e.wait_done_or_lost_in_fork(); }
  static MemoryInfo memory_info(int) { return {detail::available_host_memory(), detail::physical_memory()}; }
  static std::string device_name(int device) { return "cpu:" + std::to_string(device); }
};

/// CachingAllocator policy over page-locked host memory: HostMemory's mappings, mlocked.
struct PinnedHostMemory {
  using stream_type = StreamRef;
  using event_type = Event;

  static void* allocate(int, std::size_t bytes) noexcept {
    detail::reap_deferred_releases();
    if (bytes == 0 || bytes > detail::physical_memory()) return nullptr;
    void* p = detail::map_pages(bytes);
    if (p == nullptr) return nullptr;
    if (::mlock(p, bytes) != 0) {
      detail::last_mlock_errno().store(errno, std::memory_order_relaxed);
      detail::unmap_pages(p, bytes);
      return nullptr;
    }
    return p;
  }
  static void deallocate(int, void* p, std::size_t bytes) noexcept { detail::release_segment(p, bytes, true); }
  static Event record_event(StreamRef s) { return HostMemory::record_event(s); }
  // Not query()/synchronize(): in a forked child, work of an inherited stream counts as done here.
  static bool event_done(const Event& e) { return e.done_or_lost_in_fork(); }
  static void event_synchronize(const Event& e) { e.wait_done_or_lost_in_fork(); }
  static MemoryInfo memory_info(int) { return {detail::available_host_memory(), detail::physical_memory()}; }
  static std::string device_name(int) { return "cpu-pinned"; }
  static std::string oom_hint(int) {
    const int err = detail::last_mlock_errno().load(std::memory_order_relaxed);
    if (err == 0) return {};
    return "The last segment could not be page-locked: mlock: " + detail::errno_text(err) + " (errno " +
           std::to_string(err) + "). " + detail::memlock_hint();
  }
};

using HostCachingAllocator = CachingAllocator<HostMemory>;
using PinnedCachingAllocator = CachingAllocator<PinnedHostMemory>;

namespace detail {

// One lazily created allocator per device; the table and the allocators are never destroyed.
struct HostAllocatorTable {
  explicit HostAllocatorTable(int n)
      : count(n), slots(std::make_unique<std::atomic<HostCachingAllocator*>[]>(static_cast<std::size_t>(n))) {}
  int count;
  std::unique_ptr<std::atomic<HostCachingAllocator*>[]> slots;
};

inline HostAllocatorTable& host_allocators() {
  static HostAllocatorTable* table = new HostAllocatorTable(accel::detail::max_of(Devices::device_count(), 1));
  return *table;
}

inline HostCachingAllocator* existing_host_allocator(int device) noexcept {
  HostAllocatorTable& t = host_allocators();
  if (device < 0 || device >= t.count) return nullptr;
  return t.slots[static_cast<std::size_t>(device)].load(std::memory_order_acquire);
}

inline std::atomic<PinnedCachingAllocator*>& pinned_allocator_slot() noexcept {
  static std::atomic<PinnedCachingAllocator*> slot{nullptr};
  return slot;
}

// ---- fork() ---------------------------------------------------------------------------------------
//
// A thread inside an allocator when another thread forks would leave the child an allocator whose
// mutex is held by a thread that does not exist there (the child's first allocation hangs) and whose
// pools may be half updated. So a pthread_atfork prepare handler takes every lock of this file — the
// creation lock (no allocator appears meanwhile), each device allocator, the pinned allocator, the
// deferred releases and the pinned ranges — and the parent and child handlers give them back: the
// child inherits every allocator between two operations, consistent and usable.
//
// Why it cannot deadlock. The locks and the only nestings that running code has (held -> taken):
//   creation lock G     -> nothing here (an allocator's constructor reads the environment only)
//   allocator mutex A   -> D (the raw policy's reap/release), R (release_segment's stream_frontier),
//                          a stream's queue mutex S (record_event); never another A, never G
//   deferred releases D, pinned ranges P, the registry's R (stream_registry.hpp), a stream's S: held
//                          around their own containers and atomics, never while taking G, A, D or P
//                          (R may take S, and S a graph capture's mutex: locks prepare does not take)
// and nothing waits for stream work while holding A (synchronize_and_free_events releases it first;
// the one exception, free's fallback when no memory is left to track an event, predates fork support).
// The prepare handlers take G, A (devices in order, then pinned), D, P and then R: the registry's
// handler was registered first (install_fork_handlers calls registry() before pthread_atfork) and
// POSIX runs prepare handlers in reverse order of registration. That is one global order
// G < A < D < P < R that every nesting above also follows, so no cycle of waits can form: every lock
// prepare waits for is held by a thread that will release it without needing one prepare holds.
inline std::mutex& allocator_creation_mutex() noexcept {
  static auto* const m = new std::mutex();  // never destroyed, like the allocators
  return *m;
}

inline void lock_allocators_for_fork() noexcept {
  allocator_creation_mutex().lock();
  HostAllocatorTable& t = host_allocators();
  for (int d = 0; d < t.count; ++d) {
    if (auto* a = t.slots[static_cast<std::size_t>(d)].load(std::memory_order_acquire)) a->lock_for_fork();
  }
  if (auto* a = pinned_allocator_slot().load(std::memory_order_acquire)) a->lock_for_fork();
  deferred().mutex.lock();
  pinned().mutex.lock();
}

// In the parent and in the child (where the thread that forked is the only one and owns them all).
inline void unlock_allocators_after_fork() noexcept {
  pinned().mutex.unlock();
  deferred().mutex.unlock();
  if (auto* a = pinned_allocator_slot().load(std::memory_order_acquire)) a->unlock_after_fork();
  HostAllocatorTable& t = host_allocators();
  for (int d = t.count; d-- > 0;) {
    if (auto* a = t.slots[static_cast<std::size_t>(d)].load(std::memory_order_acquire)) a->unlock_after_fork();
  }
  allocator_creation_mutex().unlock();
}

/// Registers the fork handlers once: before the first allocator exists, or the first pinned range.
inline void install_fork_handlers() {
  static const bool installed = [] {
    (void)registry();  // its handlers first, so that its prepare runs after ours (see above)
    (void)host_allocators();  // everything the handlers touch exists before they can run
    (void)deferred();
    (void)pinned();
    (void)allocator_creation_mutex();
    if (::pthread_atfork(lock_allocators_for_fork, unlock_allocators_after_fork, unlock_allocators_after_fork) != 0) {
      throw Error(Errc::runtime_failure, "pthread_atfork failed: cannot make the CPU allocators safe across fork()");
    }
    return true;
  }();
  (void)installed;
}

/// A destroyed, drained stream (cpu/stream.hpp): every allocator may hand its cached blocks to any
/// stream, and drops the record_stream uses of it (blocks of any device may have been used on it).
inline void retire_stream_everywhere(int /*device*/, std::uint64_t stream_id) noexcept {
  HostAllocatorTable& t = host_allocators();
  for (int d = 0; d < t.count; ++d) {
    if (auto* a = t.slots[static_cast<std::size_t>(d)].load(std::memory_order_acquire)) a->retire_stream(stream_id);
  }
  if (auto* a = pinned_allocator_slot().load(std::memory_order_acquire)) a->retire_stream(stream_id);
}

/// The allocator in `slot`, made by make() on first use; created under the creation lock, so that
/// the fork handlers see every allocator that exists.
template <class A, class Make>
A& create_once(std::atomic<A*>& slot, Make make) {
  A* current = slot.load(std::memory_order_acquire);
  if (current != nullptr) return *current;
  install_fork_handlers();
  accel::detail::StreamRetirement<StreamRef>::install(&retire_stream_everywhere);
  const std::lock_guard<std::mutex> lock(allocator_creation_mutex());
  current = slot.load(std::memory_order_relaxed);
  if (current != nullptr) return *current;
  auto fresh = make();
  slot.store(fresh.get(), std::memory_order_release);
  return *fresh.release();
}

}  // namespace detail

/// MemoryApi for accel::CpuBackend: every function is static. Use it as accel::cpu::Memory. A class
/// template only so that its function bodies, and the allocator code they call, are compiled where they
/// are called: g++ instantiates every template a non-template inline function uses, called or not.
template <class Unused = void>
struct BasicMemory : AllocatorStatistics<BasicMemory<Unused>, Devices>,
                     PinnedHostAllocation<BasicMemory<Unused>, PinnedCachingAllocator, Streams> {
  // ---- allocators -----------------------------------------------------------------------------

  /// The caching allocator of `device` (created on first use; throws for a device that does not exist).
  static HostCachingAllocator& allocator(int device) {
    // Once it exists (the device index was checked when it was made): one load, no call.
    if (HostCachingAllocator* a = detail::existing_host_allocator(device)) [[likely]] return *a;
    return create_allocator(device);
  }
  static HostCachingAllocator& allocator() { return allocator(Devices::current_device()); }
  // pinned_allocator(): PinnedHostAllocation (memory/pinned.hpp).

  // ---- allocation -----------------------------------------------------------------------------

  /// `bytes` on `stream`'s device, for use in `stream` order; nullptr for 0 bytes.
  [[nodiscard]] static void* raw_alloc(std::size_t bytes, StreamRef stream) {
    return allocator(stream.device_index()).allocate(bytes, stream);
  }

  /// Returns p (from raw_alloc, on any device) to its device's cache. nullptr is a no-op.
  static void raw_delete(void* p) {
    if (p == nullptr) return;
    const int current = Devices::current_device();
    if (auto* a = detail::existing_host_allocator(current); a != nullptr && a->try_free(p)) [[likely]] return;
    raw_delete_elsewhere(p, current);
  }

  /// raw_delete that reports instead of throwing: true when p (or nullptr) was freed; false, changing
  /// nothing, when no device's allocator holds it as a live allocation. One lookup, where asking
  /// on_accelerator(p) first would make two (AnyBackend frees through it).
  [[nodiscard]] static bool try_raw_delete(void* p) {
    if (p == nullptr) return true;
    const int current = Devices::current_device();
    if (auto* a = detail::existing_host_allocator(current); a != nullptr && a->try_free(p)) [[likely]] return true;
    return try_raw_delete_elsewhere(p, current);
  }

  // raw_delete of memory that is not the current device's: the other devices' allocators, in turn.
  [[gnu::noinline]] static void raw_delete_elsewhere(void* p, int current) {
    if (!try_raw_delete_elsewhere(p, current)) throw not_allocated(p, "raw_delete");
  }
  [[gnu::noinline]] static bool try_raw_delete_elsewhere(void* p, int current) {
    const int count = detail::host_allocators().count;
    for (int d = 0; d < count; ++d) {
      if (d == current) continue;
      if (auto* a = detail::existing_host_allocator(d); a != nullptr && a->try_free(p)) return true;
    }
    return false;
  }

  /// Copies `bytes` from src to dst in `stream` order (a memcpy task on the stream); returns at once.
  /// The ranges must stay valid until the stream reaches the copy (as with cudaMemcpyAsync).
  static void copy_async(StreamRef stream, void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    accel::detail::check_copy_arguments(dst, src, bytes);
    if (dst == src) return;  // onto itself: the bytes are there already (memcpy's restrict forbids the call)
    stream.enqueue([dst, src, bytes] { std::memcpy(dst, src, bytes); });
  }

  /// p (from raw_alloc) is also used on `stream`; see CachingAllocator::record_stream.
  static void record_stream(void* p, StreamRef stream) {
    if (p == nullptr) return;
    const int count = detail::host_allocators().count;
    for (int d = 0; d < count; ++d) {
      if (auto* a = detail::existing_host_allocator(d); a != nullptr && a->try_record_stream(p, stream)) return;
    }
    throw not_allocated(p, "record_stream");
  }

  /// Waits for pending cross-stream frees and releases every free cached segment, on every device
  /// (as torch.cuda.empty_cache does). Pinned host memory has host_empty_cache().
  static void empty_cache() {
    const int count = detail::host_allocators().count;
    for (int d = 0; d < count; ++d) {
      if (auto* a = detail::existing_host_allocator(d)) a->empty_cache();
    }
  }

  // ---- device memory --------------------------------------------------------------------------

  /// Physical RAM of the host, or the process's cgroup memory limit where smaller; every logical CPU
  /// device reports it.
  [[nodiscard]] static std::size_t total_memory() { return total_memory(Devices::current_device()); }
  [[nodiscard]] static std::size_t total_memory(int dev) {
    Devices::check_device(dev);
    return detail::physical_memory();
  }

  /// MemAvailable (within the cgroup memory limit), capped by the device's memory fraction minus what
  /// its allocator has reserved.
  [[nodiscard]] static std::size_t available_memory() { return available_memory(Devices::current_device()); }
  [[nodiscard]] static std::size_t available_memory(int dev) {
    Devices::check_device(dev);
    std::size_t available = detail::available_host_memory();
    if (auto* a = detail::existing_host_allocator(dev)) {
      const std::size_t allowed = a->allowed_memory();
      const std::size_t reserved = BasicMemory::bytes(a->reserved_bytes().current);
      available = accel::detail::min_of(available, allowed > reserved ? allowed - reserved : std::size_t{0});
    }
    return available;
  }

  /// (free, total) like torch.cuda.mem_get_info: available_memory's host figure and total_memory.
  [[nodiscard]] static MemoryInfo get_memory_info() { return get_memory_info(Devices::current_device()); }
  [[nodiscard]] static MemoryInfo get_memory_info(int dev) {
    Devices::check_device(dev);
    return HostMemory::memory_info(dev);
  }

  // ---- pinned host memory ---------------------------------------------------------------------

  /// Page-locks [p, p + bytes) and remembers the range (torch's cudaHostRegister). Throws
  /// InvalidArgumentError for an empty or overlapping range, accel::Error when mlock fails.
  static void pin_memory(void* p, std::size_t bytes) {
    const auto start = reinterpret_cast<std::uintptr_t>(p);
    const std::string what = "pin_memory(" + detail::address_text(p) + ", " + std::to_string(bytes) + " bytes)";
    if (p == nullptr || bytes == 0) throw InvalidArgumentError(what + ": the range is empty");
    detail::install_fork_handlers();  // the pinned ranges' lock is held across fork() too
    if (bytes > UINTPTR_MAX - start) throw InvalidArgumentError(what + ": the range wraps around the address space");
    const std::uintptr_t end = start + bytes;
    if (BasicMemory::in_host_alloc_memory(p) || BasicMemory::in_host_alloc_memory(reinterpret_cast<void*>(end - 1))) {
      throw InvalidArgumentError(what + ": the range is host_alloc memory, which is pinned already");
    }
    detail::pin_range(start, bytes, what);
  }

  /// Unlocks the range pinned at p; false (and nothing changes) when no pinned range starts at p.
  static bool unpin_memory(void* p) {
    detail::install_fork_handlers();
    return detail::unpin_range(reinterpret_cast<std::uintptr_t>(p));
  }

  /// True when p lies in a range pinned with pin_memory or in host_alloc memory.
  [[nodiscard]] static bool is_pinned(const void* p) {
    detail::install_fork_handlers();
    return detail::in_pinned_range(reinterpret_cast<std::uintptr_t>(p)) || BasicMemory::in_host_alloc_memory(p);
  }

  /// True when p lies in memory of a device's caching allocator (raw_alloc), on any CPU device.
  [[nodiscard]] static bool on_accelerator(const void* p) {
    const int count = detail::host_allocators().count;
    for (int d = 0; d < count; ++d) {
      if (auto* a = detail::existing_host_allocator(d); a != nullptr && a->owns(p)) return true;
    }
    return false;
  }

  // host_alloc, host_free, host_record_stream, host_empty_cache, host_memory_stats: PinnedHostAllocation
  // (memory/pinned.hpp). host_alloc throws OutOfMemoryError, with the mlock error and the RLIMIT_MEMLOCK
  // hint when locking failed (PinnedHostMemory::oom_hint).

 private:
  friend PinnedHostAllocation<BasicMemory, PinnedCachingAllocator, Streams>;

  static std::atomic<PinnedCachingAllocator*>& pinned_slot() noexcept { return detail::pinned_allocator_slot(); }

  // Under the creation lock, after installing the fork handlers (detail::create_once).
  [[gnu::noinline]] static PinnedCachingAllocator& create_pinned_allocator() {
    return detail::create_once(detail::pinned_allocator_slot(), [] { return std::make_unique<PinnedCachingAllocator>(0); });
  }

  [[gnu::noinline]] static HostCachingAllocator& create_allocator(int device) {
    Devices::check_device(device);
    auto& slot = detail::host_allocators().slots[static_cast<std::size_t>(device)];
    return detail::create_once(slot, [device] { return std::make_unique<HostCachingAllocator>(device); });
  }

  static InvalidArgumentError not_allocated(void* p, const char* what) {
    std::string msg = std::string(what) + "(" + detail::address_text(p) + "): the pointer was not allocated by ";
    const int count = detail::host_allocators().count;
    msg += count == 1 ? std::string("cpu:0's caching allocator") : "the caching allocator of any of the " +
                                                                        std::to_string(count) + " cpu devices";
    msg += " (or was already freed)";
    for (int d = 0; d < count; ++d) {
      if (auto* a = detail::existing_host_allocator(d); a != nullptr && a->owns(p)) {
        msg += "; it lies inside " + a->name() + "'s memory but is not the start of a live allocation";
      }
    }
    msg += BasicMemory::host_alloc_hint(p);
    return InvalidArgumentError(msg);
  }
};

using Memory = BasicMemory<>;

}  // namespace accel::cpu
