// A fake raw-memory policy for CachingAllocator tests: a device with a configurable capacity that
// hands out made-up (never dereferenced) addresses, counts allocate/deallocate calls, and has
// streams that are plain ids and events that complete only when a test says so.
#pragma once

#include <accel/memory/caching_allocator.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace fake {

struct Stream {
  std::uint64_t sid = 0;
  [[nodiscard]] std::uint64_t id() const noexcept { return sid; }
};

struct Event {
  std::shared_ptr<bool> done;
  std::uint64_t stream = 0;
};

struct Device {
  std::mutex mutex;
  std::size_t capacity = std::size_t{40} << 20;
  std::size_t used = 0;
  std::uintptr_t next_address = std::uintptr_t{1} << 40;
  std::map<std::uintptr_t, std::size_t> live;  // segments handed out
  int allocs = 0;
  int frees = 0;
  int failed_allocs = 0;
  int bad_deallocs = 0;  // deallocate of an unknown pointer or with a wrong size
  int syncs = 0;
  bool fail_syncs = false;      // event_synchronize throws (a device error while waiting)
  std::vector<Event> recorded;  // every event, in record order

  void reset(std::size_t cap = std::size_t{40} << 20) {
    std::lock_guard lock(mutex);
    capacity = cap;
    used = 0;
    live.clear();
    allocs = frees = failed_allocs = bad_deallocs = syncs = 0;
    fail_syncs = false;
    recorded.clear();
  }
  /// Completes every event recorded so far on `stream` (all streams when 0).
  void complete(std::uint64_t stream = 0) {
    std::lock_guard lock(mutex);
    for (Event& e : recorded) {
      if (stream == 0 || e.stream == stream) *e.done = true;
    }
  }
  std::size_t live_bytes() {
    std::lock_guard lock(mutex);
    std::size_t sum = 0;
    for (const auto& [p, n] : live) sum += n;
    return sum;
  }
};

inline Device& device() {
  static Device d;
  return d;
}

struct Memory {
  using stream_type = Stream;
  using event_type = Event;

  static void* allocate(int, std::size_t bytes) noexcept {
    Device& d = device();
    std::lock_guard lock(d.mutex);
    if (bytes > d.capacity - d.used) {
      ++d.failed_allocs;
      return nullptr;
    }
    const std::uintptr_t address = d.next_address;
    // Leave a gap so that segments are never adjacent; keep 2 MiB alignment.
    d.next_address += ((bytes + (std::uintptr_t{4} << 20)) >> 21) << 21;
    d.live.emplace(address, bytes);
    d.used += bytes;
    ++d.allocs;
    return reinterpret_cast<void*>(address);
  }
  static void deallocate(int, void* p, std::size_t bytes) noexcept {
    Device& d = device();
    std::lock_guard lock(d.mutex);
    const auto it = d.live.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == d.live.end() || it->second != bytes) {
      ++d.bad_deallocs;
      return;
    }
    d.live.erase(it);
    d.used -= bytes;
    ++d.frees;
  }
  static Event record_event(Stream s) {
    Device& d = device();
    std::lock_guard lock(d.mutex);
    Event e{std::make_shared<bool>(false), s.id()};
    d.recorded.push_back(e);
    return e;
  }
  static bool event_done(const Event& e) { return *e.done; }
  static void event_synchronize(const Event& e) {
    Device& d = device();
    std::lock_guard lock(d.mutex);
    if (d.fail_syncs) throw std::runtime_error("fake: event synchronize failed");
    ++d.syncs;
    *e.done = true;
  }
  static accel::MemoryInfo memory_info(int) {
    Device& d = device();
    std::lock_guard lock(d.mutex);
    return {d.capacity - d.used, d.capacity};
  }
  static std::string device_name(int dev) { return "fake:" + std::to_string(dev); }
};

static_assert(accel::RawMemoryPolicy<Memory>);

using Allocator = accel::CachingAllocator<Memory>;

}  // namespace fake
