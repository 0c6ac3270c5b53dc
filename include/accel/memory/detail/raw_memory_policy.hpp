// accel/memory/detail/raw_memory_policy.hpp — accel::RawMemoryPolicy: what CachingAllocator needs of a
// backend's raw memory.
//
//   using stream_type = ...;   trivially copyable stream view with .id() -> std::uint64_t (unique among
//                              live streams; the allocator keeps only the id of an allocation stream;
//                              2^64 - 1 is reserved: CachingAllocator::retired_stream)
//   using event_type = ...;    movable
//   static void* allocate(int device, std::size_t bytes) noexcept;      nullptr on failure
//   static void deallocate(int device, void* p, std::size_t bytes) noexcept;
//   static event_type record_event(stream_type s);      an event capturing s's work so far
//   static bool event_done(const event_type& e);        non-blocking
//   static void event_synchronize(const event_type& e);
//   static MemoryInfo memory_info(int device);          free and total bytes, for limits and messages
//   static std::string device_name(int device);         "cpu:0", "cuda:0"
//   optional: static std::string oom_hint(int device);  appended to out-of-memory messages
// The allocator calls the policy under its mutex, except event_synchronize (called with the mutex
// released), and never touches the memory it hands out.
#pragma once

#include <accel/core/memory_stats.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace accel {

template <class P>
concept RawMemoryPolicy =
    std::is_trivially_copyable_v<typename P::stream_type> && std::movable<typename P::event_type> &&
    requires(int device, std::size_t n, void* p, typename P::stream_type s, const typename P::event_type& e) {
      { s.id() } -> std::convertible_to<std::uint64_t>;
      { P::allocate(device, n) } noexcept -> std::same_as<void*>;
      { P::deallocate(device, p, n) } noexcept;
      { P::record_event(s) } -> std::same_as<typename P::event_type>;
      { P::event_done(e) } -> std::same_as<bool>;
      P::event_synchronize(e);
      { P::memory_info(device) } -> std::same_as<MemoryInfo>;
      { P::device_name(device) } -> std::convertible_to<std::string>;
    };

/// Whether the policy adds a hint to out-of-memory messages.
template <class P>
concept RawMemoryWithOomHint = requires(int device) {
  { P::oom_hint(device) } -> std::convertible_to<std::string>;
};

}  // namespace accel
