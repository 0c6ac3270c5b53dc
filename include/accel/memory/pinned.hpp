// accel/memory/pinned.hpp — the pinned host allocator's calls, once for every backend.
//
// A backend's Memory struct derives from PinnedHostAllocation<Memory, Allocator, Streams>, where
// Allocator is its CachingAllocator of page-locked host memory (torch's pinned host allocator), and
// provides (public, or private with this mixin as a friend):
//   static std::atomic<Allocator*>& pinned_slot()   the allocator once created; nullptr before
//   static Allocator& create_pinned_allocator()     creates it on first use (the backend's locks and
//                                                   checks: the CPU's fork handlers, CUDA's availability)
// and optionally, to wrap the allocation (CUDA turns an "out of memory" that was something else into
// the error CUDA gave):
//   static void* allocate_pinned(Allocator&, std::size_t bytes, Allocator::stream_type stream)
// This supplies pinned_allocator, host_alloc (with and without a stream), host_free,
// host_record_stream, host_empty_cache and host_memory_stats.
//
// pin_memory / unpin_memory / is_pinned stay in the backends: the CPU page-locks with mlock and keeps
// its own range registry (cpu/detail/pinned_ranges.hpp), CUDA registers with cudaHostRegister and
// asks CUDA (the driver keeps the ranges and refuses overlaps).
#pragma once

#include <accel/core/memory_stats.hpp>

#include <atomic>
#include <cstddef>
#include <string>

namespace accel {

template <class Memory, class Allocator, class Streams>
struct PinnedHostAllocation {
  /// The caching allocator of page-locked host memory behind host_alloc (created on first use).
  [[nodiscard]] static Allocator& pinned_allocator() {
    if (Allocator* existing = Memory::pinned_slot().load(std::memory_order_acquire)) [[likely]] return *existing;
    return Memory::create_pinned_allocator();
  }

  /// Page-locked host memory for staging copies (torch's pinned host allocator), cached; for use in
  /// `stream` order (default: the current stream).
  [[nodiscard]] static void* host_alloc(std::size_t bytes) { return host_alloc(bytes, Streams::current_stream()); }
  [[nodiscard]] static void* host_alloc(std::size_t bytes, typename Allocator::stream_type stream) {
    return Memory::allocate_pinned(pinned_allocator(), bytes, stream);
  }
  /// Returns host_alloc memory to its cache; InvalidArgumentError for anything else.
  static void host_free(void* p) {
    if (p == nullptr) return;
    pinned_allocator().free(p);
  }
  /// host_alloc memory is also used on `stream` (see record_stream).
  static void host_record_stream(void* p, typename Allocator::stream_type stream) { pinned_allocator().record_stream(p, stream); }
  /// Releases the free cached segments of pinned host memory.
  static void host_empty_cache() {
    if (Allocator* pinned = Memory::pinned_slot().load(std::memory_order_acquire)) pinned->empty_cache();
  }
  [[nodiscard]] static MemoryStats host_memory_stats() { return pinned_allocator().stats(); }

 protected:
  /// The default allocation: the allocator's own (a backend may hide it with its own).
  static void* allocate_pinned(Allocator& allocator, std::size_t bytes, typename Allocator::stream_type stream) {
    return allocator.allocate(bytes, stream);
  }

  /// Whether p lies in host_alloc memory (false before the first host_alloc).
  [[nodiscard]] static bool in_host_alloc_memory(const void* p) {
    Allocator* pinned = Memory::pinned_slot().load(std::memory_order_acquire);
    return pinned != nullptr && pinned->owns(p);
  }

  /// What a "not allocated by the device allocator" error adds when p is host_alloc memory.
  [[nodiscard]] static std::string host_alloc_hint(const void* p) {
    return in_host_alloc_memory(p) ? "; it is pinned host memory from host_alloc: free it with host_free" : "";
  }
};

}  // namespace accel
