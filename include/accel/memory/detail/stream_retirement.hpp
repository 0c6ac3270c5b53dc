// accel/memory/detail/stream_retirement.hpp — how a backend's Stream tells its caching allocators
// that it is gone (CachingAllocator::retire_stream).
//
// A stream's header cannot include its backend's memory header (that one includes it), so the memory
// header installs a hook here when it makes its first allocator, and the Stream's destructor calls
// notify() once the stream's work has completed. Before any allocator exists nothing is cached, and
// notify() does nothing. One hook per stream view type (the allocators' stream_type), so backends
// never see each other's streams.
#pragma once

#include <atomic>
#include <cstdint>

namespace accel::detail {

template <class StreamView>
struct StreamRetirement {
  using Hook = void (*)(int device, std::uint64_t stream_id) noexcept;

  static void install(Hook hook) noexcept { slot().store(hook, std::memory_order_release); }

  /// Stream `stream_id` of `device` is destroyed and its work is done.
  static void notify(int device, std::uint64_t stream_id) noexcept {
    if (const Hook hook = slot().load(std::memory_order_acquire)) hook(device, stream_id);
  }

 private:
  static std::atomic<Hook>& slot() noexcept {
    static std::atomic<Hook> hook{nullptr};  // constant-initialized: usable during static destruction
    return hook;
  }
};

}  // namespace accel::detail
