// accel/concepts/memory.hpp — MemoryApi: the caching allocator, its statistics, and pinned memory.
//
// Every backend serves device memory through accel::CachingAllocator (memory/caching_allocator.hpp),
// so the statistics below mean the same thing everywhere and match torch.cuda.memory_stats().
// `dev` is optional everywhere (default: the current device); an index out of range throws
// InvalidArgumentError.
//   b.raw_alloc(bytes, s) -> void*   stream-ordered allocation on s's device, valid on s; 0 bytes gives
//                                    nullptr; throws OutOfMemoryError (after freeing the cache and retrying)
//   b.raw_delete(p)                  returns p to the cache; p must come from raw_alloc (else
//                                    InvalidArgumentError, and nothing changes); nullptr is a no-op
//   b.try_raw_delete(p) -> bool      optional: raw_delete that returns false instead of throwing (one
//                                    lookup; AnyBackend uses it where present, else on_accelerator first)
//   b.copy_async(s, dst, src, bytes) copies in s's order (host<->device, device<->device); returns at once;
//                                    a null dst or src with bytes > 0 is an InvalidArgumentError
//   b.record_stream(p, s)            p is also used on s: it is not reused until s's work enqueued
//                                    before the free has finished
//   b.empty_cache()                  releases every unused cached segment
//   b.memory_allocated(dev), max_memory_allocated, reset_max_memory_allocated,
//   b.memory_reserved(dev), max_memory_reserved, memory_cached, max_memory_cached,
//   reset_max_memory_cached -> std::size_t bytes (the cached names are the legacy aliases of reserved)
//   b.memory_stats(dev) -> MemoryStats       torch's key set; .flat() gives the "a.b.c" -> value map
//   b.reset_peak_memory_stats(dev), b.reset_accumulated_memory_stats(dev)
//   b.set_per_process_memory_fraction(f, dev)  caps reserved memory at f * total_memory (0 < f <= 1)
//   b.total_memory(dev), b.available_memory(dev) -> std::size_t; b.get_memory_info(dev) -> MemoryInfo
//   b.pin_memory(p, bytes)           page-locks a host range (tracked); b.unpin_memory(p) -> bool
//   b.is_pinned(p) -> bool           p lies in pinned host memory known to the backend
//   b.on_accelerator(p) -> bool      p lies in this backend's device memory: its allocator's blocks (on
//                                    CUDA also any other device or managed allocation, as the driver says)
#pragma once

#include <accel/core/memory_stats.hpp>

#include <concepts>
#include <cstddef>

namespace accel {

template <class B>
concept MemoryApi = requires(const B b, int dev, std::size_t n, void* p, const void* cp,
                             typename B::StreamRef s, double fraction) {
  { b.raw_alloc(n, s) } -> std::same_as<void*>;
  b.raw_delete(p);
  b.record_stream(p, s);
  b.copy_async(s, p, cp, n);
  b.empty_cache();
  { b.memory_allocated() } -> std::same_as<std::size_t>;
  { b.memory_allocated(dev) } -> std::same_as<std::size_t>;
  { b.max_memory_allocated(dev) } -> std::same_as<std::size_t>;
  b.reset_max_memory_allocated(dev);
  { b.memory_reserved(dev) } -> std::same_as<std::size_t>;
  { b.max_memory_reserved(dev) } -> std::same_as<std::size_t>;
  { b.memory_cached(dev) } -> std::same_as<std::size_t>;
  { b.max_memory_cached(dev) } -> std::same_as<std::size_t>;
  b.reset_max_memory_cached(dev);
  { b.memory_stats() } -> std::same_as<MemoryStats>;
  { b.memory_stats(dev) } -> std::same_as<MemoryStats>;
  b.reset_peak_memory_stats(dev);
  b.reset_accumulated_memory_stats(dev);
  b.set_per_process_memory_fraction(fraction, dev);
  { b.total_memory(dev) } -> std::same_as<std::size_t>;
  { b.available_memory(dev) } -> std::same_as<std::size_t>;
  { b.get_memory_info(dev) } -> std::same_as<MemoryInfo>;
  b.pin_memory(p, n);
  { b.unpin_memory(p) } -> std::same_as<bool>;
  { b.is_pinned(cp) } -> std::same_as<bool>;
  { b.on_accelerator(cp) } -> std::same_as<bool>;
};

}  // namespace accel
